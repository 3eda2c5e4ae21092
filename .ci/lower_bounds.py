"""Print pip constraints pinning every dependency of jaxlab and of its `test` extra (the
components' extras it pulls in) at its declared lower bound: `make test-min` installs them to
check that pyproject.toml's ranges are honest."""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
extras = project["optional-dependencies"]


def requirements(names):
    for name in names:
        for req in extras[name]:
            m = re.fullmatch(r"jaxlab\[(.+)\]", req)
            if m:
                yield from requirements(m.group(1).split(","))
            else:
                yield req


pins = {}
for req in [*project["dependencies"], *requirements(["test"])]:
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?>=([0-9][0-9A-Za-z.]*)", req)
    if not m:
        raise SystemExit(f"pyproject.toml: {req!r} has no `>=` lower bound")
    name = m.group(1).lower()
    pins[name] = max(
        pins.get(name, m.group(3)),
        m.group(3),
        key=lambda v: [int(x) if x.isdigit() else 0 for x in re.split(r"[.]", v)],
    )
sys.stdout.write("".join(f"{n}=={v}.*\n" for n, v in sorted(pins.items())))
