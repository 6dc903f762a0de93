"""Command-line tools over stored results: `specperf report` and `specperf compare`.

Measuring is pytest's job (`pytest tests_perf --profile NAME`); these commands only read run
directories, so a crashed, sharded or old run can still be reported and compared.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .baselines import baseline_from_result
from .results import ResultFileError, load_results
from .verdicts import IMPROVEMENT, NO_BASELINE, PASS, SEVERITY, judge


def cmd_report(args) -> int:
    from .report import write_report

    path = write_report([Path(d) for d in args.run_dirs], Path(args.out) if args.out else None)
    print(f"report: {path}")
    return 0


def cmd_compare(args) -> int:
    """Judge every scenario of NEW against the same scenario of OLD, as if OLD were the baseline."""
    old = {r["scenario"]["id"]: r for r in load_results(Path(args.old)) if r.get("status") == "ok"}
    verdicts = []
    for result in load_results(Path(args.new)):
        baseline = old.get(result["scenario"]["id"])
        if baseline is not None and baseline["device"]["hardware_key"] != result["device"]["hardware_key"]:
            baseline = None      # results from other hardware are never compared
        verdicts.append(judge(result, baseline_from_result(baseline) if baseline else None))
    verdicts.sort(key=lambda v: (SEVERITY.index(v.status), v.scenario_id))
    counts = {s: sum(1 for v in verdicts if v.status == s) for s in SEVERITY}
    print(f"compare {args.old} -> {args.new}: "
          + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    for verdict in verdicts:
        print(f"{verdict.scenario_id}: {verdict.status}" + (f" ({verdict.note})" if verdict.note else ""))
        for metric in verdict.metrics:
            if args.all or metric.status not in (PASS, IMPROVEMENT, NO_BASELINE):
                print(f"    {metric.line()}")
    return 1 if any(v.failed for v in verdicts) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specperf", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="(re)write the HTML, Markdown and JSON report of run directories")
    report.add_argument("run_dirs", nargs="+", help="run directories (reports/<run-id>); several merge")
    report.add_argument("--out", help="output folder (default: the first run directory)")
    report.set_defaults(func=cmd_report)
    compare = sub.add_parser("compare", help="judge run NEW against run OLD; exit 1 on a regression")
    compare.add_argument("old")
    compare.add_argument("new")
    compare.add_argument("--all", action="store_true", help="show passing metrics too")
    compare.set_defaults(func=cmd_compare)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ResultFileError as err:
        print(f"specperf: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
