"""What the pytest plugin decides about a run, apart from its hooks: whether it is the suite's, which
profile it measures (and whether a resumed run may go on), the marks and order of its scenarios,
what was measured, and the report at the end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import paths
from .options import options
from .profiles.registry import method_marker
from .profiles.scenarios import Profile, ProfileError, Scenario, available_profiles, load_profile, traced
from .records import RunFile
from .run.device import has_nvidia_gpu

PROFILE_KEY = pytest.StashKey[Profile]()
PLANNED_KEY = pytest.StashKey[tuple[Scenario, ...]]()
PROFILE_CHANGES_KEY = pytest.StashKey[str | None]()
ENVIRONMENTS_KEY = pytest.StashKey[dict]()
SCENARIO_PROPERTY = "specperf_scenario"


def is_suite_run(config) -> bool:
    """Whether this pytest run is the suite's: --profile or --resume given, or a path argument at or
    inside tests_perf/ (or above it, as `pytest .` in the checkout)."""
    if options(config).profile or options(config).resume:
        return True
    suite_tests = paths.perf_tests().resolve()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == suite_tests or suite_tests in path.parents or path in suite_tests.parents:
            return True
    return False


def worker_input(config) -> dict | None:
    """The pytest-xdist worker input of this process, or None in the controller or without xdist."""
    return getattr(config, "workerinput", None)


def own_gpus(config) -> None:
    """Give this process (an xdist worker, or the only one) its own GPUs before vLLM starts: as many
    as the largest TP size of the profile.  The hardware key counts these, so a baseline recorded
    with or without xdist files under the same key."""
    from .run.gpus import process_gpus, visible_gpu_ids

    if not has_nvidia_gpu() or not (visible := visible_gpu_ids()):
        return
    tp = max(s.model.tp for s in chosen_profile(config).scenarios)
    worker = worker_input(config) or {}
    try:
        os.environ["CUDA_VISIBLE_DEVICES"] = process_gpus(
            visible, tp, worker.get("workerid"), worker.get("workercount", 1)
        )
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


MAX_SCENARIO_TIMEOUT_S = 7 * 24 * 3600.0


def check_options(config) -> None:
    """Option values and combinations that cannot work: a one-line usage error before anything runs."""
    from .judge.verdicts import MIN_ROUNDS

    opts = options(config)
    rounds = opts.rounds
    if rounds is not None and rounds < 1:
        raise pytest.UsageError(f"--rounds must be at least 1, got {rounds}")
    if rounds is not None and rounds < MIN_ROUNDS and opts.update_baselines:
        raise pytest.UsageError(
            f"--update-baselines needs at least {MIN_ROUNDS} rounds per scenario "
            f"(the significance test needs them), got --rounds {rounds}"
        )
    timeout = opts.scenario_timeout_s
    if not 0 < timeout <= MAX_SCENARIO_TIMEOUT_S:  # NaN fails this too
        raise pytest.UsageError(
            f"--scenario-timeout must be positive seconds, at most {MAX_SCENARIO_TIMEOUT_S:g} (a week), got {timeout}"
        )
    if opts.resume is not None:
        chosen_profile(config)  # the run file must be readable and of the same profile
    if opts.shard is not None:
        from .run.sharding import parse_shard

        try:
            parse_shard(opts.shard)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
    rolling = opts.rolling_baseline
    if rolling is not None:
        if rolling < 1:
            raise pytest.UsageError(f"--rolling-baseline must be at least 1, got {rolling}")
        url = run_history_url(config)
        if url is None:
            raise pytest.UsageError("--rolling-baseline reads the run history, which --history off turns off")
        from .history import History, HistoryError

        try:
            History(url).close()  # reachable, and of a schema this suite reads
        except HistoryError as err:
            raise pytest.UsageError(f"--rolling-baseline: {err}") from None
    elif opts.two_strike:
        raise pytest.UsageError(
            "--two-strike goes with --rolling-baseline N (it looks at the run before in the history)"
        )
    blocks = opts.gate_blocks
    if blocks is not None and blocks < 1:
        raise pytest.UsageError(f"--gate-blocks must be at least 1, got {blocks}")
    if opts.candidate:
        if opts.update_baselines:
            raise pytest.UsageError(
                "--update-baselines cannot go with --candidate: a gate judges the candidate "
                "against the current build, and records no baseline"
            )
        gate_environments(config)


def gate_environments(config) -> dict | None:
    """The two builds of a gate (--candidate), described once; None without one."""
    if options(config).candidate is None:
        return None
    if ENVIRONMENTS_KEY not in config.stash:
        from .run import environments
        from .run.gate import CANDIDATE, CURRENT

        try:
            candidate = environments.describe(options(config).candidate)
            config.stash[ENVIRONMENTS_KEY] = {CURRENT: environments.describe(), CANDIDATE: candidate}
        except environments.EnvironmentProblem as err:
            raise pytest.UsageError(f"--candidate: {err}") from None
    return config.stash[ENVIRONMENTS_KEY]


def resumed_run(run_dir: Path) -> RunFile:
    """run.json of the run that --resume continues."""
    from .storage import ResultFileError, read_record

    for name in ("results", "run.json"):
        if (run_dir / name).is_symlink():
            raise pytest.UsageError(f"--resume: {run_dir / name} is a symbolic link: refusing to write through it")
    try:
        return read_record(run_dir / "run.json", RunFile, "run file")
    except ResultFileError as err:
        raise pytest.UsageError(f"--resume: {err}") from None


def terminate_as_interrupt() -> None:
    """SIGTERM (a CI job cancelled, a node drained) ends the run like Ctrl-C: results kept, report written."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:

        def interrupt(signum, frame):
            raise KeyboardInterrupt("SIGTERM")

        signal.signal(signal.SIGTERM, interrupt)


def default_profile() -> str:
    """h100-nightly on a machine with an NVIDIA GPU, cpu-smoke elsewhere."""
    return "h100-nightly" if has_nvidia_gpu() else "cpu-smoke"


def load_profile_or_fail(name_or_path: str) -> Profile:
    try:
        return load_profile(name_or_path)
    except ProfileError as err:
        raise pytest.UsageError(str(err)) from None


def chosen_profile(config) -> Profile:
    """The profile to run: --profile, else the resumed run's (by name, from fixtures/scenarios/; never
    a path read from the run directory), else the default; a resumed run's profile and --profile must agree."""
    if PROFILE_KEY not in config.stash:
        resume = options(config).resume
        run = resumed_run(Path(resume)) if resume else None
        if run is not None and not options(config).profile and run.profile not in available_profiles():
            raise pytest.UsageError(
                f"--resume {resume}: its profile {run.profile!r} is not one of "
                f"{', '.join(available_profiles())}; name its file with --profile PATH"
            )
        profile = load_profile_or_fail(options(config).profile or (run.profile if run else default_profile()))
        if options(config).sd_trace:
            profile = traced(profile)
        if run is not None and profile.name != run.profile:
            raise pytest.UsageError(
                f"--resume {resume}: that run measured profile {run.profile!r}, not {profile.name!r}"
            )
        check_vllm_names(profile)
        if run is not None:
            check_resumed_hardware(resume, run)
            config.stash[PROFILE_CHANGES_KEY] = profile_changes(run.scenario_hashes, profile)
        config.stash[PROFILE_KEY] = profile
    return config.stash[PROFILE_KEY]


def check_vllm_names(profile: Profile) -> None:
    """Every engine argument and method parameter of the profile is one the installed vLLM accepts
    (and not one the suite sets): else a usage error naming the file, the field and the nearest name.
    A method the installed vLLM cannot run is not checked: its scenarios are reported unsupported."""
    import tomllib

    from .run import vllm_methods
    from .run.versions import installed_vllm
    from .run.vllm_fields import (
        SET_BY_THE_SUITE,
        SPECULATIVE_BY_THE_SUITE,
        engine_arg_names,
        problem_with,
        speculative_field_names,
    )

    data = tomllib.loads(profile.path.read_text(encoding="utf-8"))
    tables = [("profile.engine_args", data.get("profile", {}).get("engine_args", {}), "engine")]
    tables += [
        (f"cells[{i}].engine_args", cell.get("engine_args", {}), "engine")
        for i, cell in enumerate(data.get("cells", []))
    ]
    tables += [(f"methods.{label}", spec, "method") for label, spec in data.get("methods", {}).items()]
    tables += [
        (f"models.{name}.methods.{label}", spec, "method")
        for name, model in data.get("models", {}).items()
        for label, spec in model.get("methods", {}).items()
    ]
    installed = installed_vllm()
    for where, table, kind in tables:
        if (
            kind == "method"
            and installed
            and vllm_methods.unsupported_reason(table.get("method", ""), None, installed[1], importable=None)
        ):
            continue  # its scenarios are "unsupported" on this vLLM, whatever their fields
        for key in table:
            problem = (
                problem_with(key, engine_arg_names(), SET_BY_THE_SUITE)
                if kind == "engine"
                else None
                if key == "method"
                else problem_with(key, speculative_field_names(), SPECULATIVE_BY_THE_SUITE)
            )
            if problem:
                raise pytest.UsageError(f"{profile.path}: {where}.{key}: {problem}")


def check_resumed_hardware(resume: str, run: RunFile) -> None:
    from .run.device import describe_device

    here = describe_device()["hardware_key"]
    if run.device.hardware_key != here:
        raise pytest.UsageError(
            f"--resume {resume}: that run was measured on {run.device.hardware_key}, this machine is {here}"
        )


def profile_changes(recorded: dict[str, str], profile: Profile) -> str | None:
    """What changed in the profile since the resumed run recorded its scenarios (None: nothing)."""
    current = {s.id: s.hash for s in profile.scenarios}
    if not recorded or recorded == current:
        return None
    parts = [
        f"{label}: {', '.join(sorted(ids))}"
        for label, ids in (
            ("changed", {i for i in current.keys() & recorded.keys() if current[i] != recorded[i]}),
            ("added", current.keys() - recorded.keys()),
            ("removed", recorded.keys() - current.keys()),
        )
        if ids
    ]
    return "the profile changed since this run began (changed scenarios are measured again); " + "; ".join(parts)


def model_marker(model_name: str) -> str:
    return "model_" + "".join(c if c.isalnum() else "_" for c in model_name)


def marks(scenario: Scenario, profile: Profile) -> list:
    marks = [
        getattr(pytest.mark, method_marker(scenario.method.name)),
        getattr(pytest.mark, scenario.dataset),
        getattr(pytest.mark, model_marker(scenario.model.name)),
        pytest.mark.xdist_group(scenario.model.name),
    ]  # references and engines stay on one worker
    if profile.tier == "gpu":
        marks.append(pytest.mark.requires_gpu(min_class=profile.requires_gpu, count=scenario.model.tp))
    return marks


def scenario_of(item) -> Scenario | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("specperf_scenario") if callspec else None


def order_scenarios(config, everything: list, selected: list) -> list:
    """The items to run: the selected ones, the references their SD scenarios need, this shard's
    share only, references first and each engine key as one block (others keep their place first)."""
    chosen = {id(item) for item in selected}
    by_id = {s.id: item for item in everything if (s := scenario_of(item)) is not None}
    needed = {s.reference_id for item in selected if (s := scenario_of(item)) is not None}
    missing = [by_id[ref] for ref in needed if ref in by_id and id(by_id[ref]) not in chosen]
    perf = [item for item in selected if scenario_of(item) is not None] + missing
    others = [item for item in selected if scenario_of(item) is None]
    position = {id(item): i for i, item in enumerate(everything)}
    first_seen: dict[str, int] = {}
    for item in sorted(perf, key=lambda it: position[id(it)]):
        first_seen.setdefault(scenario_of(item).engine_key, position[id(item)])

    def order(item):
        s = scenario_of(item)
        return (not s.method.is_reference, first_seen[s.engine_key], position[id(item)])

    perf = sorted(this_shard(config, perf), key=order)
    config.stash[PLANNED_KEY] = tuple(scenario_of(item) for item in perf)
    return others + perf


def this_shard(config, perf: list) -> list:
    """With --shard I/N, only this machine's share of the selected scenarios; the rest is deselected."""
    if options(config).shard is None:
        return perf
    from .run.sharding import parse_shard, shard

    index, count = parse_shard(options(config).shard)
    mine = {s.id for s in shard([scenario_of(item) for item in perf], index, count)}
    kept = [item for item in perf if scenario_of(item).id in mine]
    config.hook.pytest_deselected(items=[item for item in perf if scenario_of(item).id not in mine])
    return kept


class ScenarioOutcomes:
    """Counts each scenario as measured or skipped, from the test reports (in the xdist controller too)."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        if not any(name == SCENARIO_PROPERTY for name, _ in report.user_properties):
            return
        if report.skipped:
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call":
            self.outcomes.setdefault(report.nodeid, "measured")

    def nothing_measured(self) -> bool:
        """Every scenario was skipped: the run measured nothing, so it must not pass."""
        return bool(self.outcomes) and "measured" not in self.outcomes.values()


def nothing_measured(session, outcomes: ScenarioOutcomes) -> bool:
    """In the process that closes the run (not an xdist worker): were all scenarios skipped?"""
    return worker_input(session.config) is None and outcomes.nothing_measured()


def run_history_url(config) -> str | None:
    """The history database of this run (--history, $SPECPERF_HISTORY, else beside the reports); None: off."""
    from .history.database import history_url

    return history_url(options(config).history, options(config).reports_dir)


def machine(config) -> dict:
    """This machine as results record it, with the facts conftest.py hooks add (hookspecs.py)."""
    import json

    from .run.device import describe_device

    device = describe_device()
    facts: dict = {}
    for part in reversed(config.hook.pytest_specperf_machine_facts(config=config)):  # pluggy: last first
        if not isinstance(part, dict):
            raise pytest.UsageError(f"pytest_specperf_machine_facts returned {type(part).__name__}, not a dict")
        facts |= part
    try:
        json.dumps(facts, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise pytest.UsageError(f"pytest_specperf_machine_facts: not JSON: {err}") from None
    return device | ({"facts": facts} if facts else {})
