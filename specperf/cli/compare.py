"""`specperf compare OLD NEW`: judge every scenario of run NEW against the same scenario of run OLD."""

from __future__ import annotations

from pathlib import Path

from ..judge.baselines import baseline_from_result, checked_baseline
from ..judge.rules import DEFAULT_RULES, Rules
from ..judge.verdicts import judge
from ..status import IMPROVEMENT, NO_BASELINE, PASS, SEVERITY
from ..storage import ResultFileError, load_results, result_path


def compare_rules(args) -> tuple[dict[str, Rules], str]:
    """The judging rules by scenario id and where they come from: --profile, else the profile NEW's
    run.json names, resolved by name in fixtures/scenarios/ as --resume resolves it (never a path
    or a rule read from the run directory); without either, the metrics' own tolerances."""
    from ..profiles.scenarios import ProfileError, available_profiles, load_profile
    from ..records import RunFile
    from ..storage import read_record

    name = args.profile
    if name is None and (Path(args.new) / "run.json").is_file():
        run = read_record(Path(args.new) / "run.json", RunFile, "run file")
        if run.profile not in available_profiles():
            raise ResultFileError(
                f"{Path(args.new) / 'run.json'}: its profile {run.profile!r} is not one of "
                f"{', '.join(available_profiles())}; name its file with --profile PATH"
            )
        name = run.profile
    if name is None:
        return {}, "the metrics' own tolerances (no run.json in NEW; name a profile with --profile)"
    try:
        profile = load_profile(name)
    except ProfileError as err:
        raise ResultFileError(str(err)) from None
    return {s.id: Rules.of(s) for s in profile.scenarios}, f"profile {profile.name}"


def run(args) -> int:
    """Judge every scenario of NEW against the same scenario of OLD, as if OLD were the baseline, by
    the rules of the profile in force (compare_rules)."""
    rules, source = compare_rules(args)
    old = {r.id: r for r in load_results(Path(args.old)) if r.ok}
    verdicts = []
    for result in load_results(Path(args.new)):
        baseline = old.get(result.id)
        if baseline is not None and baseline.device.hardware_key != result.device.hardware_key:
            baseline = None  # results from other hardware are never compared
        if baseline is not None:
            baseline = checked_baseline(baseline_from_result(baseline), result_path(Path(args.old), result.id))
        verdicts.append(judge(result, baseline, rules=rules.get(result.id, DEFAULT_RULES)))
    verdicts.sort(key=lambda v: (SEVERITY.index(v.status), v.scenario_id))
    counts = {s: sum(1 for v in verdicts if v.status == s) for s in SEVERITY}
    print(
        f"compare {args.old} -> {args.new}: "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + f" (judged by {source})"
    )
    for verdict in verdicts:
        print(f"{verdict.scenario_id}: {verdict.status}" + (f" ({verdict.note})" if verdict.note else ""))
        for metric in verdict.metrics:
            if args.all or metric.status not in (PASS, IMPROVEMENT, NO_BASELINE):
                print(f"    {metric.line()}")
    return 1 if any(v.failed for v in verdicts) else 0


def add_parser(sub) -> None:
    compare = sub.add_parser("compare", help="judge run NEW against run OLD; exit 1 on a regression")
    compare.add_argument("old")
    compare.add_argument("new")
    compare.add_argument("--all", action="store_true", help="show passing metrics too")
    compare.add_argument(
        "--profile",
        help="judge by this profile's tolerances (name or .toml path; default: the profile NEW's run.json names)",
    )
    compare.set_defaults(func=run)
