"""Command-line tools over stored results: `specperf report`, `compare`, `noise`, `simulate`, `history`, `plan`.

Measuring is pytest's job (`pytest tests_perf --profile NAME`); these commands only read run
directories (or acceptance traces), so a crashed, sharded or old run can still be reported and compared.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .history import commands as history_commands
from .analysis.simulate import PROPOSERS as SIMULATED
from .messages import PrintableStream
from .methods import method_of
from . import paths
from .judge.baselines import baseline_from_result, checked_baseline
from .storage import ResultFileError, load_results, result_path
from .judge.verdicts import DEFAULT_RULES, Rules, judge
from .status import IMPROVEMENT, NO_BASELINE, PASS, SEVERITY


def cmd_report(args) -> int:
    from .report import write_report

    from .history import history_url

    run_dirs = [Path(d) for d in args.run_dirs]
    url = history_url(args.history, run_dirs[0].parent)
    path = write_report(run_dirs, Path(args.out) if args.out else None, url)
    print(f"report: {path}")
    return 0


def compare_rules(args) -> tuple[dict[str, Rules], str]:
    """The judging rules by scenario id and where they come from: --profile, else the profile NEW's
    run.json names, resolved by name in fixtures/scenarios/ as --resume resolves it (never a path
    or a rule read from the run directory); without either, the metrics' own tolerances."""
    from .profiles.scenarios import ProfileError, available_profiles, load_profile
    from .records import RunFile
    from .storage import read_record

    name = args.profile
    if name is None and (Path(args.new) / "run.json").is_file():
        run = read_record(Path(args.new) / "run.json", RunFile, "run file")
        if run.profile not in available_profiles():
            raise ResultFileError(f"{Path(args.new) / 'run.json'}: its profile {run.profile!r} is not one of "
                                  f"{', '.join(available_profiles())}; name its file with --profile PATH")
        name = run.profile
    if name is None:
        return {}, "the metrics' own tolerances (no run.json in NEW; name a profile with --profile)"
    try:
        profile = load_profile(name)
    except ProfileError as err:
        raise ResultFileError(str(err)) from None
    return {s.id: Rules.of(s) for s in profile.scenarios}, f"profile {profile.name}"


def cmd_compare(args) -> int:
    """Judge every scenario of NEW against the same scenario of OLD, as if OLD were the baseline, by
    the rules of the profile in force (compare_rules)."""
    rules, source = compare_rules(args)
    old = {r.id: r for r in load_results(Path(args.old)) if r.ok}
    verdicts = []
    for result in load_results(Path(args.new)):
        baseline = old.get(result.id)
        if baseline is not None and baseline.device.hardware_key != result.device.hardware_key:
            baseline = None      # results from other hardware are never compared
        if baseline is not None:
            baseline = checked_baseline(baseline_from_result(baseline), result_path(Path(args.old), result.id))
        verdicts.append(judge(result, baseline, rules=rules.get(result.id, DEFAULT_RULES)))
    verdicts.sort(key=lambda v: (SEVERITY.index(v.status), v.scenario_id))
    counts = {s: sum(1 for v in verdicts if v.status == s) for s in SEVERITY}
    print(f"compare {args.old} -> {args.new}: "
          + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" (judged by {source})")
    for verdict in verdicts:
        print(f"{verdict.scenario_id}: {verdict.status}" + (f" ({verdict.note})" if verdict.note else ""))
        for metric in verdict.metrics:
            if args.all or metric.status not in (PASS, IMPROVEMENT, NO_BASELINE):
                print(f"    {metric.line()}")
    return 1 if any(v.failed for v in verdicts) else 0


def cmd_noise(args) -> int:
    """Repeat a profile (or read runs already made) and report each metric's CV per scenario."""
    import subprocess

    from .judge.noise import measure_noise, noise_table, write_noise
    from .storage import new_run_id

    run_dirs = [Path(d) for d in args.run_dirs]
    if not run_dirs:
        if args.runs < 2:
            print("specperf: error: --runs must be at least 2 to measure run-to-run noise", file=sys.stderr)
            return 2
        folder = Path(args.reports_dir) / new_run_id(f"noise-{Path(args.profile).stem}")
        extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
        for i in range(args.runs):
            reports = folder / f"run{i + 1}"
            command = [sys.executable, "-m", "pytest", str(paths.perf_tests()), "--profile", args.profile,
                       "--reports-dir", str(reports), "-q", "-p", "no:cacheprovider", *extra]
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


def print_fitted_costs(run_dirs: list[Path]) -> int:
    """The step-cost model fitted from the traced results of run directories (analysis/cost_fit.py)."""
    from .analysis.cost_fit import fit_costs

    fitted = fit_costs([r for d in run_dirs for r in load_results(d) if r.ok])
    if not fitted:
        print("specperf: error: no traced results with per-step batch counts in "
              + ", ".join(map(str, run_dirs)), file=sys.stderr)
        return 2
    for cost in fitted:
        kv, token, fixed = cost.forward.coefficients
        print(f"{cost.model}: target forward = {kv:.3g} s x KV tokens + {token:.3g} s x tokens + {fixed:.3g} s "
              f"(error {cost.forward.error:.1%} over {cost.forward.steps} steps); "
              f"rest of a step (sampling included) {cost.rest.coefficients[0]:.3g} s (error {cost.rest.error:.1%})")
        for method, fit in cost.drafts.items():
            formula = (f"{fit.coefficients[0]:.3g} x the forward" if method_of(method).drafting_fit == "share" else
                       "{:.3g} s x KV tokens + {:.3g} s x tokens per request + {:.3g} s".format(*fit.coefficients))
            print(f"    drafting, {method}: {formula} (error {fit.error:.1%} over {fit.steps} steps)")
    return 0


AGREE = {True: "yes", False: "no", None: "-"}     # simulated within the cost model's error of measured


def print_headroom(run_dirs: list[Path]) -> None:
    """Each traced scenario's measured, simulated and bound speedups (analysis/headroom.py)."""
    from .analysis.headroom import headroom

    def x(value):
        return f"{value:.2f}x" if value is not None else "-"

    rows = headroom([r for d in run_dirs for r in load_results(d) if r.ok])
    print(f"\n{'scenario':<52} {'measured':>9} {'simulated':>9} {'error':>6} {'oracle':>7} {'combined':>8} "
          f"{'adaptive':>8}  agree")
    for h in rows:
        error = f"{h.speedup_error:.0%}" if h.speedup_error is not None else "-"
        print(f"{h.scenario_id:<52} {x(h.measured):>9} {x(h.simulated):>9} {error:>6} {x(h.oracle):>7} "
              f"{x(h.combined):>8} {x(h.adaptive):>8}  {AGREE[h.within_error]:<5}" + (f"  ({h.note})" if h.note else ""))


def cmd_simulate(args) -> int:
    """Speedup per batch size from the study's released acceptance traces (analysis/simulate.py)."""
    import json

    from .analysis import simulate

    if args.fit_from:
        status = print_fitted_costs([Path(d) for d in args.fit_from])
        if not status:
            print_headroom([Path(d) for d in args.fit_from])
        if status or not args.study_traces:
            return status
    if not args.study_traces:
        print("specperf: error: simulate needs --study-traces DIR or --fit-from RUN_DIR", file=sys.stderr)
        return 2
    folder, batches, rows = Path(args.study_traces), args.batch_sizes, []
    print(f"{'dataset':<14} {'proposer':<9} {'mode':<7}" + "".join(f"{f'bs{b}':>7}" for b in batches))
    for dataset in args.datasets:
        path = folder / f"combined_{dataset}.jsonl"
        if not path.is_file():
            print(f"specperf: error: {path}: no such trace file (expected combined_<dataset>.jsonl)", file=sys.stderr)
            return 2
        try:
            requests = simulate.study_sample(simulate.read_study_traces(path))
        except ValueError as err:
            print(f"specperf: error: {err}", file=sys.stderr)
            return 2
        for proposer in args.proposers:
            needs = (simulate.NGRAM, simulate.EAGLE) if proposer == simulate.COMBINED else (proposer,)
            if not all(name in r.acc_len for r in requests for name in needs):
                print(f"specperf: error: {path}: no {' and '.join(needs)} acceptance in every line", file=sys.stderr)
                return 2
            for mode in ("oracle",) if proposer == simulate.COMBINED else args.modes:
                values = simulate.speedups(requests, proposer, mode, batches, dataset=dataset)
                rows.append({"dataset": dataset, "proposer": proposer, "mode": mode, "speedup": values})
                print(f"{dataset:<14} {proposer:<9} {mode:<7}" + "".join(f"{values[b]:>7.2f}" for b in batches))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        print(f"written: {args.json}")
    if args.html:
        from .report.study_curves import render_study_curves
        from .storage import atomic_write_text

        atomic_write_text(Path(args.html), render_study_curves(rows, str(folder)))
        print(f"written: {args.html}")
    return 0


def cmd_plan(args) -> int:
    """Predict a profile's wall time per shard (and on --gpus N) before it runs (plan.py)."""
    from .history import History, HistoryError, history_url
    from .plan import Planner, make_plan
    from .plan_view import plan_lines, select
    from .profiles.scenarios import ProfileError, load_profile
    from .run import device

    def error(message: str) -> int:
        print(f"specperf: error: {message}", file=sys.stderr)
        return 2

    for option, value in (("--gpus", args.gpus), ("--shards", args.shards)):
        if value is not None and value < 1:
            return error(f"{option} must be at least 1, got {value}")
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
        key = device.describe_cpu()["hardware_key"] if profile.tier == "cpu" else device.describe_device()["hardware_key"]
    url = history_url(args.history, Path(args.reports_dir))
    missing = url is not None and url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file()
    if missing and args.history is None:
        url = None                           # no history beside the reports yet: nothing to create
    elif missing:
        return error(f"--history {url}: no such database")
    rows = []
    if url is not None and key is not None:
        try:
            with History(url, read_only=True) as history:
                rows = history.reader().timed_results(key)
        except HistoryError as err:
            return error(str(err))
    where = (f"hardware {key}" if key else f"the study's hardware ({profile.requires_gpu or 'GPU'})") + \
        (f", {len(rows)} results in the history" if url and key else ", no history")
    plan = make_plan(profile, scenarios, Planner(profile, rows), args.shards, args.gpus)
    print("\n".join(plan_lines(plan, where, args.scenarios)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specperf", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="(re)write the HTML, Markdown and JSON report of run directories")
    report.add_argument("run_dirs", nargs="+", help="run directories (reports/<run-id>); several merge")
    report.add_argument("--out", help="output folder (default: the first run directory)")
    report.add_argument("--history", metavar="URL",
                        help="draw trend lines from this history database (default: $SPECPERF_HISTORY, else "
                             "history.sqlite beside the first run directory, where it exists; 'off': none)")
    report.set_defaults(func=cmd_report)
    compare = sub.add_parser("compare", help="judge run NEW against run OLD; exit 1 on a regression")
    compare.add_argument("old")
    compare.add_argument("new")
    compare.add_argument("--all", action="store_true", help="show passing metrics too")
    compare.add_argument("--profile", help="judge by this profile's tolerances (name or .toml path; default: the "
                                           "profile NEW's run.json names)")
    compare.set_defaults(func=cmd_compare)
    noise = sub.add_parser("noise", help="measure each metric's run-to-run noise (coefficient of variation)")
    noise.add_argument("--from", dest="run_dirs", nargs="+", default=[], metavar="RUN_DIR",
                       help="read these runs of the same scenarios instead of making new ones")
    noise.add_argument("--profile", default="cpu-smoke", help="profile to repeat (default: cpu-smoke)")
    noise.add_argument("--runs", type=int, default=3, help="how many times to run it (default: 3)")
    noise.add_argument("--reports-dir", default="reports", help="where the runs are written (default: reports)")
    noise.add_argument("--write", action="store_true",
                       help="store the result as <baseline-dir>/<hardware-key>/noise.json, widening thresholds")
    noise.add_argument("--baseline-dir", default=None, help="baseline store (default: the suite's baselines/)")
    noise.add_argument("pytest_args", nargs=argparse.REMAINDER,
                       help="more pytest arguments for each run, after --: e.g. -- -k ngram")
    noise.set_defaults(func=cmd_noise)
    simulate = sub.add_parser("simulate", help="speedup per batch size from acceptance traces: fixed k, oracle, "
                                               "the per-step best of n-gram and EAGLE")
    simulate.add_argument("--study-traces", metavar="DIR",
                          help="the study's released traces (SpecDecode-Bench/simulator data/llama3.1-8B/)")
    simulate.add_argument("--fit-from", nargs="+", metavar="RUN_DIR",
                          help="fit the step-cost model to the traced results of these runs, print it and "
                               "each traced scenario's measured, simulated and oracle speedups")
    simulate.add_argument("--datasets", nargs="+", default=["gsm8k", "instructcoder", "sharegpt", "cnn"])
    simulate.add_argument("--proposers", nargs="+", default=list(SIMULATED), choices=list(SIMULATED),
                          help="eagle: the learned head the traces hold (EAGLE-3 in the study's release)")
    simulate.add_argument("--modes", nargs="+", default=list(("k1", "k3", "k5", "oracle")),
                          choices=["k1", "k3", "k5", "oracle"])
    simulate.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 8, 16, 32, 64, 128])
    simulate.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    simulate.add_argument("--html", metavar="FILE", help="also draw the curves, a chart per dataset, as an HTML page")
    simulate.set_defaults(func=cmd_simulate)
    history_commands.add_parser(sub)
    plan = sub.add_parser("plan", help="predict a profile's wall time per shard, and on N GPUs, before it runs")
    plan.add_argument("--profile", required=True, help="profile name (fixtures/scenarios/) or .toml path")
    plan.add_argument("--gpus", type=int, help="schedule the shards on N GPUs: wall time and GPU-hours")
    plan.add_argument("--shards", type=int, help="split into N shards as --shard I/N does (default: 1; with "
                                                 "--gpus the count in 1..N with the shortest wall time)")
    plan.add_argument("--history", metavar="URL", help="run history to predict from (default: $SPECPERF_HISTORY, "
                                                      "else <reports-dir>/history.sqlite where it exists; 'off')")
    plan.add_argument("--reports-dir", default="reports", help="where the default history lives (default: reports)")
    plan.add_argument("--hardware-key", help="whose history to use (default: this machine's)")
    plan.add_argument("-k", dest="keyword", metavar="EXPR", help="select scenarios as pytest -k does")
    plan.add_argument("-m", dest="markexpr", metavar="EXPR", help="select scenarios as pytest -m does")
    plan.add_argument("--scenarios", action="store_true", help="one line per scenario with its figures")
    plan.set_defaults(func=cmd_plan)
    args = parser.parse_args(argv)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(stdout), PrintableStream(stderr)    # ids and errors come from files
    try:
        return args.func(args)
    except ResultFileError as err:
        print(f"specperf: error: {err}", file=sys.stderr)
        return 2
    finally:
        sys.stdout, sys.stderr = stdout, stderr


if __name__ == "__main__":
    sys.exit(main())
