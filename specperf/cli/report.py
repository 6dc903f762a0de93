"""`specperf report RUN_DIR...`: (re)write the HTML, Markdown and JSON report of run directories."""

from __future__ import annotations

import sys
from pathlib import Path


def run(args) -> int:
    """The report written, and on stderr each file or trend it could not use (the report lists them
    too): still exit 0, since the report of the rest is whole."""
    from ..history import history_url
    from ..messages import on_one_line
    from ..report import build_report

    run_dirs = [Path(d) for d in args.run_dirs]
    url = history_url(args.history, run_dirs[0].parent)
    path, problems = build_report(run_dirs, Path(args.out) if args.out else None, url)
    for problem in problems:
        print(on_one_line(f"specperf report: {problem}"), file=sys.stderr)
    print(f"report: {path}")
    return 0


def add_parser(sub) -> None:
    report = sub.add_parser("report", help="(re)write the HTML, Markdown and JSON report of run directories")
    report.add_argument("run_dirs", nargs="+", help="run directories (reports/<run-id>); several merge")
    report.add_argument("--out", help="output folder (default: the first run directory)")
    report.add_argument(
        "--history",
        metavar="URL",
        help="draw trend lines from this history database (default: $SPECPERF_HISTORY, else "
        "history.sqlite beside the first run directory, where it exists; 'off': none)",
    )
    report.set_defaults(func=run)
