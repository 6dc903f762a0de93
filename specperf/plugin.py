"""The pytest plugin: options, parametrisation, ordering and fixtures; the work is in run/session.py.

A test module asks for the `specperf_scenario`, `specperf_session` and `specperf_rounds` fixtures
(see tests_perf/).  The plugin is installed with the package, so it acts only in the suite's own
runs (tests_perf/ on the command line, or --profile or --resume given); in any other pytest run it
only adds its options.  What it decides about a run is in suite/, one module per question.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .options import add_options, options
from .profiles.registry import markers, scenarios_loading_code
from .run.builds.versions import installed_version, installed_vllm, reference_vllm_note, xdist_grouping_problem
from .suite.benchmark import BenchmarkedRounds, choose_table_columns
from .suite.checks import check_colocation, check_options, gate_environments
from .suite.closing import (
    Interruption,
    close_run,
    close_workers_run,
    run_history_url,
    schedules_slower,
    terminate_as_interrupt,
    worker_output,
)
from .suite.gpus import check_worker_gpus, own_gpus
from .suite.machine import machine
from .suite.outcomes import ScenarioOutcomes, why_nothing_counts
from .suite.profile import PROFILE_CHANGES_KEY, chosen_profile
from .suite.scope import is_suite_run, run_id, worker_input
from .suite.selection import (
    PLANNED_KEY,
    SCENARIO_PROPERTY,
    marks,
    model_marker,
    order_scenarios,
    scenario_of,
    scenarios_of_ids,
)

SESSION_KEY = pytest.StashKey["RunSession"]()
DEVICE_KEY = pytest.StashKey[dict]()
WORKERS_KEY = pytest.StashKey[list]()
FINISHED_KEY = pytest.StashKey[dict]()
SUITE_RUN_KEY = pytest.StashKey[bool]()
OUTCOMES_KEY = pytest.StashKey[ScenarioOutcomes]()
NOTHING_COUNTS_KEY = pytest.StashKey[str]()
INTERRUPTION_KEY = pytest.StashKey[Interruption]()
SLOWER_KEY = pytest.StashKey[list[str]]()  # dynamic SD schedules shown slower than the best fixed k


def pytest_addhooks(pluginmanager):
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser):
    add_options(parser.getgroup("specperf", "speculative-decoding performance regression suite"))


def pytest_configure(config):
    if not is_suite_run(config):
        return
    config.stash[SUITE_RUN_KEY] = True
    config.stash[OUTCOMES_KEY] = ScenarioOutcomes()
    config.pluginmanager.register(config.stash[OUTCOMES_KEY], "specperf-outcomes")
    for name, text in markers().items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.addinivalue_line(
        "markers", "requires_gpu(min_class=None, count=1, min_memory_gib=None): skip unless this machine has such GPUs"
    )
    check_options(config)
    chosen_profile(config)  # a profile error is one usage line, before collection
    choose_table_columns(config)
    terminate_as_interrupt()
    config.stash[INTERRUPTION_KEY] = Interruption()
    config.pluginmanager.register(config.stash[INTERRUPTION_KEY], "specperf-interruption")
    if config.getoption("dist", "no") == "load":
        config.option.dist = "loadgroup"  # -n N: each model's scenarios stay on one worker
    if config.getoption("dist", "no") == "loadgroup":
        config.option.loadscopereorder = False  # groups go out longest first (selection.longest_group_first)
        problem = xdist_grouping_problem(installed_version("pytest"), installed_version("pytest-xdist"))
        if problem:
            raise pytest.UsageError(problem)
    worker = worker_input(config)
    if worker is None and config.getoption("numprocesses", None):
        from .suite.progress import controller_progress

        opts = options(config)
        run_dir = (lambda: Path(opts.resume)) if opts.resume else (lambda: opts.new_run_dir(run_id(config)))
        config.pluginmanager.register(controller_progress(config, run_dir), "specperf-worker-progress")
    if worker is not None and worker.get("specperf_loadgroup"):
        config.option.loadgroup = True  # workers parse the command line, not the line above


def pytest_report_header(config):
    """The vLLM a profile's reference figures came from, where this run's differs; and what of the
    profile loads code into the engines."""
    if SUITE_RUN_KEY not in config.stash:
        return None
    installed = installed_vllm()
    profile = chosen_profile(config)
    note = reference_vllm_note([s.vllm for s in profile.scenarios], installed and installed[1])
    code = scenarios_loading_code(profile.scenarios)
    lines = [f"specperf: {note}"] if note else []
    if code:
        lines.append(f"specperf: {profile.name} loads code into its engines ({', '.join(code)}): allow_code = true")
    return lines or None


def pytest_generate_tests(metafunc):
    if "specperf_scenario" not in metafunc.fixturenames:
        return
    profile = chosen_profile(metafunc.config)
    for name in sorted({s.model.name for s in profile.scenarios}):
        metafunc.config.addinivalue_line("markers", f"{model_marker(name)}: scenarios of model {name}")
    metafunc.parametrize(
        "specperf_scenario", [pytest.param(s, id=s.id, marks=marks(s, profile)) for s in profile.scenarios]
    )


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """After -k/-m selection: bring back the no-SD references that selected SD scenarios need, and
    order the scenarios so references come first and each engine key runs as one block; then the
    selection's engines must fit in GPU memory, and this process takes its GPUs for them."""
    if SUITE_RUN_KEY not in config.stash:
        return (yield)
    everything = list(items)
    result = yield
    items[:] = order_scenarios(config, everything, items)
    selected, worker = config.stash[PLANNED_KEY], worker_input(config)
    if worker is None:  # under xdist the controller checks what each worker collected
        check_colocation(config, selected)
    if worker is not None or config.getoption("dist", "no") == "no":
        own_gpus(config, selected)  # not in an xdist controller: it runs no engine
    return result


def pytest_runtest_setup(item):
    """A scenario (or any test) marked requires_gpu is skipped, with the reason, where the box lacks it."""
    if SUITE_RUN_KEY not in item.config.stash:
        return
    if (scenario := scenario_of(item)) is not None:  # tells the controller which reports are scenarios
        item.user_properties.append((SCENARIO_PROPERTY, scenario.id))
    from .run.hardware.device import describe_device
    from .run.hardware.gpus import unmet_requirement

    for mark in item.iter_markers("requires_gpu"):
        if DEVICE_KEY not in item.config.stash:
            item.config.stash[DEVICE_KEY] = describe_device()
        reason = unmet_requirement(item.config.stash[DEVICE_KEY], *mark.args, **mark.kwargs)
        if reason:
            pytest.skip(reason)


@pytest.fixture(scope="session")
def specperf_session(request):
    from .plan.progress import baseline_rows, builds_left_s, time_left_s
    from .run.session import RunSession
    from .run.settings import Gating, Judging, Measuring, Progress, RunPlace

    config = request.config
    profile = chosen_profile(config)
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

    opts = options(config)
    planned, device = config.stash.get(PLANNED_KEY, ()), machine(config)
    known = baseline_rows(opts.baseline_dir, device["hardware_key"], planned)

    def time_left(finished, measured, elapsed_s: float) -> float | None:
        return time_left_s(profile, planned, known, finished, measured, elapsed_s, builds_left_s(planned))

    session = RunSession(
        place=RunPlace(
            profile=profile.name,
            reports_dir=opts.new_run_dir(run_id(config)).parent,
            run_id=run_id(config),
            resume_dir=opts.resume,
            profile_path=str(profile.path),
            scenario_hashes={s.id: s.hash for s in profile.scenarios},
            owns_run_file=worker_input(config) is None,
        ),
        judging=Judging(
            baseline_dir=opts.baseline_dir,
            update_baselines=opts.update_baselines,
            history_url=run_history_url(config),
            rolling_runs=opts.rolling_baseline,
            two_strike=opts.two_strike,
            inconclusive_fails=opts.inconclusive == "fail",
        ),
        measuring=Measuring(
            dataset_dir=opts.dataset_dir,
            rounds=opts.rounds,
            scenario_timeout_s=opts.scenario_timeout_s,
            serve_url=opts.serve_url,
            output_check=opts.output_check,
            selection=tuple(planned),
        ),
        gating=(
            Gating(
                opts.candidate,
                opts.gate_blocks,
                gate_environments(config),
                opts.inconclusive == "fail",
                opts.gate_max_sets,
            )
            if opts.candidate
            else None
        ),
        progress=Progress(
            log=log,
            planned=len(planned),
            time_left=time_left,
            on_result=lambda result, path: config.hook.pytest_specperf_result_written(
                config=config, result=result, path=path
            ),
        ),
        device=device,
    )
    config.stash[SESSION_KEY] = session
    if changes := config.stash.get(PROFILE_CHANGES_KEY, None):
        log(f"resume: {changes}")
    yield session
    session.close_engine()


@pytest.fixture
def specperf_rounds(request) -> BenchmarkedRounds:
    """How a scenario's rounds run: timed by pytest-benchmark where it measures them (suite/benchmark.py)."""
    return BenchmarkedRounds(request)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: hand every worker the run id, and whether tests are grouped (loadgroup)."""
    if SUITE_RUN_KEY not in node.config.stash:
        return
    node.workerinput["specperf_run_id"] = run_id(node.config)
    node.workerinput["specperf_loadgroup"] = node.config.getoption("dist") == "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """xdist controller, before any test is scheduled: what a worker collected fits in GPU memory and
    has GPUs of its own (a usage error raised on a worker would crash it instead)."""
    if SUITE_RUN_KEY not in node.config.stash:
        return
    selected = scenarios_of_ids(chosen_profile(node.config), ids)
    check_colocation(node.config, selected)
    check_worker_gpus(node.config, selected, node.workerinput)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: keep what each worker's run session reported (see pytest_sessionfinish)."""
    output = getattr(node, "workeroutput", {}).get("specperf")
    if output is not None:
        node.config.stash.setdefault(WORKERS_KEY, []).append(output)


def pytest_sessionfinish(session, exitstatus):
    """Close the run: refresh baselines, write run.json and the report.  Under xdist each worker
    refreshes its own baselines and hands its run file to the controller, which writes the rest."""
    config = session.config
    if SUITE_RUN_KEY not in config.stash:
        return
    if exitstatus == pytest.ExitCode.OK and (why := why_nothing_counts(session, config.stash[OUTCOMES_KEY])):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        config.stash[NOTHING_COUNTS_KEY] = why
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or config.stash[INTERRUPTION_KEY].seen
    run = config.stash.get(SESSION_KEY, None)
    if run is not None and worker_input(config) is not None:
        config.workeroutput["specperf"] = worker_output(run, interrupted)
    elif run is not None:
        config.stash[FINISHED_KEY] = close_run(config, run, interrupted)
    elif config.stash.get(WORKERS_KEY, None):
        config.stash[FINISHED_KEY] = close_workers_run(config, config.stash[WORKERS_KEY])
    if FINISHED_KEY in config.stash and (slower := schedules_slower(config, config.stash[FINISHED_KEY])):
        config.stash[SLOWER_KEY] = slower
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    finished = terminalreporter.config.stash.get(FINISHED_KEY, None)
    nothing_counts = terminalreporter.config.stash.get(NOTHING_COUNTS_KEY, None)
    if finished is None and not nothing_counts:
        return
    terminalreporter.section("specperf")
    if nothing_counts:
        terminalreporter.write_line(nothing_counts, red=True)
    for line in terminalreporter.config.stash.get(SLOWER_KEY, []):
        terminalreporter.write_line(line, red=True)
    for line in (finished or {}).get("lines", []):
        terminalreporter.write_line(line)
