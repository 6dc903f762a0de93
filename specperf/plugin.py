"""The pytest plugin: options, parametrisation, ordering and fixtures; the work is in run/session.py.

A test module asks for the `specperf_scenario` and `specperf_session` fixtures (see tests_perf/).
The plugin is installed with the package, so it acts only in the suite's own runs (tests_perf/
on the command line, or --profile or --resume given); in any other pytest run it only adds its
options.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .judge.baselines import DEFAULT_DIR as DEFAULT_BASELINE_DIR
from .run.engine import one_line
from .run.device import has_nvidia_gpu
from .run.versions import installed_version, xdist_grouping_problem
from .profiles.scenarios import Profile, ProfileError, Scenario, available_profiles, load_profile
from .records import RunFile

PROFILE_KEY = pytest.StashKey[Profile]()
SESSION_KEY = pytest.StashKey["RunSession"]()
PLANNED_KEY = pytest.StashKey[int]()
DEVICE_KEY = pytest.StashKey[dict]()
WORKERS_KEY = pytest.StashKey[list]()
RUN_ID_KEY = pytest.StashKey[str]()
FINISHED_KEY = pytest.StashKey[dict]()
SUITE_RUN_KEY = pytest.StashKey[bool]()
PROFILE_CHANGES_KEY = pytest.StashKey[str | None]()
OUTCOMES_KEY = pytest.StashKey["ScenarioOutcomes"]()
NOTHING_MEASURED_KEY = pytest.StashKey[bool]()
SCENARIO_PROPERTY = "specperf_scenario"
MARKERS = {
    "nosd": "the no-SD reference scenarios",
    "ngram": "n-gram (prompt lookup) scenarios",
    "eagle": "EAGLE scenarios", "eagle3": "EAGLE-3 scenarios",
    "draft_model": "draft-model scenarios", "mtp": "multi-token-prediction scenarios",
    "suffix": "suffix-decoding scenarios",
    "cnn_dailymail": "summarisation workload", "sharegpt": "chat workload",
    "instructcoder": "code-editing workload", "gsm8k": "math workload",
    "aime": "reasoning workload (AIME)", "gpqa": "reasoning workload (GPQA)",
}


def pytest_addoption(parser):
    group = parser.getgroup("specperf", "speculative-decoding performance regression suite")
    group.addoption("--profile", default=None,
                    help="scenario profile name in fixtures/scenarios/ or a .toml path "
                         "(default: cpu-smoke without an NVIDIA GPU, h100-nightly with one)")
    group.addoption("--rounds", type=int, default=None, help="measured rounds per scenario (overrides the profile)")
    group.addoption("--reports-dir", default="reports", help="where run directories are written (default: reports)")
    group.addoption("--baseline-dir", default=None, help="baseline store (default: the suite's baselines/)")
    group.addoption("--dataset-dir", default=os.environ.get("SPECPERF_DATASET_DIR"),
                    help="folder of workload JSONL files (default: $SPECPERF_DATASET_DIR; else the dataset hub)")
    group.addoption("--update-baselines", action="store_true",
                    help="store this run's valid results as the new baselines (complete runs only)")
    group.addoption("--scenario-timeout", type=float, default=3600.0,
                    help="seconds one scenario's warm-up and rounds may take before its engine is killed "
                         "and a timeout recorded (default: 3600)")
    group.addoption("--resume", default=None, metavar="RUN_DIR",
                    help="continue an interrupted run: keep its finished results, measure the rest")
    group.addoption("--shard", default=None, metavar="I/N",
                    help="run shard I of N of the selection (for N machines; merge with `specperf report`)")


SUITE_TESTS = Path(__file__).resolve().parent.parent / "tests_perf"


def is_suite_run(config) -> bool:
    """Whether this pytest run is the suite's: --profile or --resume given, or a path argument at or
    inside tests_perf/ (or above it, as `pytest .` in the checkout)."""
    if config.getoption("profile") or config.getoption("resume"):
        return True
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == SUITE_TESTS or SUITE_TESTS in path.parents or path in SUITE_TESTS.parents:
            return True
    return False


def pytest_configure(config):
    if not is_suite_run(config):
        return
    config.stash[SUITE_RUN_KEY] = True
    config.stash[OUTCOMES_KEY] = ScenarioOutcomes()
    config.pluginmanager.register(config.stash[OUTCOMES_KEY], "specperf-outcomes")
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.addinivalue_line("markers", "requires_gpu(min_class=None, count=1, min_memory_gib=None): "
                                       "skip unless this machine has such GPUs")
    check_options(config)
    _profile(config)                            # a profile error is one usage line, before collection
    _terminate_as_interrupt()
    if config.getoption("dist", "no") == "load":
        config.option.dist = "loadgroup"        # -n N: each model's scenarios stay on one worker
    if config.getoption("dist", "no") == "loadgroup":
        problem = xdist_grouping_problem(installed_version("pytest"), installed_version("pytest-xdist"))
        if problem:
            raise pytest.UsageError(problem)
    worker = _worker(config)
    if worker is not None and worker.get("specperf_loadgroup"):
        config.option.loadgroup = True          # workers parse the command line, not the line above
    if worker is not None or config.getoption("dist", "no") == "no":
        _own_gpus(config)                       # not in an xdist controller: it runs no engine


def _worker(config) -> dict | None:
    """The pytest-xdist worker input of this process, or None in the controller or without xdist."""
    return getattr(config, "workerinput", None)


def _own_gpus(config) -> None:
    """Give this process (an xdist worker, or the only one) its own GPUs before vLLM starts: as many
    as the largest TP size of the profile.  The hardware key counts these, so a baseline recorded
    with or without xdist files under the same key."""
    from .run.gpus import process_gpus, visible_gpu_ids

    if not has_nvidia_gpu() or not (visible := visible_gpu_ids()):
        return
    tp = max(s.model.tp for s in _profile(config).scenarios)
    worker = _worker(config) or {}
    try:
        os.environ["CUDA_VISIBLE_DEVICES"] = process_gpus(visible, tp, worker.get("workerid"),
                                                          worker.get("workercount", 1))
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


def check_options(config) -> None:
    """Option values and combinations that cannot work: a one-line usage error before anything runs."""
    from .judge.verdicts import MIN_ROUNDS

    rounds = config.getoption("rounds")
    if rounds is not None and rounds < 1:
        raise pytest.UsageError(f"--rounds must be at least 1, got {rounds}")
    if rounds is not None and rounds < MIN_ROUNDS and config.getoption("update_baselines"):
        raise pytest.UsageError(f"--update-baselines needs at least {MIN_ROUNDS} rounds per scenario "
                                f"(the significance test needs them), got --rounds {rounds}")
    if config.getoption("scenario_timeout") <= 0:
        raise pytest.UsageError(f"--scenario-timeout must be positive, got {config.getoption('scenario_timeout')}")
    if config.getoption("resume") is not None:
        _profile(config)                        # the run file must be readable and of the same profile
    if config.getoption("shard") is not None:
        from .run.sharding import parse_shard

        try:
            parse_shard(config.getoption("shard"))
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None


def _resumed_run(run_dir: Path) -> RunFile:
    """run.json of the run that --resume continues."""
    from .storage import ResultFileError, read_record

    try:
        return read_record(run_dir / "run.json", RunFile, "run file")
    except ResultFileError as err:
        raise pytest.UsageError(f"--resume: {err}") from None


def _terminate_as_interrupt() -> None:
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
    return "h100-nightly" if has_nvidia_gpu() else "cpu-smoke"


def load_profile_or_fail(name_or_path: str) -> Profile:
    try:
        return load_profile(name_or_path)
    except ProfileError as err:
        raise pytest.UsageError(str(err)) from None


def _profile(config) -> Profile:
    """The profile to run: --profile, else the resumed run's (by name, from fixtures/scenarios/; never
    a path read from the run directory), else the default; a resumed run's profile and --profile must agree."""
    if PROFILE_KEY not in config.stash:
        resume = config.getoption("resume")
        run = _resumed_run(Path(resume)) if resume else None
        if run is not None and not config.getoption("profile") and run.profile not in available_profiles():
            raise pytest.UsageError(f"--resume {resume}: its profile {run.profile!r} is not one of "
                                    f"{', '.join(available_profiles())}; name its file with --profile PATH")
        profile = load_profile_or_fail(config.getoption("profile") or (run.profile if run else default_profile()))
        if run is not None and profile.name != run.profile:
            raise pytest.UsageError(f"--resume {resume}: that run measured profile {run.profile!r}, "
                                    f"not {profile.name!r}")
        if run is not None:
            _check_resumed_hardware(resume, run)
            config.stash[PROFILE_CHANGES_KEY] = profile_changes(run.scenario_hashes, profile)
        config.stash[PROFILE_KEY] = profile
    return config.stash[PROFILE_KEY]


def _check_resumed_hardware(resume: str, run: RunFile) -> None:
    from .run.device import describe_device

    here = describe_device()["hardware_key"]
    if run.device.hardware_key != here:
        raise pytest.UsageError(f"--resume {resume}: that run was measured on {run.device.hardware_key}, "
                                f"this machine is {here}")


def profile_changes(recorded: dict[str, str], profile: Profile) -> str | None:
    """What changed in the profile since the resumed run recorded its scenarios (None: nothing)."""
    current = {s.id: s.content_hash for s in profile.scenarios}
    if not recorded or recorded == current:
        return None
    parts = [f"{label}: {', '.join(sorted(ids))}" for label, ids in (
        ("changed", {i for i in current.keys() & recorded.keys() if current[i] != recorded[i]}),
        ("added", current.keys() - recorded.keys()), ("removed", recorded.keys() - current.keys())) if ids]
    return "the profile changed since this run began (changed scenarios are measured again); " + "; ".join(parts)


def _model_marker(model_name: str) -> str:
    return "model_" + "".join(c if c.isalnum() else "_" for c in model_name)


def _marks(scenario: Scenario, profile: Profile) -> list:
    method = "nosd" if scenario.method.is_reference else scenario.method.name
    marks = [getattr(pytest.mark, method), getattr(pytest.mark, scenario.dataset),
             getattr(pytest.mark, _model_marker(scenario.model.name)),
             pytest.mark.xdist_group(scenario.model.name)]   # references and engines stay on one worker
    if profile.tier == "gpu":
        marks.append(pytest.mark.requires_gpu(min_class=profile.requires_gpu, count=scenario.model.tp))
    return marks


def pytest_generate_tests(metafunc):
    if "specperf_scenario" not in metafunc.fixturenames:
        return
    profile = _profile(metafunc.config)
    for name in sorted({s.model.name for s in profile.scenarios}):
        metafunc.config.addinivalue_line("markers", f"{_model_marker(name)}: scenarios of model {name}")
    metafunc.parametrize("specperf_scenario",
                         [pytest.param(s, id=s.id, marks=_marks(s, profile)) for s in profile.scenarios])


def _scenario_of(item) -> Scenario | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("specperf_scenario") if callspec else None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """After -k/-m selection: bring back the no-SD references that selected SD scenarios need, and
    order the scenarios so references come first and each engine key runs as one block."""
    if SUITE_RUN_KEY not in config.stash:
        return (yield)
    everything = list(items)
    result = yield
    selected = {id(item) for item in items}
    by_id = {s.id: item for item in everything if (s := _scenario_of(item)) is not None}
    needed = {s.reference_id for item in items if (s := _scenario_of(item)) is not None}
    missing = [by_id[ref] for ref in needed if ref in by_id and id(by_id[ref]) not in selected]
    perf = [item for item in items if _scenario_of(item) is not None] + missing
    others = [item for item in items if _scenario_of(item) is None]
    position = {id(item): i for i, item in enumerate(everything)}
    first_seen: dict[str, int] = {}
    for item in sorted(perf, key=lambda it: position[id(it)]):
        first_seen.setdefault(_scenario_of(item).engine_key, position[id(item)])

    def order(item):
        s = _scenario_of(item)
        return (not s.method.is_reference, first_seen[s.engine_key], position[id(item)])

    perf = _this_shard(config, perf)
    items[:] = others + sorted(perf, key=order)
    config.stash[PLANNED_KEY] = len(perf)
    return result


def _this_shard(config, perf: list) -> list:
    """With --shard I/N, only this machine's share of the selected scenarios; the rest is deselected."""
    if config.getoption("shard") is None:
        return perf
    from .run.sharding import parse_shard, shard

    index, count = parse_shard(config.getoption("shard"))
    mine = {s.id for s in shard([_scenario_of(item) for item in perf], index, count)}
    kept = [item for item in perf if _scenario_of(item).id in mine]
    config.hook.pytest_deselected(items=[item for item in perf if _scenario_of(item).id not in mine])
    return kept


def pytest_runtest_setup(item):
    """A scenario (or any test) marked requires_gpu is skipped, with the reason, where the box lacks it."""
    if SUITE_RUN_KEY not in item.config.stash:
        return
    if (scenario := _scenario_of(item)) is not None:      # tells the controller which reports are scenarios
        item.user_properties.append((SCENARIO_PROPERTY, scenario.id))
    from .run.device import describe_device
    from .run.gpus import unmet_requirement

    for mark in item.iter_markers("requires_gpu"):
        if DEVICE_KEY not in item.config.stash:
            item.config.stash[DEVICE_KEY] = describe_device()
        reason = unmet_requirement(item.config.stash[DEVICE_KEY], *mark.args, **mark.kwargs)
        if reason:
            pytest.skip(reason)


@pytest.fixture(scope="session")
def specperf_session(request):
    from .run.session import RunSession

    config = request.config
    profile = _profile(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    capture = config.pluginmanager.get_plugin("capturemanager")

    def log(line: str) -> None:
        """Progress goes to the terminal live, past pytest's output capture."""
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(f"[specperf] {line}")
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[specperf] {line}")

    session = RunSession(
        profile=profile.name,
        reports_dir=Path(config.getoption("reports_dir")),
        baseline_dir=Path(config.getoption("baseline_dir") or DEFAULT_BASELINE_DIR),
        dataset_dir=config.getoption("dataset_dir"),
        rounds=config.getoption("rounds"),
        update_baselines=config.getoption("update_baselines"),
        scenario_timeout_s=config.getoption("scenario_timeout"),
        resume_dir=Path(config.getoption("resume")) if config.getoption("resume") else None,
        profile_path=str(profile.path),
        scenario_hashes={s.id: s.content_hash for s in profile.scenarios},
        run_id=_run_id(config),
        owns_run_file=_worker(config) is None,
        log=log,
        planned=config.stash.get(PLANNED_KEY, 0),
    )
    config.stash[SESSION_KEY] = session
    if changes := config.stash.get(PROFILE_CHANGES_KEY, None):
        log(f"resume: {changes}")
    yield session
    session.close_engine()


def _run_id(config) -> str:
    """One run id per run: xdist workers take the controller's, so all write one run directory."""
    if RUN_ID_KEY not in config.stash:
        from .storage import new_run_id

        worker = _worker(config)
        if worker is not None and "specperf_run_id" in worker:
            config.stash[RUN_ID_KEY] = worker["specperf_run_id"]
        else:
            shard = config.getoption("shard")
            suffix = "-shard{}of{}".format(*shard.split("/")) if shard else ""
            config.stash[RUN_ID_KEY] = new_run_id(_profile(config).name + suffix)
    return config.stash[RUN_ID_KEY]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: hand every worker the run id, and whether tests are grouped (loadgroup)."""
    if SUITE_RUN_KEY not in node.config.stash:
        return
    node.workerinput["specperf_run_id"] = _run_id(node.config)
    node.workerinput["specperf_loadgroup"] = node.config.getoption("dist") == "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: keep what each worker's run session reported (see pytest_sessionfinish)."""
    output = getattr(node, "workeroutput", {}).get("specperf")
    if output is not None:
        node.config.stash.setdefault(WORKERS_KEY, []).append(output)


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


def _nothing_measured(session) -> bool:
    outcomes = session.config.stash.get(OUTCOMES_KEY, None)
    return outcomes is not None and _worker(session.config) is None and outcomes.nothing_measured()


def pytest_sessionfinish(session, exitstatus):
    """Close the run: refresh baselines, write run.json and the report.  Under xdist each worker
    refreshes its own baselines and hands its run file to the controller, which writes the rest."""
    config = session.config
    if SUITE_RUN_KEY not in config.stash:
        return
    if exitstatus == pytest.ExitCode.OK and _nothing_measured(session):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        config.stash[NOTHING_MEASURED_KEY] = True
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    run = config.stash.get(SESSION_KEY, None)
    if run is not None:
        lines = run.finish(interrupted=interrupted)
        if _worker(config) is not None:
            config.workeroutput["specperf"] = {"run_dir": str(run.run_dir), "lines": lines,
                                               "run": run.run_file(True, interrupted).to_json()}
            return
        config.stash[FINISHED_KEY] = _write_report(run.run_dir, run.run_file(True, interrupted), lines)
    elif config.stash.get(WORKERS_KEY, None):
        from .run.session import merge_run_files
        from .storage import write_record

        outputs = config.stash[WORKERS_KEY]
        run_dir = Path(outputs[0]["run_dir"])
        merged = merge_run_files([RunFile.model_validate(o["run"]) for o in outputs])
        write_record(run_dir / "run.json", merged)
        config.stash[FINISHED_KEY] = _write_report(run_dir, merged, [line for o in outputs for line in o["lines"]])


def _write_report(run_dir: Path, run: RunFile, lines: list[str]) -> dict:
    """The report of a finished run, and the lines that close its terminal summary."""
    from .report import load_run, write_run_report
    from .run.session import summary_lines

    try:
        data = load_run([run_dir])
        report = write_run_report(data, run_dir)
    except Exception as err:  # noqa: BLE001 - results are on disk; `specperf report` can retry
        return {"lines": summary_lines(run) + lines + [
            f"report not written ({one_line(err)}); results are kept: specperf report {run_dir}"]}
    return {"lines": summary_lines(run, data.results) + lines + [f"report: {report}"]}


def pytest_terminal_summary(terminalreporter):
    finished = terminalreporter.config.stash.get(FINISHED_KEY, None)
    nothing_measured = terminalreporter.config.stash.get(NOTHING_MEASURED_KEY, False)
    if finished is None and not nothing_measured:
        return
    terminalreporter.section("specperf")
    if nothing_measured:
        terminalreporter.write_line("every scenario was skipped: this run measured nothing, so it fails", red=True)
    for line in (finished or {}).get("lines", []):
        terminalreporter.write_line(line)
