"""Fuzz the engine with random small models and bad input; print the outcomes by stage and kind.

Runs ``--cases`` cases (default 10 000) of ``softsnake.fuzzing`` in each mode ("stop": the first error
ends a case; "continue": errors are caught and building and stepping go on) in worker processes,
and prints one table per mode: how many cases ended at each stage (build, finalize, step) in each
kind (finite, project error, other exception, crash, hang > --timeout s, silent non-finite or
runaway state). Cases that did not end finite or in a project error are listed with their message;
``python -m softsnake.fuzzing SEED MODE CASE`` runs one again. The exit status is 1 if any did.
"""

import argparse
import sys
import time

from softsnake.fuzzing import FAILURES, KINDS, MODES, STAGES, outcome_table, run_cases


def markdown_table(results):
    """The outcome counts of ``results`` as a Markdown table, one row per stage."""
    table = outcome_table(results)
    lines = ["| stage | " + " | ".join(KINDS) + " | all |", "|---" * (len(KINDS) + 2) + "|"]
    for stage in (*STAGES, "?"):
        counts = table[stage]
        if stage == "?" and not sum(counts.values()):
            continue
        lines.append(f"| {stage} | " + " | ".join(str(counts[k]) for k in KINDS) + f" | {sum(counts.values())} |")
    totals = [sum(table[s][k] for s in table) for k in KINDS]
    lines.append("| all | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases per mode (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the case generator (default: %(default)s)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="parallel worker processes (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=200, help="cases per worker process (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds without a result after which a case counts as hung (default: %(default)g)")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if args.cases < 1 or any(m not in MODES for m in modes):
        parser.error(f"--cases must be at least 1 and --modes a list of {', '.join(MODES)}")
    failed = False
    for mode in modes:
        start = time.perf_counter()
        results = run_cases(args.seed, mode, range(args.cases), workers=args.workers, batch=args.batch,
                            timeout=args.timeout)
        wall = time.perf_counter() - start
        caught = sum(r["caught"] for r in results)
        print(f"\nmode {mode}: {args.cases} cases, seed {args.seed}, {wall:.0f} s wall time"
              + (f", {caught} project errors caught on the way" if mode == "continue" else ""))
        print(markdown_table(results))
        bad = [r for r in results if r["kind"] in FAILURES]
        for r in bad:
            print(f"  case {r['case']}: {r['stage']} {r['kind']}: {r['message']}")
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
