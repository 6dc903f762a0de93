"""The guides in docs/howto/ hold: each is followed on a copy of the package, its steps' code put in
the files its steps name, and what the guide promises is then checked in a fresh interpreter on
that copy; leaving out any one of those files breaks the promise, so each file a guide names is
one the code needs."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
HOWTO = CHECKOUT / "docs" / "howto"

# Where the code of a step goes in the file it names: after each of these lines (a registry's
# opening, or the field or statement the guide's example follows).  The guide says what; this only
# says where.
WHERE = {
    "specperf/methods.py": ["METHODS: dict[str, SDMethod] = {\n    m.name: m\n    for m in (\n"],
    "specperf/run/builds/methods.py": ["SPANS: tuple[Span, ...] = (\n"],
    "specperf/judge/metrics.py": ["METRICS: dict[str, MetricSpec] = {\n    m.name: m\n    for m in (\n"],
    "specperf/run/summary.py": [
        '    values = {"throughput_tok_s": Metric(value=_median(throughputs), samples=throughputs)}\n'
    ],
    "specperf/profiles/workloads/catalog.py": ["WORKLOADS: dict[str, Workload] = {\n    w.name: w\n    for w in (\n"],
    "specperf/records/scenario.py": ["    vllm: str | None = None  # the vLLM its reference figures came from\n"],
    "specperf/profiles/schema.py": [  # [profile]'s field, and a cell's
        '    requires_gpu: GpuClass = _optional("oldest GPU class that may run the gpu tier; default: any")\n',
        '    trace: bool = _optional("default: [profile] trace")\n',
    ],
}


def steps(guide: str) -> list[tuple[str, str]]:
    """(file, code) of each numbered step of a guide that shows code: the package file it names first."""
    found = []
    for step in re.split(r"\n(?=\d+\. )", (HOWTO / guide).read_text(encoding="utf-8")):
        block = re.search(r"```python\n(.*?)```", step, re.S)
        path = re.search(r"`(specperf/[\w/]+\.py)`", step)
        if block and path and re.match(r"\d+\. ", step):
            found.append((path.group(1), textwrap.dedent(block.group(1))))
    return found


def as_inserted(code: str) -> str:
    """A step's code as it goes into the file: the entries of a one-entry tuple `(Entry(...),)`
    (the form a guide shows a registry entry in), else the code itself."""
    body = ast.parse(code).body
    if len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Tuple):
        return "".join(f"{ast.get_source_segment(code, entry)},\n" for entry in body[0].value.elts)
    return code


def follow(guide: str, copy: Path, leave_out: str | None = None) -> set[str]:
    """Do the guide's steps on `copy` (but those in file `leave_out`); the files its steps name."""
    named = set()
    for path, code in steps(guide):
        named.add(path)
        assert path in WHERE, f"{guide} names {path}, where this test has no place to put its code"
        if path == leave_out:
            continue
        file = copy / path
        for anchor in WHERE[path]:
            text = file.read_text()
            assert anchor in text, (path, anchor)
            after = text[text.index(anchor) + len(anchor) :]
            indent = re.match(r"\s*", after).group(0).rsplit("\n", 1)[-1]
            file.write_text(text.replace(anchor, anchor + textwrap.indent(as_inserted(code), indent), 1))
    return named


def package_copy(folder: Path) -> Path:
    """The package and the profiles, copied."""
    shutil.copytree(CHECKOUT / "specperf", folder / "specperf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(CHECKOUT / "fixtures", folder / "fixtures")
    (folder / "tests_perf").mkdir()
    return folder


def promise_kept(copy: Path, script: str, files: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `script` in a fresh interpreter on `copy`, with `files` written there first."""
    for name, text in files.items():
        (copy / name).write_text(text)
    return subprocess.run(
        [sys.executable, "-P", "-c", textwrap.dedent(script)],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(copy), "SPECPERF_ROOT": str(copy)},
    )


PROFILE = """
[profile]
name = "howto"
tier = "cpu"
[models.m]
path = "builtin:smollm2-135m"
[methods.{label}]
method = "{method}"
num_speculative_tokens = 3
[[cells]]
model = "m"
methods = ["{label}"]
batch_sizes = [1]
datasets = ["{dataset}"]
"""

SETTING_PROFILE = (
    PROFILE.format(label="ngram-k3", method="ngram", dataset="gsm8k").replace(
        'tier = "cpu"\n', 'tier = "cpu"\nmax_num_seqs = 8\n'
    )
    + '\n[[cells]]\nmodel = "m"\nmethods = ["ngram-k3"]\nbatch_sizes = [4]\ndatasets = ["gsm8k"]\nmax_num_seqs = 2\n'
)
MBPP = "".join(f'{{"id": "mbpp-{i}", "question": "Write f{i}.", "answer": "def f{i}(): pass"}}\n' for i in range(3))

# What each guide promises, as a script that fails where the promise is broken, and the files it reads.
PROMISES = {
    "add-a-method.md": (
        """
        from specperf.profiles.scenarios import load_profile
        from specperf.profiles.registry import markers
        from specperf.methods import method_of
        from specperf.run.builds.methods import unsupported_reason
        ids = sorted(s.id for s in load_profile("howto.toml").scenarios)
        assert ids == ["m-la-k3-bs1-gsm8k", "m-nosd-bs1-gsm8k"], ids
        assert "lookahead" in markers() and not method_of("lookahead").has_own_weights
        assert unsupported_reason("lookahead", None, "0.40.0") is None
        older = unsupported_reason("lookahead", None, "0.39.0")
        assert "method lookahead" in str(older) and "0.40.0" in str(older), older
        """,
        {"howto.toml": PROFILE.format(label="la-k3", method="lookahead", dataset="gsm8k")},
    ),
    "add-a-workload.md": (
        """
        from specperf.profiles.scenarios import load_profile
        from specperf.profiles.registry import markers
        from specperf.profiles.workloads import load
        assert {s.dataset for s in load_profile("howto.toml").scenarios} == {"mbpp"}
        assert "mbpp" in markers()
        sample = load("mbpp", 2, 42, "data")
        assert len(sample.requests) == 2 and all(r.text.startswith("Write f") for r in sample.requests), sample
        """,
        {"howto.toml": PROFILE.format(label="ngram-k3", method="ngram", dataset="mbpp"), "data/mbpp.jsonl": MBPP},
    ),
    "add-a-metric.md": (
        """
        from specperf.profiles.scenarios import REFERENCE_METHOD, Model, Scenario
        from specperf.records import Counters
        from specperf.run.loop import RoundResult
        from specperf.run.summary import summarise
        from specperf.judge.verdicts import compare_metric
        scenario = Scenario(profile="unit", model=Model(name="m", path="builtin:smollm2-135m"),
                            method=REFERENCE_METHOD, batch_size=1, dataset="gsm8k", num_requests=1,
                            output_len=8, rounds=4, warmup=0)
        rounds = [RoundResult(engine="e", wall_s=1.0, output_tokens=8, counters=Counters(), token_ids=[[1] * 8],
                              texts=["x"]) for _ in range(4)]
        summary = summarise(scenario, rounds, [], None)
        assert summary.metrics["output_tokens_per_round"].samples == [8.0] * 4, summary.metrics
        assert compare_metric("output_tokens_per_round", [8.0] * 4, [6.0] * 4).status == "regression"
        assert compare_metric("output_tokens_per_round", [8.0] * 4, [0.5] * 4).status == "invalid"  # below least
        """,
        {},
    ),
    "add-a-scenario-setting.md": (
        """
        from specperf.profiles.scenarios import load_profile
        from specperf.records import Scenario
        scenarios = {s.id: s for s in load_profile("howto.toml").scenarios}
        assert scenarios["m-ngram-k3-bs1-gsm8k"].max_num_seqs == 8, scenarios
        assert scenarios["m-ngram-k3-bs4-gsm8k"].max_num_seqs == 2
        stored = scenarios["m-ngram-k3-bs4-gsm8k"].to_json()
        assert stored["max_num_seqs"] == 2 and Scenario.model_validate(stored).max_num_seqs == 2
        old = {k: v for k, v in stored.items() if k != "max_num_seqs"}
        assert Scenario.model_validate(old).max_num_seqs is None  # an older result still reads
        """,
        {"howto.toml": SETTING_PROFILE},
    ),
}


def test_every_guide_has_its_promise():
    assert sorted(PROMISES) == sorted(p.name for p in HOWTO.glob("*.md"))


@pytest.mark.parametrize("guide", sorted(PROMISES))
def test_following_a_guide_keeps_its_promise(guide, tmp_path):
    copy = package_copy(tmp_path)
    follow(guide, copy)
    (copy / "data").mkdir()
    done = promise_kept(copy, *PROMISES[guide])
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("guide", sorted(PROMISES))
def test_each_file_a_guide_names_is_needed(guide, tmp_path):
    named = {path for path, _ in steps(guide)}
    assert named, f"{guide} shows no code for any file"
    for path in sorted(named):
        copy = package_copy(tmp_path / path.replace("/", "-"))
        follow(guide, copy, leave_out=path)
        (copy / "data").mkdir()
        done = promise_kept(copy, *PROMISES[guide])
        assert done.returncode != 0, f"{guide}: its promise holds without the step in {path}"
