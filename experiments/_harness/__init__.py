"""The experiment harness: the contract (`Result`, `Claim`, `Bench`, `RunContext`), discovery,
the runner, benchmarks timing and the report. Experiments import from here only."""

from ._api import Bench as Bench
from ._api import Claim as Claim
from ._api import Result as Result
from ._api import RunContext as RunContext
from ._api import log as log
from ._bench import interleaved_stats as interleaved_stats
from ._bench import run_bench as run_bench
from ._bench import time_callable as time_callable
from ._bench import timing_stats as timing_stats
from ._cache import cache_dir as cache_dir
from ._cache import file_sha256 as file_sha256
from ._cache import load_npz as load_npz
from ._cache import model_sha256 as model_sha256
from ._cache import model_tag as model_tag
from ._cache import save_npz as save_npz
from ._config import config_from_json as config_from_json
from ._config import config_to_json as config_to_json
from ._config import with_overrides as with_overrides
from ._papers import PAPERS as PAPERS
from ._runner import jax_info as jax_info
from ._runner import reproduce as reproduce
from ._runner import run_experiment as run_experiment
from ._stats import residualize as residualize
from ._stats import t_interval as t_interval
