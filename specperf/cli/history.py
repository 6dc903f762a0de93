"""`specperf history import|show|drift`: backfill run directories, print a series, list what moved."""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

from .. import paths
from ..history import History, HistoryError, history_url
from ..history.queries import Reader
from ..history.record import as_utc
from ..messages import shown_url

DEFAULT_METRIC = "throughput_tok_s"
DRIFT_METRICS = ("throughput_tok_s", "speedup", "mean_acceptance_length", "lossless_fraction")
SPAN = re.compile(r"^(\d+)([hdw])$")


def parse_since(text: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """'30d', '12h', '2w' ago, or an ISO date; argparse turns a ValueError into one line."""
    now = now or datetime.datetime.now(datetime.UTC)
    match = SPAN.match(text.strip())
    if match:
        hours = {"h": 1, "d": 24, "w": 168}[match.group(2)] * int(match.group(1))
        try:
            return now - datetime.timedelta(hours=hours)
        except OverflowError:  # before the year 1: argparse's one line, not a traceback
            raise ValueError(f"{text} reaches before the first year a date can name") from None
    return as_utc(datetime.datetime.fromisoformat(text))


def _skipped(reader: Reader) -> None:
    for line in reader.skipped.values():
        print(line, file=sys.stderr)


def cmd_import(history: History, args) -> int:
    status = 0
    for run_dir in args.run_dirs:
        recorded = history.record_run_dir(Path(run_dir))
        for problem in recorded.problems:
            print(f"skipped: {problem}", file=sys.stderr)
        if recorded.added or recorded.present:
            print(recorded.line())
        elif recorded.problems:
            status = 2  # nothing usable in it: bad input, as everywhere in the CLI (1 is a regression)
    return status


def cmd_show(history: History, args) -> int:
    reader = history.reader()
    keys = [args.hardware] if args.hardware else reader.hardware_keys(args.scenario)
    if not keys:
        print(f"specperf: error: history {shown_url(history.url)} holds no run of {args.scenario}", file=sys.stderr)
        return 2
    for key in keys:
        series = reader.series(args.scenario, args.metric, key, last=args.last)
        print(f"{args.scenario} {args.metric} on {key}: {len(series.points)} runs")
        changed = set(series.version_changes())
        for i, point in enumerate(series.points):
            mark = "  <- vLLM changed" if i in changed else ""
            verdict = f"  {point.verdict}" if point.verdict else ""
            print(
                f"  {point.finished_at:%Y-%m-%d %H:%M}  {point.run_id:<44} vllm {point.vllm or '?':<12} "
                f"{point.value:>12.4g}{verdict}{mark}"
            )
    _skipped(reader)
    return 0


def cmd_drift(history: History, args) -> int:
    reader = history.reader()
    moved = reader.drift(args.since, args.metrics, args.hardware)[: args.top]
    if not moved:
        print("no scenario has enough runs in that window (6 per metric)")
    for drift in moved:
        print(
            f"{drift.change:>+8.1%}  {drift.scenario_id}  {drift.metric} on {drift.hardware_key}: "
            f"{drift.before:.4g} -> {drift.after:.4g} over {drift.runs} runs"
        )
    _skipped(reader)
    return 0


def add_parser(sub) -> None:
    history = sub.add_parser("history", help="the run history database: backfill, series, drift")
    history.add_argument(
        "--history", metavar="URL", help="database URL (default: $SPECPERF_HISTORY, else reports/history.sqlite)"
    )
    history.add_argument("--reports-dir", default=paths.DEFAULT_REPORTS_DIR, help="where the default SQLite file lives")
    verbs = history.add_subparsers(dest="verb", required=True)
    backfill = verbs.add_parser("import", help="record existing run directories (already recorded: no-op)")
    backfill.add_argument("run_dirs", nargs="+")
    backfill.set_defaults(verb_func=cmd_import)
    show = verbs.add_parser("show", help="a scenario's metric over the last runs, per hardware key")
    show.add_argument("scenario")
    show.add_argument("--metric", default=DEFAULT_METRIC)
    show.add_argument("--hardware", help="only this hardware key")
    show.add_argument("--last", type=int, default=30, help="runs shown (default: 30)")
    show.set_defaults(verb_func=cmd_show)
    drift = verbs.add_parser("drift", help="the scenarios whose metrics moved most in a window")
    drift.add_argument("--since", type=parse_since, default=parse_since("30d"), help="30d, 12h, 2w or a date")
    drift.add_argument("--metrics", nargs="+", default=list(DRIFT_METRICS))
    drift.add_argument("--hardware", help="only this hardware key")
    drift.add_argument("--top", type=int, default=20)
    drift.set_defaults(verb_func=cmd_drift)
    history.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    url = history_url(args.history, Path(args.reports_dir))
    if url is None:
        print("specperf: error: the history is turned off ($SPECPERF_HISTORY or --history off)", file=sys.stderr)
        return 2
    try:
        with History(url, read_only=args.verb_func is not cmd_import) as history:
            return args.verb_func(history, args)
    except HistoryError as err:
        print(f"specperf: error: {err}", file=sys.stderr)
        return 2
