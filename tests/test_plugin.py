"""The pytest plugin's collection: parametrisation, -k selection with references, ordering, errors.

Collection only: no engine starts here (the CPU-tier tests in tests/cpu_tier run engines).
"""

from pathlib import Path

import pytest

PERF_TESTS = Path(__file__).resolve().parent.parent / "tests_perf" / "test_speculative_decoding.py"

PROFILE = """
[profile]
name = "plugin-test"
num_requests = 1
output_len = 8

[models.tiny]
path = "builtin:tiny-llama"

[models.tiny.methods.eagle-k3]
method = "eagle"
model = "builtin:tiny-llama-eagle"
num_speculative_tokens = 3

[models.tiny.methods.eagle3-k3]
method = "eagle3"
model = "builtin:tiny-llama-eagle3"
num_speculative_tokens = 3

[methods.ngram-k3]
method = "ngram"
num_speculative_tokens = 3
prompt_lookup_min = 3
prompt_lookup_max = 7

[[cells]]
model = "tiny"
methods = ["ngram-k3", "eagle-k3", "eagle3-k3"]
batch_sizes = [1, 4]
datasets = ["gsm8k", "instructcoder"]
"""


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "plugin-test.toml"
    path.write_text(PROFILE)
    return path


def collected_ids(pytester, *args, in_subprocess: bool = False) -> list[str]:
    """The scenario ids a collection lists; `in_subprocess` for a test that collects more than once
    (an in-process run imports the test module and numpy once per process only)."""
    run = pytester.runpytest_subprocess if in_subprocess else pytester.runpytest
    result = run("--collect-only", "-q", "-p", "no:cacheprovider", str(PERF_TESTS), *args)
    assert result.ret == 0, result.stdout.str()
    return [line.split("[", 1)[1].rstrip("]") for line in result.stdout.lines if "::test_scenario[" in line]


def test_every_scenario_is_one_case_with_a_readable_id(pytester, profile):
    ids = collected_ids(pytester, "--profile", str(profile))
    assert len(ids) == 4 * 2 * 2  # (no-SD + 3 methods) x 2 batch sizes x 2 datasets
    assert "tiny-eagle3-k3-bs4-gsm8k" in ids
    assert "tiny-nosd-bs1-instructcoder" in ids


def test_references_run_first_and_engine_keys_stay_together(pytester, profile):
    ids = collected_ids(pytester, "--profile", str(profile))
    methods = [i.split("-bs")[0] for i in ids]
    blocks = [m for n, m in enumerate(methods) if n == 0 or methods[n - 1] != m]
    assert blocks == ["tiny-nosd", "tiny-ngram-k3", "tiny-eagle-k3", "tiny-eagle3-k3"]


def test_keyword_selection_brings_back_the_references(pytester, profile):
    ids = collected_ids(pytester, "--profile", str(profile), "-k", "eagle")
    sd = {i for i in ids if "nosd" not in i}
    assert sd == {
        f"tiny-{m}-bs{b}-{d}" for m in ("eagle-k3", "eagle3-k3") for b in (1, 4) for d in ("gsm8k", "instructcoder")
    }
    assert {i for i in ids if "nosd" in i} == {
        f"tiny-nosd-bs{b}-{d}" for b in (1, 4) for d in ("gsm8k", "instructcoder")
    }
    assert not any("ngram" in i for i in ids)


def test_marker_selection_by_method_and_dataset(pytester, profile):
    ids = collected_ids(pytester, "--profile", str(profile), "-m", "ngram and gsm8k")
    assert sorted(ids) == [
        "tiny-ngram-k3-bs1-gsm8k",
        "tiny-ngram-k3-bs4-gsm8k",
        "tiny-nosd-bs1-gsm8k",
        "tiny-nosd-bs4-gsm8k",
    ]


def test_reference_alone_does_not_pull_in_sd_scenarios(pytester, profile):
    ids = collected_ids(pytester, "--profile", str(profile), "-k", "nosd and bs1")
    assert sorted(ids) == ["tiny-nosd-bs1-gsm8k", "tiny-nosd-bs1-instructcoder"]


def test_malformed_profile_fails_with_one_line_naming_file_and_field(pytester, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(PROFILE.replace("batch_sizes = [1, 4]", "batch_sizes = [1, 0]"))
    result = pytester.runpytest(
        "--collect-only", "-q", "-p", "no:cacheprovider", str(PERF_TESTS), "--profile", str(bad)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # at configure time, not a collection error
    errors = [line for line in result.stderr.lines + result.stdout.lines if "bad.toml" in line]
    assert errors, result.stdout.str() + result.stderr.str()
    assert "cells[0].batch_sizes[1]" in errors[0] and "positive integer" in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_unknown_profile_names_the_available_ones(pytester):
    result = pytester.runpytest(
        "--collect-only", "-q", "-p", "no:cacheprovider", str(PERF_TESTS), "--profile", "no-such-profile"
    )
    assert result.ret != 0
    assert "cpu-smoke" in result.stderr.str() + result.stdout.str()


def test_default_profile_without_gpu_is_cpu_smoke(pytester, monkeypatch):
    from specperf.suite import profile as suite_profile

    monkeypatch.setattr(suite_profile, "has_nvidia_gpu", lambda: False)
    assert suite_profile.default_profile() == "cpu-smoke"
    monkeypatch.setattr(suite_profile, "has_nvidia_gpu", lambda: True)
    assert suite_profile.default_profile() == "h100-nightly"


def usage_error(pytester, *args) -> str:
    """The one-line usage error of a run with these options (collection only: nothing runs)."""
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", str(PERF_TESTS), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    output = result.stderr.str() + result.stdout.str()
    assert "Traceback" not in output
    (line,) = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    return line


@pytest.mark.parametrize(
    "args, words",
    [
        (["--rounds", "0"], "--rounds must be at least 1, got 0"),
        (["--rounds", "2", "--update-baselines"], "--update-baselines needs at least 4 rounds"),
        (["--scenario-timeout", "0"], "--scenario-timeout must be positive"),
        (
            ["--scenario-timeout", "nan"],
            "--scenario-timeout must be positive seconds, at most 604800 (a week), got nan",
        ),
        (["--scenario-timeout", "1e12"], "--scenario-timeout must be positive seconds"),
        (["--resume", "no-such-run"], "--resume: no-such-run/run.json: cannot read run file"),
        (["--rolling-baseline", "0"], "--rolling-baseline must be at least 1, got 0"),
        (
            ["--rolling-baseline", "5", "--history", "off"],
            "--rolling-baseline reads the run history, which --history off",
        ),
        (
            ["--rolling-baseline", "5", "--history", "postgresql://u@127.0.0.1:1/h"],
            "--rolling-baseline: history postgresql://u@127.0.0.1:1/h: OperationalError",
        ),
        (["--two-strike"], "--two-strike goes with --rolling-baseline N"),
        (["--max-shard-hours", "6"], "--max-shard-hours goes with --shard I/N"),
        (["--shard", "1/2", "--max-shard-hours", "0"], "--max-shard-hours: expected hours above 0"),
        (["--run-dir", "a", "--resume", "b"], "--run-dir goes on from the run it holds by itself"),
        (["--gate-max-sets", "4"], "--gate-max-sets goes with --candidate"),
        (["--candidate", "/usr/bin/python3", "--gate-max-sets", "0"], "--gate-max-sets must be 1..64 sets, got 0"),
        (["--serve-url", "staging:8000"], "--serve-url: 'staging:8000' is not an http(s) URL"),
        (
            ["--serve-url", "http://127.0.0.1:8000", "--candidate", "/usr/bin/python3"],
            "--serve-url cannot go with --candidate",
        ),
    ],
)
def test_conflicting_or_impossible_options_are_one_line_usage_errors(pytester, profile, args, words):
    assert words in usage_error(pytester, "--profile", str(profile), *args)


def resumable_run(run_dir, profile_name: str, hardware_key: str, **extra) -> None:
    from specperf.storage import atomic_write_json

    atomic_write_json(
        run_dir / "run.json",
        {
            "schema_version": 1,
            "run_id": run_dir.name,
            "profile": profile_name,
            "device": {"kind": "cpu", "hardware_key": hardware_key},
            **extra,
        },
    )


def test_resume_takes_the_profile_by_name_never_from_a_path_in_the_run(pytester, profile, tmp_path):
    from specperf.run.hardware.device import describe_device

    here = describe_device()["hardware_key"]
    run_dir = tmp_path / "reports" / "20260101-000000-plugin-test"
    evil = tmp_path / "evil.toml"
    evil.write_text(
        PROFILE.replace("[models.tiny]", "[profile.engine_args]\ntrust_remote_code = true\n\n[models.tiny]")
    )
    resumable_run(run_dir, "plugin-test", here, profile_path=str(evil))
    line = usage_error(pytester, "--resume", str(run_dir))
    assert "its profile 'plugin-test' is not one of" in line and "--profile PATH" in line
    assert len(collected_ids(pytester, "--resume", str(run_dir), "--profile", str(profile))) == 16
    line = usage_error(pytester, "--resume", str(run_dir), "--profile", "cpu-smoke")
    assert "that run measured profile 'plugin-test', not 'cpu-smoke'" in line
    resumable_run(run_dir, "../../evil", here)
    assert "is not one of" in usage_error(pytester, "--resume", str(run_dir))
    (run_dir / "run.json").write_text("{")
    assert "corrupt run file" in usage_error(pytester, "--resume", str(run_dir))


def test_a_run_dir_that_holds_a_run_goes_on_from_it_and_an_empty_one_starts_there(pytester, profile, tmp_path):
    """A retried shard's command is the same as its first try's: --run-dir resumes what that try left."""
    from specperf.run.hardware.device import describe_device

    run_dir = tmp_path / "runs" / "shard2"
    assert len(collected_ids(pytester, "--run-dir", str(run_dir), "--profile", str(profile))) == 16
    resumable_run(run_dir, "cpu-smoke", describe_device()["hardware_key"])
    line = usage_error(pytester, "--run-dir", str(run_dir), "--profile", str(profile))
    assert "that run measured profile 'cpu-smoke', not 'plugin-test'" in line  # taken as --resume


def test_resume_refuses_a_run_of_other_hardware(pytester, profile, tmp_path):
    run_dir = tmp_path / "reports" / "20260101-000000-plugin-test"
    resumable_run(run_dir, "plugin-test", "gpu-nvidia-h100-80gb-hbm3-80g-x1")
    line = usage_error(pytester, "--resume", str(run_dir), "--profile", str(profile))
    assert "that run was measured on gpu-nvidia-h100-80gb-hbm3-80g-x1, this machine is cpu-" in line


@pytest.mark.parametrize("link", ["results", "servers", "index.html", "results/x.json"])
def test_resume_refuses_anything_behind_a_symbolic_link(pytester, profile, tmp_path, link):
    """servers/ through a link once had the server's args file and log written outside the run
    folder; a result file through one raised an uncaught exception."""
    from specperf.run.hardware.device import describe_device

    run_dir = tmp_path / "reports" / "20260101-000000-plugin-test"
    resumable_run(run_dir, "plugin-test", describe_device()["hardware_key"])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (run_dir / link).parent.mkdir(exist_ok=True)
    (run_dir / link).symlink_to(outside)
    line = usage_error(pytester, "--resume", str(run_dir), "--profile", str(profile))
    assert f"{run_dir / link} is a symbolic link: refusing to write through it" in line


def test_a_result_is_never_written_through_a_symbolic_link(tmp_path):
    from records import make_record

    from specperf.storage import ResultFileError, write_result

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results").symlink_to(outside)
    with pytest.raises(ResultFileError, match="refusing to read or write through a symbolic link"):
        write_result(tmp_path / "run", make_record())
    assert list(outside.iterdir()) == []


def test_profile_changes_since_a_resumed_run_are_named(profile):
    from specperf.profiles.scenarios import load_profile
    from specperf.suite.profile import profile_changes

    loaded = load_profile(str(profile))
    recorded = {s.id: s.hash for s in loaded.scenarios}
    assert profile_changes(recorded, loaded) is None and profile_changes({}, loaded) is None
    first, second = sorted(recorded)[:2]
    recorded[first] = "0" * 16
    del recorded[second]
    recorded["tiny-gone-bs1-gsm8k"] = "1" * 16
    line = profile_changes(recorded, loaded)
    assert f"changed: {first}" in line and f"added: {second}" in line and "removed: tiny-gone-bs1-gsm8k" in line


def test_shards_partition_the_selection(pytester, profile):
    everything = set(collected_ids(pytester, "--profile", str(profile)))
    first = collected_ids(pytester, "--profile", str(profile), "--shard", "1/2")
    second = collected_ids(pytester, "--profile", str(profile), "--shard", "2/2")
    sd = {i for i in everything if "-nosd-" not in i}
    assert (set(first) | set(second)) == everything
    assert not (set(first) & set(second) & sd)  # SD scenarios run once; references where needed
    assert first and second


def test_bad_shard_is_a_usage_error(pytester, profile):
    assert "--shard: expected I/N" in usage_error(pytester, "--profile", str(profile), "--shard", "3/2")


def test_gpu_profile_on_a_machine_without_gpu_skips_with_the_reason(pytester, profile, monkeypatch):
    from specperf.run.hardware import device as hardware

    monkeypatch.setattr(hardware, "describe_device", hardware.describe_cpu)
    gpu = profile.parent / "gpu-test.toml"
    gpu.write_text(
        profile.read_text().replace('name = "plugin-test"', 'name = "gpu-test"\ntier = "gpu"\nrequires_gpu = "H100"')
    )
    result = pytester.runpytest_inprocess(
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        str(PERF_TESTS),
        "--profile",
        str(gpu),
        "--reports-dir",
        str(pytester.path / "r"),
    )
    result.assert_outcomes(skipped=16)
    assert "needs an NVIDIA GPU (this machine:" in result.stdout.str()
    assert not (pytester.path / "r").exists()  # nothing started, nothing written


def test_a_suite_run_prints_a_timing_table_that_fits_a_terminal(pytester, profile):
    """pytest-benchmark's table shows the median round and the round count unless asked otherwise."""
    config = pytester.parseconfigure("-p", "no:cacheprovider", "--profile", str(profile))
    assert config.option.benchmark_columns == ["median", "rounds"]
    chosen = pytester.parseconfigure("-p", "no:cacheprovider", "--profile", str(profile), "--benchmark-columns", "min")
    assert chosen.option.benchmark_columns == ["min"]


def test_xdist_keeps_each_model_on_one_worker(pytester, profile):
    """-n N alone means --dist load; the suite turns it into loadgroup, grouped by model, so a
    model's references and engines stay on one worker."""
    config = pytester.parseconfigure("-n", "2", "--dist", "load", "-p", "no:cacheprovider", "--profile", str(profile))
    assert config.option.dist == "loadgroup"
    assert config.option.loadscopereorder is False  # groups go out in the suite's order
    items, _ = pytester.inline_genitems(str(PERF_TESTS), "--profile", str(profile), "-p", "no:cacheprovider")
    groups = {
        item.callspec.params["specperf_scenario"].model.name: item.get_closest_marker("xdist_group").args[0]
        for item in items
    }
    assert groups == {"tiny": "tiny"}


def test_sigterm_ends_a_run_as_an_interrupt(pytester, profile):
    """A cancelled CI job or a drained node sends SIGTERM: the run ends like Ctrl-C (results kept,
    report written, no baseline refreshed) instead of dying on the spot."""
    pytester.makepyfile(
        test_term="""
        import os, signal

        def test_gets_sigterm():
            os.kill(os.getpid(), signal.SIGTERM)

        def test_never_runs():
            pass
    """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--profile", str(profile))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "KeyboardInterrupt" in result.stdout.str() and "SIGTERM" in result.stdout.str()
    assert "1 passed" not in result.stdout.str()


def test_xdist_grouping_problem_is_refused_not_silent():
    from packaging.version import Version

    from specperf.run.builds.versions import installed_version, xdist_grouping_problem

    assert xdist_grouping_problem(Version("9.2.0"), Version("3.8.0")) == (
        "pytest-xdist 3.8.0 does not keep xdist_group tests together under pytest 9.2.0 "
        "(pytest-xdist#1386): install 'pytest<9.2' (as this suite's requirements say) to run it with -n"
    )
    assert "pytest-xdist#1386" in xdist_grouping_problem(Version("9.2.0rc1"), Version("3.8.1"))
    assert xdist_grouping_problem(Version("9.1.1"), Version("3.8.0")) is None
    assert xdist_grouping_problem(Version("9.2.0"), Version("3.9.0")) is None
    assert xdist_grouping_problem(Version("9.2.0"), None) is None
    assert installed_version("pytest") == Version(pytest.__version__)
    assert installed_version("no-such-distribution-specperf") is None


def test_installed_pytest_and_xdist_keep_groups_on_one_worker(pytester, monkeypatch):
    """The grouping the suite relies on, with the installed versions (no engines involved)."""
    seen_dir = pytester.path / "seen"
    seen_dir.mkdir()
    monkeypatch.setenv("SEEN_DIR", str(seen_dir))
    pytester.makepyfile(
        test_groups="""
        import os
        import pytest

        @pytest.mark.parametrize("group", [pytest.param(g, marks=pytest.mark.xdist_group(g)) for g in "aaabbb"])
        def test_member(group):
            worker = os.environ["PYTEST_XDIST_WORKER"]
            with open(os.path.join(os.environ["SEEN_DIR"], f"{group}-{worker}"), "a") as seen:
                seen.write("x")
    """
    )
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    workers = {}
    for marker in seen_dir.iterdir():
        group, worker = marker.name.split("-")
        workers.setdefault(group, set()).add(worker)
    assert workers.keys() == {"a", "b"}
    assert all(len(w) == 1 for w in workers.values()), workers


def test_an_unrelated_run_keeps_its_own_scheduling_and_signals(pytester, tmp_path):
    """Installed with the package, the plugin must not change a team's own `pytest tests` run."""
    seen = tmp_path / "seen"
    seen.mkdir()
    pytester.makeconftest(f"""
        import json, os, signal
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_configure(config):
            name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
            with open(os.path.join({str(seen)!r}, name), "w") as out:
                json.dump({{"dist": config.getoption("dist"),
                           "benchmark_columns": config.getoption("benchmark_columns"),
                           "sigterm_default": signal.getsignal(signal.SIGTERM) is signal.SIG_DFL}}, out)
    """)
    pytester.makepyfile(
        test_plain="""
        def test_one():
            pass

        def test_two():
            pass
    """
    )
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "load", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    import json

    states = {path.name: json.loads(path.read_text()) for path in seen.iterdir()}
    assert states["controller"]["dist"] == "load"
    assert all(state["benchmark_columns"] is None for state in states.values()), states
    assert {"gw0", "gw1"} <= states.keys()
    assert all(state["sigterm_default"] for state in states.values()), states
    assert "[specperf]" not in result.stdout.str()


def test_a_run_whose_every_scenario_is_skipped_fails(pytester, profile, monkeypatch):
    """A GPU profile on a machine without GPUs skips every case: nothing was measured, so no green run."""
    gpu_profile = profile.parent / "gpu-only.toml"
    gpu_profile.write_text(profile.read_text().replace('name = "plugin-test"', 'name = "gpu-only"\ntier = "gpu"'))
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-q",
        str(PERF_TESTS),
        "--profile",
        str(gpu_profile),
        "-k",
        "nosd and bs1 and gsm8k",
        "--reports-dir",
        str(profile.parent / "reports"),
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*every scenario was skipped: this run measured nothing*", "*1 skipped*"])


def test_gate_option_errors_are_usage_lines(pytester, profile, tmp_path):
    line = usage_error(pytester, "--profile", str(profile), "--candidate", str(tmp_path / "no-python"))
    assert line.startswith("ERROR: --candidate: ") and "no-python: cannot run it" in line
    import sys

    line = usage_error(pytester, "--profile", str(profile), "--candidate", sys.executable)
    assert "vLLM is not installed in that environment" in line
    line = usage_error(pytester, "--profile", str(profile), "--candidate", sys.executable, "--update-baselines")
    assert "--update-baselines cannot go with --candidate" in line
    assert "--gate-blocks must be at least 1" in usage_error(pytester, "--profile", str(profile), "--gate-blocks", "0")


def test_a_profile_measured_with_another_vllm_warns_in_the_header(pytester, tmp_path, monkeypatch):
    import specperf.plugin

    monkeypatch.setattr(specperf.plugin, "installed_vllm", lambda: ("vllm", "0.32.0"))
    path = tmp_path / "study-like.toml"
    path.write_text(PROFILE.replace("[models.tiny]", 'vllm = "0.10.1.1"\n\n[models.tiny]', 1))
    result = pytester.runpytest_inprocess(
        "--collect-only", "-p", "no:cacheprovider", str(PERF_TESTS), "--profile", str(path)
    )  # not -q: it hides the header
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "specperf: warning: the profile's reference figures were measured with vLLM "
            "0.10.1.1 (16 scenarios); this run uses 0.32.0"
        ]
    )


def test_a_profile_that_loads_code_says_so_in_the_header(pytester, tmp_path):
    path = tmp_path / "remote-code.toml"
    path.write_text(
        PROFILE.replace(
            "[models.tiny]", 'allow_code = true\n\n[profile.env]\nPYTHONPATH = "/opt/x"\n\n[models.tiny]', 1
        )
    )
    result = pytester.runpytest_inprocess(
        "--collect-only", "-p", "no:cacheprovider", str(PERF_TESTS), "--profile", str(path)
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["specperf: plugin-test loads code into its engines (PYTHONPATH): allow_code = true"])


def test_serve_url_keeps_the_selected_serve_scenarios_and_adds_no_reference(pytester):
    cpu_smoke = str(Path(__file__).resolve().parent.parent / "fixtures" / "scenarios" / "cpu-smoke.toml")
    everything = collected_ids(pytester, "--profile", cpu_smoke, "-k", "smollm2 and ngram")
    assert "smollm2-135m-nosd-c2-instructcoder-serve" in everything  # the reference an SD scenario needs
    attached = collected_ids(
        pytester, "--profile", cpu_smoke, "-k", "smollm2 and ngram", "--serve-url", "http://127.0.0.1:8000"
    )
    assert sorted(attached) == [
        "smollm2-135m-ngram-k3-c1-instructcoder-serve",
        "smollm2-135m-ngram-k3-c2-instructcoder-serve",
    ]


def test_under_loadgroup_the_costliest_worker_groups_go_out_first(pytester, monkeypatch, tmp_path):
    """xdist hands groups out in collection order once the suite turns off its reordering by test
    count: cpu-full's SmolLM2 offline group first (its references, draft model, whose checkpoint a
    fresh machine builds first, adaptive proposer and sampled cells), then its served group
    (servers start slowly) and its paired k sweep (each k an engine and a no-SD engine), the tiny
    targets last, each group contiguous and in the order it has without xdist."""
    from specperf.profiles.scenarios import load_profile
    from specperf.suite.selection import worker_group

    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path / "fresh"))  # no checkpoint built yet
    group = {s.id: worker_group(s) for s in load_profile("cpu-full").scenarios}

    ids = collected_ids(pytester, "--profile", "cpu-full", "--dist", "loadgroup", in_subprocess=True)
    runs = [group[sid] for i, sid in enumerate(ids) if i == 0 or group[ids[i - 1]] != group[sid]]
    assert runs == [
        "smollm2-135m",
        "smollm2-135m-serve",
        "smollm2-135m-ngram-k3",
        "smollm2-135m-ngram-k1",
        "smollm2-135m-ngram-k5",
        "smollm2-135m-ngram-dynamic",
        "tiny-llama",
        "tiny-mimo",
    ]
    plain = collected_ids(pytester, "--profile", "cpu-full", in_subprocess=True)
    assert plain != ids and sorted(plain) == sorted(ids)
    assert ids == sorted(plain, key=lambda sid: runs.index(group[sid]))  # each group keeps its order
