"""`python -m experiments {list, run, reproduce, bench, claims, bench-table, docs-tables,
papers}`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from fnmatch import fnmatch
from pathlib import Path

from ._harness import _registry
from ._harness._bench import run_bench
from ._harness._config import with_overrides
from ._harness._distributed import start_distributed
from ._harness._dryrun import dry_run
from ._harness._pages import write_docs_tables
from ._harness._papers import PAPERS, bibtex, papers_table
from ._harness._report import bench_table, claims_table, failed_smoke, write_report
from ._harness._runner import (
    config_of,
    full_refusal,
    jax_info,
    reproduce,
    resume_note,
    run_experiment,
)
from ._harness._snapshot import ROOT, load_benches, load_records, stale_results

_EPILOG = """exit status: 0 success; 1 an experiment (or benchmark) failed or a claims
folder held no results; 2 a usage error (unknown name, bad flag, --full refused).

examples:
  python -m experiments run bandits_synthetic --seed 1 --out results
  python -m experiments run cells_rare --resume          # continue from its checkpoints
  python -m experiments run cells_rare --tiny            # the smoke tier's size (seconds)
  python -m experiments run cells_rare --full --dry-run  # check FULL here: data, models, cost
  python -m experiments reproduce --only 'laplex_*'
  python -m experiments claims results/quick             # the claims table as Markdown
  python -m experiments bench-table results/bench        # one row per benchmark
  python -m experiments docs-tables --check              # README/docs tables up to date?
  # one process per host (or per GPU); process 0 writes OUT/NAME and the report:
  python -m experiments run NAME --coordinator 10.0.0.1:8476 --num-processes 2 --process-id 0
  python -m experiments reproduce --distributed          # on each host of a TPU pod slice"""


def _usage_error(message: str) -> int:
    print(f"python -m experiments: error: {message}", file=sys.stderr)
    return 2


def _find(name: str, *, bench: bool = False):
    try:
        return _registry.find(name, bench=bench)
    except _registry.UnknownName as e:
        _usage_error(str(e))
        return None


def _process() -> int:
    import jax

    return jax.process_index()


def _writes() -> bool:
    """Whether this process writes results: process 0 of a multi-process job, or alone."""
    return _process() == 0


def _start(args) -> int | None:
    """Start `jax.distributed` for run/reproduce when the command line or the launcher's
    environment says this is a multi-process job; an exit status when it cannot."""
    try:
        how = start_distributed(
            coordinator=args.coordinator,
            num_processes=args.num_processes,
            process_id=args.process_id,
            auto=args.distributed,
            initialization_timeout=args.init_timeout,
            heartbeat_timeout=args.heartbeat_timeout,
        )
    except ValueError as e:
        return _usage_error(str(e))
    except Exception as e:  # noqa: BLE001 - JAX's errors: the coordinator is not reached
        print(
            f"python -m experiments: error: jax.distributed could not start ({type(e).__name__}: "
            f"{e}); check --coordinator (process 0's HOST:PORT, reachable from every process), "
            "--num-processes and that every process was launched",
            file=sys.stderr,
        )
        return 1
    if how:
        print(f"jax.distributed: {how}", file=sys.stderr)
    return None


def _run_job(fn, args) -> int:
    """Run a command of a multi-process job: a failure in any process (its own error or a
    peer that died in a collective) ends this process at once with exit status 1 and the
    error on stderr, without waiting for the job's shutdown barrier."""
    try:
        return fn(args)
    except BaseException as e:  # noqa: BLE001 - report, then leave without the barrier
        import traceback

        traceback.print_exc()
        print(
            f"python -m experiments: error: process {_process()} of the multi-process job "
            f"failed ({type(e).__name__}: {str(e)[:500]}); a peer process that died or "
            "failed ends every process of the job",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        os._exit(1)


def _refuse_full(mods, args) -> bool:
    """Print why FULL must not start here (unless --force); True when refused."""
    if args.full and args.tiny:
        _usage_error("--full and --tiny: choose one scale")
        return True
    if not args.full or args.force:
        return False
    reasons = [r for r in map(full_refusal, mods) if r]
    for r in reasons[:3]:
        _usage_error(r)
    if len(reasons) > 3:
        _usage_error(f"... and {len(reasons) - 3} more experiments refused")
    return bool(reasons)


def _cmd_list(args) -> int:
    for kind, bench in (("experiments", False), ("benchmarks", True)):
        mods = _registry.discover(bench=bench)
        print(f"{kind} ({len(mods)}):")
        for name, mod in sorted(mods.items()):
            print(f"  {name:40s} {mod.PAPER:4s} {mod.DESCRIPTION}")
    return 0


def _cmd_run(args) -> int:
    mod = _find(args.name)
    if mod is None:
        return 2
    if args.dry_run:
        if not args.full:
            return _usage_error("--dry-run checks the FULL config: add --full")
        try:
            with_overrides(mod.FULL, args.set)
        except ValueError as e:
            return _usage_error(str(e))
        report = dry_run(mod, overrides=args.set, seed=args.seed)
        print("\n".join(report.lines()))
        return 0 if report.ok else 1
    if _refuse_full([mod], args):
        return 2
    if args.resume:
        print(resume_note(mod, args.out))
    try:  # a bad override is a usage error, found before anything runs
        scale = "full" if args.full else "tiny" if args.tiny else "quick"
        with_overrides(config_of(mod, scale), args.set)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rec = run_experiment(
        mod,
        out=args.out,
        full=args.full,
        seed=args.seed,
        resume=args.resume,
        overrides=args.set,
        tiny=args.tiny,
    )
    if not _writes():
        print(f"process {_process()}: ran {args.name} ({rec['runtime_s']:.1f} s); process 0 writes")
        return 0
    print(f"wrote {Path(args.out) / args.name / 'metrics.json'} ({rec['runtime_s']:.1f} s)")
    for c in rec["claims"]:
        print(
            f"  [{c.get('verdict') or ('holds' if c['holds'] else 'fails')}] {c['claim']}: "
            f"paper {c['paper']}, "
            f"measured {c['measured']}"
        )
    return 0


def _cmd_reproduce(args) -> int:
    mods = list(_registry.discover().values())
    if _refuse_full([m for m in mods if args.only is None or fnmatch(m.NAME, args.only)], args):
        return 2
    t0 = time.perf_counter()
    done, failed = reproduce(
        mods, out=args.out, full=args.full, seed=args.seed, only=args.only, tiny=args.tiny
    )
    header = (
        f"{'FULL' if args.full else 'TINY' if args.tiny else 'QUICK'} configs, seed {args.seed}; "
        f"{len(done)} succeeded, {len(failed)} failed in {time.perf_counter() - t0:.0f} s; "
        f"jax {jax_info()}"
    )
    if not _writes():
        print(f"process {_process()}: {header}; process 0 writes the report")
        return 1 if failed else 0
    md, page = write_report(args.out, names=[m.NAME for m in mods], failures=failed, header=header)
    print(f"report: {page} and {md}")
    for f in failed:
        print(f"FAILED {f['experiment']}: {f['error']}", file=sys.stderr)
    return 1 if failed else 0


def _cmd_bench(args) -> int:
    mod = _find(args.name, bench=True)
    if mod is None or _refuse_full([mod], args):
        return 2
    rec = run_bench(mod, out=args.out, full=args.full, seed=args.seed, tiny=args.tiny)
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
    if not by_name:
        print(f"no NAME/metrics.json under {', '.join(args.dirs)}", file=sys.stderr)
        return 1
    stale = failed_smoke(args.smoke_status) if args.smoke_status else set()
    sys.stdout.write(claims_table(list(by_name.values()), stale=stale))
    return 0


def _cmd_bench_table(args) -> int:
    """Print the benchmark table (one row per benchmark) of the JSON files in a folder."""
    benches = load_benches(Path(args.dir))
    if not benches:
        print(f"no benchmark JSON under {args.dir}", file=sys.stderr)
        return 1
    sys.stdout.write(bench_table(benches))
    return 0


def _cmd_docs_tables(args) -> int:
    """Write (or, with --check, compare) README's and the docs' generated tables."""
    changed = write_docs_tables(args.root, check=args.check)
    root = Path(args.root).resolve()
    for path in changed:
        rel = path.resolve().relative_to(root)
        print(f"{'differs' if args.check else 'wrote'}: {rel}")
    if args.check and changed:
        print(
            "the generated tables differ from the snapshot: run `python -m experiments "
            "docs-tables` and commit the result",
            file=sys.stderr,
        )
        return 1
    if not changed:
        print("README and docs tables are up to date with the snapshot")
    results = Path(args.root) / "results"
    stale = stale_results(load_records(results / "quick"))
    stale += stale_results(load_benches(results / "bench"), bench=True)
    for name, why in stale:
        print(f"stale snapshot result {name}: {why} (re-run it at QUICK)", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command line (every flag and positional has a help text)."""
    p = argparse.ArgumentParser(
        prog="python -m experiments",
        description=__doc__,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sub.add_parser("list", help="registered experiments and benchmarks, with their papers")
    r = sub.add_parser(
        "run",
        help="run one experiment",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("name", metavar="NAME", help="the experiment (see `list`), e.g. cells_rare")
    r.add_argument(
        "--resume",
        action="store_true",
        help="continue from the checkpoints of an earlier run in OUT/NAME/checkpoints "
        "(says which it found, or that there are none)",
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="with --full: check the FULL config here without running it (config, data, "
        "models, device memory, a time estimate from one timed TINY run); exit 1 on a problem",
    )
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="replace a field of the config (VALUE is JSON, a bare word a string; repeat "
        "for several), e.g. --set items=12 --set 'families=[\"chain_sum\"]'; metrics.json "
        "then says config quick+overrides and lists the values",
    )
    rp = sub.add_parser("reproduce", help="run all experiments and write the report")
    rp.add_argument(
        "--only", default=None, metavar="GLOB", help="only experiments whose NAME matches GLOB"
    )
    b = sub.add_parser("bench", help="run one benchmark (ours vs peers)")
    b.add_argument("name", metavar="NAME", help="the benchmark (see `list`)")
    c = sub.add_parser(
        "claims",
        help="print the claims table of results folders as Markdown (verdict, interval, null)",
    )
    c.add_argument(
        "dirs", nargs="+", metavar="DIR", help="results folders holding NAME/metrics.json"
    )
    c.add_argument(
        "--smoke-status",
        default=None,
        metavar="FILE",
        help="the smoke tier's status file (`make smoke` writes results/smoke/status.json): "
        "rows of experiments that failed it are marked stale",
    )
    bt = sub.add_parser(
        "bench-table",
        help="print one Markdown row per benchmark (medians, ratios to the peers) of a folder",
    )
    bt.add_argument(
        "dir", metavar="DIR", help="a folder of benchmark JSON files, e.g. results/bench"
    )
    dt = sub.add_parser(
        "docs-tables",
        help="write README's and the docs' generated tables from the committed snapshot "
        "(results/quick, results/bench)",
    )
    dt.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and name the files whose generated parts differ",
    )
    dt.add_argument(
        "--root",
        default=str(ROOT),
        metavar="ROOT",
        help="the repository root holding README.md, docs/ and results/ (default: this one)",
    )
    pp = sub.add_parser(
        "papers", help="the papers the experiments check: authors, venue, identifiers, code"
    )
    pp.add_argument("--bibtex", action="store_true", help="print BibTeX entries instead")
    for q in (r, rp):
        g = q.add_argument_group(
            "multi-process jobs",
            "one process per host (or per GPU), all running the same command; process 0 "
            "writes the results. Started when these flags are given, or when a launcher's "
            "environment names the job (JAX_COORDINATOR_ADDRESS with JAX_NUM_PROCESSES and "
            "JAX_PROCESS_ID; Slurm; Open MPI; TPU on GKE)",
        )
        g.add_argument(
            "--coordinator",
            default=None,
            metavar="HOST:PORT",
            help="process 0's address and a free port, the same for every process",
        )
        g.add_argument(
            "--num-processes", type=int, default=None, metavar="N", help="processes in the job"
        )
        g.add_argument(
            "--process-id", type=int, default=None, metavar="I", help="this process, 0..N-1"
        )
        g.add_argument(
            "--distributed",
            action="store_true",
            help="start jax.distributed with JAX's own cluster detection (Cloud TPU pod "
            "slices: run the same command on every host)",
        )
        g.add_argument(
            "--init-timeout",
            type=int,
            default=300,
            metavar="S",
            help="seconds to wait for every process to join (default: 300)",
        )
        g.add_argument(
            "--heartbeat-timeout",
            type=int,
            default=100,
            metavar="S",
            help="seconds after which a silent process fails the job (default: 100)",
        )
    for q in (r, rp, b):
        q.add_argument(
            "--full",
            action="store_true",
            help="the FULL config, for a GPU/TPU (refused on a CPU, or when its declared "
            "memory exceeds the device's, unless --force); the LM papers' FULL configs use "
            "the pool's models (<= 1.5B), below the papers' model sizes, unless a model "
            "field names a local folder (see --dry-run)",
        )
        q.add_argument(
            "--force", action="store_true", help="start a --full run that would be refused"
        )
        q.add_argument(
            "--tiny",
            action="store_true",
            help="the TINY config: the real code path end to end at a tiny size, in seconds "
            "(the smoke tier; its numbers are not results)",
        )
        q.add_argument(
            "--seed",
            type=int,
            default=0,
            metavar="S",
            help="integer seed; the run's key is jax.random.key(S) (default: 0)",
        )
        q.add_argument(
            "--out",
            default="results",
            metavar="OUT",
            help="results folder; a run writes OUT/NAME/{metrics.json, *.png, run.log} "
            "(default: results)",
        )
    return p


def _cmd_papers(args) -> int:
    if args.bibtex:
        print("\n\n".join(bibtex(p) for p in PAPERS))
    else:
        sys.stdout.write(papers_table())
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd in ("run", "reproduce") and not getattr(args, "dry_run", False):
        status = _start(args)
        if status is not None:
            return status
        import jax

        if jax.process_count() > 1:
            return _run_job({"run": _cmd_run, "reproduce": _cmd_reproduce}[args.cmd], args)
    return {
        "list": _cmd_list,
        "run": _cmd_run,
        "reproduce": _cmd_reproduce,
        "bench": _cmd_bench,
        "claims": _cmd_claims,
        "bench-table": _cmd_bench_table,
        "docs-tables": _cmd_docs_tables,
        "papers": _cmd_papers,
    }[args.cmd](args)


def _main_piped() -> int:
    """`main`, quiet when the reader of stdout goes away (`... list | head`): the rest of
    the output is dropped as the Python docs advise (stdout pointed at devnull so that the
    interpreter's final flush does not raise again), exit status 141 like a shell's SIGPIPE."""
    try:
        return main()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(_main_piped())
