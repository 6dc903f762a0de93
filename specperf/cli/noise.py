"""`specperf noise`: each metric's run-to-run noise per scenario, measured or read from runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import paths


def run(args) -> int:
    """Repeat a profile (or read runs already made) and report each metric's CV per scenario."""
    import subprocess

    from ..judge.noise import measure_noise, noise_table, write_noise
    from ..storage import new_run_id

    run_dirs = [Path(d) for d in args.run_dirs]
    if not run_dirs:
        if args.runs < 2:
            print("specperf: error: --runs must be at least 2 to measure run-to-run noise", file=sys.stderr)
            return 2
        folder = Path(args.reports_dir) / new_run_id(f"noise-{Path(args.profile).stem}")
        extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
        for i in range(args.runs):
            reports = folder / f"run{i + 1}"
            command = [
                sys.executable,
                "-m",
                "pytest",
                str(paths.perf_tests()),
                "--profile",
                args.profile,
                "--reports-dir",
                str(reports),
                "-q",
                "-p",
                "no:cacheprovider",
                *extra,
            ]
            print(f"noise run {i + 1}/{args.runs}: {' '.join(command)}", flush=True)
            subprocess.run(command, check=False)
            run_dirs += sorted(p for p in reports.iterdir() if p.is_dir()) if reports.is_dir() else []
    noise = measure_noise(run_dirs)
    if not noise["scenarios"]:
        print("specperf: error: no valid results in " + ", ".join(map(str, run_dirs)), file=sys.stderr)
        return 2
    print("\n".join(noise_table(noise)))
    if args.write:
        print(f"noise written: {write_noise(Path(args.baseline_dir or paths.baseline_dir()), noise)}")
    return 0


def add_parser(sub) -> None:
    noise = sub.add_parser("noise", help="measure each metric's run-to-run noise (coefficient of variation)")
    noise.add_argument(
        "--from",
        dest="run_dirs",
        nargs="+",
        default=[],
        metavar="RUN_DIR",
        help="read these runs of the same scenarios instead of making new ones",
    )
    noise.add_argument("--profile", default="cpu-smoke", help="profile to repeat (default: cpu-smoke)")
    noise.add_argument("--runs", type=int, default=3, help="how many times to run it (default: 3)")
    noise.add_argument(
        "--reports-dir", default=paths.DEFAULT_REPORTS_DIR, help="where the runs are written (default: reports)"
    )
    noise.add_argument(
        "--write",
        action="store_true",
        help="store the result as <baseline-dir>/<hardware-key>/noise.json, widening thresholds",
    )
    noise.add_argument("--baseline-dir", default=None, help="baseline store (default: the suite's baselines/)")
    noise.add_argument(
        "pytest_args", nargs=argparse.REMAINDER, help="more pytest arguments for each run, after --: e.g. -- -k ngram"
    )
    noise.set_defaults(func=run)
