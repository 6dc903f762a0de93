"""`specperf plan`: a profile's wall time per shard, and on N GPUs, before it runs."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import paths


def run(args) -> int:
    """Predict a profile's wall time per shard (and on --gpus N) before it runs (plan.py)."""
    from ..history import History, HistoryError, history_url
    from ..history.database import missing_sqlite_file
    from ..messages import shown_url
    from ..plan import Planner, make_plan
    from ..plan.view import plan_lines, select
    from ..profiles.scenarios import ProfileError, load_profile
    from ..run.hardware import device
    from ..run.sharding import MAX_SHARDS, parse_max_shard_hours

    def error(message: str) -> int:
        print(f"specperf: error: {message}", file=sys.stderr)
        return 2

    for option, value in (("--gpus", args.gpus), ("--shards", args.shards)):
        if value is not None and value < 1:
            return error(f"{option} must be at least 1, got {value}")
    if args.shards is not None and args.shards > MAX_SHARDS:
        return error(f"--shards must be at most {MAX_SHARDS}, got {args.shards}")
    max_shard_s = None
    if args.max_shard_hours is not None:
        if args.shards is not None:
            return error("--max-shard-hours chooses the shard count itself: give it or --shards, not both")
        try:
            max_shard_s = parse_max_shard_hours(args.max_shard_hours)
        except ValueError as err:
            return error(str(err))
    if args.arrays and max_shard_s is None:
        return error("--arrays prints the arrays of --max-shard-hours H: give both")
    try:
        profile = load_profile(args.profile)
        scenarios = select(profile, args.keyword, args.markexpr)
    except (ProfileError, ValueError) as err:
        return error(str(err))
    if not scenarios:
        return error(f"{profile.path}: no scenario matches the selection")
    if args.gpus is not None and profile.tier != "gpu":
        return error(f"--gpus: {profile.name} is a {profile.tier}-tier profile; it runs on no GPU")
    key = args.hardware_key
    if key is None and (profile.tier == "cpu" or device.has_nvidia_gpu()):
        try:
            described = device.describe_cpu() if profile.tier == "cpu" else device.describe_device()
        except ValueError as err:  # CUDA_VISIBLE_DEVICES names no device NVML lists
            return error(str(err))
        key = described["hardware_key"]
    url = history_url(args.history, Path(args.reports_dir))
    missing = url is not None and missing_sqlite_file(url) is not None
    if missing and args.history is None:
        url = None  # no history beside the reports yet: nothing to create
    elif missing:
        return error(f"--history {shown_url(url)}: no such database")
    rows = []
    if url is not None and key is not None:
        try:
            with History(url, read_only=True) as history:
                rows = history.reader().timed_results(key)
        except HistoryError as err:
            return error(str(err))
    where = (f"hardware {key}" if key else f"the study's hardware ({profile.requires_gpu or 'GPU'})") + (
        f", {len(rows)} results in the history" if url and key else ", no history"
    )
    plan = make_plan(
        profile,
        scenarios,
        Planner(profile, rows),
        args.shards,
        args.gpus,
        max_shard_s,
        args.keyword or "",
        args.markexpr or "",
    )
    if args.arrays:  # for a submit script: one line an array, tab-separated
        print("\n".join(f"{gpus}\t{count}\t{options}\t{hours:.3f}" for gpus, count, options, hours in plan.arrays()))
        return 0
    print("\n".join(plan_lines(plan, where, args.scenarios)))
    return 0


def add_parser(sub) -> None:
    plan = sub.add_parser("plan", help="predict a profile's wall time per shard, and on N GPUs, before it runs")
    plan.add_argument("--profile", required=True, help="profile name (fixtures/scenarios/) or .toml path")
    plan.add_argument("--gpus", type=int, help="schedule the shards on N GPUs: wall time and GPU-hours")
    plan.add_argument(
        "--shards",
        type=int,
        help="split into N shards as --shard I/N does (default: 1; with "
        "--gpus the count in 1..N with the shortest wall time)",
    )
    plan.add_argument(
        "--max-shard-hours",
        type=float,
        metavar="H",
        help="for a cluster scheduler: cut engines' scenarios into pieces of at most H hours and print "
        "the arrays of shards that keep within it (an array per TP size), each shard's GPUs, hours and command",
    )
    plan.add_argument(
        "--arrays",
        action="store_true",
        help="with --max-shard-hours: print only the arrays, a line each: GPUs a task (0: CPU tier), tasks, "
        "the pytest options of every task (each adds --shard I/N), the hours of its longest shard (tab-separated)",
    )
    plan.add_argument(
        "--history",
        metavar="URL",
        help="run history to predict from (default: $SPECPERF_HISTORY, "
        "else <reports-dir>/history.sqlite where it exists; 'off')",
    )
    plan.add_argument(
        "--reports-dir", default=paths.DEFAULT_REPORTS_DIR, help="where the default history lives (default: reports)"
    )
    plan.add_argument("--hardware-key", help="whose history to use (default: this machine's)")
    plan.add_argument("-k", dest="keyword", metavar="EXPR", help="select scenarios as pytest -k does")
    plan.add_argument("-m", dest="markexpr", metavar="EXPR", help="select scenarios as pytest -m does")
    plan.add_argument("--scenarios", action="store_true", help="one line per scenario with its figures")
    plan.set_defaults(func=run)
