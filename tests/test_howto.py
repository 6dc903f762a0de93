"""The guides in docs/howto/ hold: each is followed on a copy of the package, editing only the files
it names, and what it promises is then checked in a fresh interpreter on that copy."""

from __future__ import annotations

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


def named_files(guide: str) -> set[str]:
    """The package files a guide tells the reader to edit."""
    return set(re.findall(r"`(specperf/[\w/]+\.py)`", (HOWTO / guide).read_text()))


@pytest.fixture
def copy(tmp_path) -> Path:
    """The package and the profiles, copied."""
    shutil.copytree(CHECKOUT / "specperf", tmp_path / "specperf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(CHECKOUT / "fixtures", tmp_path / "fixtures")
    (tmp_path / "tests_perf").mkdir()
    return tmp_path


def edit(copy: Path, path: str, anchor: str, addition: str) -> None:
    """Insert `addition` after the first `anchor` in the copy's `path`."""
    file = copy / path
    text = file.read_text()
    assert anchor in text, (path, anchor)
    file.write_text(text.replace(anchor, anchor + addition, 1))


def changed(copy: Path) -> set[str]:
    return {
        str(p.relative_to(copy))
        for p in (copy / "specperf").rglob("*.py")
        if p.read_bytes() != (CHECKOUT / p.relative_to(copy)).read_bytes()
    }


def check(copy: Path, script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-P", "-c", textwrap.dedent(script)],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(copy), "SPECPERF_ROOT": str(copy)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


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


def test_adding_a_method(copy):
    edit(
        copy,
        "specperf/methods.py",
        '            fit_from="draft_model",\n        ),\n',
        '        SDMethod("lookahead", "lookahead", "lookahead-decoding scenarios", MODEL_FREE),\n',
    )
    edit(
        copy,
        "specperf/run/vllm_methods.py",
        "SPANS: tuple[Span, ...] = (\n",
        '    Span("lookahead", "0.40.0", None, "lookahead", "vllm/config/speculative.py v0.40.0"),\n',
    )
    assert changed(copy) == named_files("add-a-method.md") == {"specperf/methods.py", "specperf/run/vllm_methods.py"}
    (copy / "howto.toml").write_text(PROFILE.format(label="la-k3", method="lookahead", dataset="gsm8k"))
    out = check(
        copy,
        """
        from specperf.profiles.scenarios import load_profile
        from specperf.profiles.registry import markers
        from specperf.methods import method_of
        from specperf.run.vllm_methods import unsupported_reason
        ids = sorted(s.id for s in load_profile("howto.toml").scenarios)
        assert ids == ["m-la-k3-bs1-gsm8k", "m-nosd-bs1-gsm8k"], ids
        assert "lookahead" in markers() and not method_of("lookahead").has_own_weights
        assert unsupported_reason("lookahead", None, "0.40.0") is None
        print(unsupported_reason("lookahead", None, "0.39.0"))
        """,
    )
    assert "method lookahead" in out and "0.40.0" in out


def test_adding_a_workload(copy, tmp_path):
    edit(
        copy,
        "specperf/profiles/workloads/catalog.py",
        "    for w in (\n",
        """        Workload(name="mbpp", title="MBPP programming problems", figure_label=None, chat=True,
                 local_files=(LocalFile("mbpp.jsonl"),), hub=HubSource("mbpp", None, "test"),
                 parse=parse_gsm8k),
""",
    )
    assert changed(copy) == {"specperf/profiles/workloads/catalog.py"} <= named_files("add-a-workload.md")
    data = tmp_path / "data"
    data.mkdir()
    (data / "mbpp.jsonl").write_text(
        "".join(f'{{"id": "mbpp-{i}", "question": "Write f{i}.", "answer": "def f{i}(): pass"}}\n' for i in range(3))
    )
    (copy / "howto.toml").write_text(PROFILE.format(label="ngram-k3", method="ngram", dataset="mbpp"))
    check(
        copy,
        f"""
        from specperf.profiles.scenarios import load_profile
        from specperf.profiles.registry import markers
        from specperf.profiles.workloads import load
        assert {{s.dataset for s in load_profile("howto.toml").scenarios}} == {{"mbpp"}}
        assert "mbpp" in markers()
        sample = load("mbpp", 2, 42, {str(data)!r})
        assert len(sample.requests) == 2 and all(r.text.startswith("Write f") for r in sample.requests), sample
        """,
    )


def test_adding_a_metric(copy):
    edit(
        copy,
        "specperf/judge/metrics.py",
        "METRICS: dict[str, MetricSpec] = {\n    m.name: m\n    for m in (\n",
        """        MetricSpec("output_tokens_per_round", "tokens", HIGHER, 0.0, "threshold",
                   "output tokens of a round (all its calls)", 1.0, math.inf),
""",
    )
    edit(
        copy,
        "specperf/run/summary.py",
        '    values = {"throughput_tok_s": Metric(value=_median(throughputs), samples=throughputs)}\n',
        """    tokens = [float(r.output_tokens) for r in rounds]
    values["output_tokens_per_round"] = Metric(value=_median(tokens), samples=tokens)
""",
    )
    assert changed(copy) == named_files("add-a-metric.md") == {"specperf/judge/metrics.py", "specperf/run/summary.py"}
    check(
        copy,
        """
        from specperf.profiles.scenarios import REFERENCE_METHOD, Model, Scenario
        from specperf.run.loop import RoundResult
        from specperf.run.summary import summarise
        scenario = Scenario(profile="unit", model=Model(name="m", path="builtin:smollm2-135m"),
                            method=REFERENCE_METHOD, batch_size=1, dataset="gsm8k", num_requests=1,
                            output_len=8, rounds=4, warmup=0, seed=42, batching="replicate",
                            engine_args={}, tolerances={})
        from specperf.records import Counters
        counters = Counters()
        rounds = [RoundResult(engine="e", wall_s=1.0, output_tokens=n, counters=counters, token_ids=[[1] * n],
                              texts=["x"]) for n in (8, 8, 8, 8)]
        summary = summarise(scenario, rounds, [], None)
        assert summary.metrics["output_tokens_per_round"].samples == [8.0] * 4, summary.metrics
        from specperf.judge.verdicts import compare_metric
        assert compare_metric("output_tokens_per_round", [8.0] * 4, [6.0] * 4).status == "regression"
        assert compare_metric("output_tokens_per_round", [8.0] * 4, [0.5] * 4).status == "invalid"   # below least
        """,
    )


def test_adding_a_scenario_setting(copy):
    edit(
        copy,
        "specperf/records/scenario.py",
        "    vllm: str | None = None  # the vLLM its reference figures came from\n",
        "    max_num_seqs: int | None = None  # vLLM's running-request cap; None: vLLM's default\n",
    )
    field = '    max_num_seqs: int | None = Field(None, ge=1, description="vLLM\'s cap on running requests")\n'
    edit(copy, "specperf/profiles/schema.py", '    trace: bool = _optional("default: [profile] trace")\n', field)
    requires_gpu = (
        '    requires_gpu: GpuClass = _optional("oldest GPU class that may run the gpu tier; default: any")\n'
    )
    edit(copy, "specperf/profiles/schema.py", requires_gpu, field)
    assert changed(copy) == named_files("add-a-scenario-setting.md") - {"specperf/profiles/scenarios.py"}
    profile = PROFILE.format(label="ngram-k3", method="ngram", dataset="gsm8k")
    profile = profile.replace('tier = "cpu"\n', 'tier = "cpu"\nmax_num_seqs = 8\n')
    profile += (
        '\n[[cells]]\nmodel = "m"\nmethods = ["ngram-k3"]\nbatch_sizes = [4]\ndatasets = ["gsm8k"]\nmax_num_seqs = 2\n'
    )
    (copy / "howto.toml").write_text(profile)
    check(
        copy,
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
    )
