"""`python -m experiments {list, run, reproduce, bench, claims}`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._harness import _registry
from ._harness._bench import run_bench
from ._harness._report import claims_table, load_records, write_report
from ._harness._runner import jax_info, reproduce, run_experiment


def _cmd_list(args) -> int:
    for kind, bench in (("experiments", False), ("benchmarks", True)):
        mods = _registry.discover(bench=bench)
        print(f"{kind} ({len(mods)}):")
        for name, mod in sorted(mods.items()):
            print(f"  {name:40s} {mod.PAPER:4s} {mod.DESCRIPTION}")
    return 0


def _cmd_run(args) -> int:
    mod = _registry.find(args.name)
    rec = run_experiment(mod, out=args.out, full=args.full, seed=args.seed, resume=args.resume)
    print(f"wrote {Path(args.out) / args.name / 'metrics.json'} ({rec['runtime_s']:.1f} s)")
    for c in rec["claims"]:
        print(
            f"  [{'holds' if c['holds'] else 'FAILS'}] {c['claim']}: paper {c['paper']}, "
            f"measured {c['measured']}"
        )
    return 0


def _cmd_reproduce(args) -> int:
    mods = list(_registry.discover().values())
    t0 = time.perf_counter()
    done, failed = reproduce(mods, out=args.out, full=args.full, seed=args.seed, only=args.only)
    header = (
        f"{'FULL' if args.full else 'QUICK'} configs, seed {args.seed}; "
        f"{len(done)} succeeded, {len(failed)} failed in {time.perf_counter() - t0:.0f} s; "
        f"jax {jax_info()}"
    )
    md, page = write_report(args.out, names=[m.NAME for m in mods], failures=failed, header=header)
    print(f"report: {page} and {md}")
    for f in failed:
        print(f"FAILED {f['experiment']}: {f['error']}", file=sys.stderr)
    return 1 if failed else 0


def _cmd_bench(args) -> int:
    rec = run_bench(
        _registry.find(args.name, bench=True), out=args.out, full=args.full, seed=args.seed
    )
    print(f"wrote {Path(args.out) / 'bench' / (args.name + '.json')}")
    for impl, t in rec["timings"].items():
        print(f"  {impl:30s} median {t['median_s']:.4g} s")
    for k, v in rec["ratios"].items():
        print(f"  {k:40s} {v:.3g}x")
    for k, v in rec["fields"].items():
        print(f"  {k:40s} {v:.4g}")
    return 0


def _cmd_claims(args) -> int:
    """Print the claims of every metrics.json under the given folders as one table (later
    folders win for an experiment present in several)."""
    by_name = {}
    for d in args.dirs:
        for rec in load_records(Path(d)):
            by_name[rec["experiment"]] = rec
    sys.stdout.write(claims_table(list(by_name.values())))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="registered experiments and benchmarks")
    r = sub.add_parser("run", help="run one experiment")
    r.add_argument("name")
    r.add_argument("--resume", action="store_true", help="resume from checkpoints in DIR/NAME")
    rp = sub.add_parser("reproduce", help="run all experiments and write the report")
    rp.add_argument("--only", default=None, help="glob over experiment names")
    b = sub.add_parser("bench", help="run one benchmark")
    b.add_argument("name")
    c = sub.add_parser("claims", help="print the claims table of results folders (Markdown)")
    c.add_argument("dirs", nargs="+", help="results folders holding NAME/metrics.json")
    for q in (r, rp, b):
        q.add_argument("--full", action="store_true", help="paper-scale config (GPU/TPU)")
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--out", default="results")
    args = p.parse_args(argv)
    return {
        "list": _cmd_list,
        "run": _cmd_run,
        "reproduce": _cmd_reproduce,
        "bench": _cmd_bench,
        "claims": _cmd_claims,
    }[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
