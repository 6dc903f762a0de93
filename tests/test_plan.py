"""The cost planner (`specperf plan`) on constructed profiles and history rows: which source each
figure comes from, the arithmetic of a scenario's time, shards as `--shard I/N` splits them, and GPUs."""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from pathlib import Path

import pytest
from records import make_record, make_scenario

from specperf.analysis.cost import CPU, H100, default_throughput, model_size_b
from specperf.cli import main
from specperf.history import History
from specperf.history.queries import TimedResult
from specperf.plan import DEFAULT, FITTED, HISTORY, OUTPUT_LEN, STUDY, TRACES, Planner, make_plan, split, study
from specperf.plan.shards import plan_shard
from specperf.plan.view import plan_lines, select
from specperf.profiles.scenarios import load_profile
from specperf.records import Timings
from specperf.run import sharding

HARDWARE = "cpu-test-2c"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

CPU_PROFILE = """
[profile]
name = "unit-plan"
tier = "cpu"
rounds = 4
warmup = 1
num_requests = 2
output_len = 32

[profile.engine_args]
dtype = "float32"

[models.small]
path = "org/Small-135M"

[models.small.methods.draft-k3]
method = "draft_model"
model = "org/Small-35M"
num_speculative_tokens = 3

[methods.ngram-k3]
method = "ngram"
num_speculative_tokens = 3

[[cells]]
model = "small"
methods = ["ngram-k3", "draft-k3"]
batch_sizes = [1, 4]
datasets = ["gsm8k", "aime"]
"""

GPU_PROFILE = """
[profile]
name = "unit-gpu"
tier = "gpu"
rounds = 5
warmup = 1
num_requests = 3
output_len = 256

[models.qwen3-8b]
path = "Qwen/Qwen3-8B"

[models.qwen3-8b.methods.eagle3-k3]
method = "eagle3"
model = "AngelSlim/Qwen3-8B_eagle3"
num_speculative_tokens = 3

[models."llama3.1-8b"]
path = "meta-llama/Llama-3.1-8B-Instruct"

[models."llama3.1-8b".methods.eagle3-k3]
method = "eagle3"
model = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
num_speculative_tokens = 3

[models.llama3-70b]
path = "meta-llama/Meta-Llama-3-70B-Instruct"
tp = 4

[methods.ngram-k3]
method = "ngram"
num_speculative_tokens = 3

[[cells]]
model = "qwen3-8b"
methods = ["ngram-k3", "eagle3-k3"]
batch_sizes = [1, 16]
datasets = ["gsm8k"]

[[cells]]
model = "llama3.1-8b"
methods = ["eagle3-k3"]
batch_sizes = [1, 32]
datasets = ["gsm8k"]

[[cells]]
model = "llama3-70b"
methods = ["ngram-k3"]
batch_sizes = [1, 16]
datasets = ["gsm8k"]
"""


def profile(tmp_path: Path, text: str = CPU_PROFILE, name: str = "unit-plan.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_profile(str(path))


def scenario(prof, scenario_id):
    return next(s for s in prof.scenarios if s.id == scenario_id)


def row(
    s,
    *,
    throughput=50.0,
    tokens=20,
    run_id="r1",
    start=12.0,
    warmup=3.0,
    measure=None,
    speedup=None,
    model=None,
    method=None,
) -> TimedResult:
    """A stored result of scenario s: `tokens` output tokens per sequence in each of its rounds."""
    sequences = s.num_requests * s.batch_size
    measure = s.rounds * sequences * tokens / throughput if measure is None else measure
    return TimedResult(
        run_id=run_id,
        run_started_at=T0,
        run_finished_at=T0 + datetime.timedelta(seconds=600),
        scenario_hash=s.hash,
        model=model or s.model.name,
        method=method or s.method.label,
        batch_size=s.batch_size,
        dataset=s.dataset,
        throughput=throughput,
        speedup=speedup,
        engine_start_s=start,
        warmup_s=warmup,
        measure_s=measure,
        rounds=s.rounds,
        output_tokens=s.rounds * sequences * tokens,
        sequences=sequences,
        prompt_tokens=90.0,
    )


# ------------------------------------------------------------------ the figures and their sources


@pytest.mark.parametrize(
    "path, size",
    [
        ("Qwen/Qwen3-0.6B", (0.6, 0.6)),
        ("meta-llama/Meta-Llama-3-70B-Instruct", (70.0, 70.0)),
        ("builtin:smollm2-135m", (0.135, 0.135)),
        ("zai-org/GLM-4.5-Air", (106.0, 12.0)),
        ("meta-llama/Llama-3.1-8B-Instruct", (8.0, 8.0)),
        ("builtin:tiny-llama", (0.0064, 0.0064)),
        ("org/no-size-here", None),
        (None, None),
    ],
)
def test_model_size_from_its_name(path, size):
    assert model_size_b(path) == size


@pytest.mark.parametrize(
    "dataset, cap, expected",
    [
        ("gsm8k", 32, 32.0),
        ("gsm8k", 256, 163.0),
        ("gsm8k", 192, 142.5),
        ("gsm8k", 32768, 166.0),
        ("sharegpt", 8, 8.0),
        ("instructcoder", 8192, 262.0),
        ("aime", 512, None),
        ("gpqa", 32768, None),
    ],
)
def test_expected_output_tokens_from_the_study_traces_capped_at_output_len(dataset, cap, expected):
    assert study.expected_output_tokens(dataset, cap) == expected


def test_a_scenario_with_history_of_its_own_takes_its_median_figures(tmp_path):
    prof = profile(tmp_path)
    s = scenario(prof, "small-ngram-k3-bs4-gsm8k")
    rows = [
        row(s, throughput=t, tokens=n, warmup=w, run_id=f"r{i}")
        for i, (t, n, w) in enumerate([(40.0, 18, 2.0), (50.0, 20, 3.0), (90.0, 30, 9.0)])
    ]
    estimate = Planner(prof, rows).estimate(s)
    assert (estimate.throughput.value, estimate.throughput.source) == (50.0, HISTORY)
    assert (estimate.tokens.value, estimate.tokens.source) == (20.0, HISTORY)
    assert (estimate.warmup_s.value, estimate.warmup_s.source) == (3.0, HISTORY)
    # 4 rounds x (2 requests x batch 4) sequences x 20 tokens / 50 tok/s
    assert estimate.measure_s == pytest.approx(4 * 8 * 20 / 50)


def test_without_history_a_cpu_scenario_uses_the_default_model_and_the_study_traces(tmp_path):
    prof = profile(tmp_path)
    gsm8k, aime = scenario(prof, "small-nosd-bs1-gsm8k"), scenario(prof, "small-nosd-bs1-aime")
    planner = Planner(prof)
    first, second = planner.estimate(gsm8k), planner.estimate(aime)
    assert (first.tokens.value, first.tokens.source) == (32.0, TRACES)  # gsm8k outputs outlast 32 tokens
    assert (second.tokens.value, second.tokens.source) == (32.0, OUTPUT_LEN)  # no trace of AIME: the cap
    assert first.throughput.source == DEFAULT
    assert first.throughput.value == pytest.approx(default_throughput(gsm8k, CPU, 32.0, 94, 1.0))
    # warm-up: one call (one request of the two) per warm-up round
    assert first.warmup_s.value == pytest.approx(first.measure_s / gsm8k.rounds / 2)


def test_default_model_arithmetic():
    s = make_scenario(batch_size=2).replace(
        model=make_scenario().model.model_copy(update={"path": "org/M-1B"}),
        engine_args={"dtype": "float32"},
    )
    # decode step: 10 ms + 4 GB / 10 GB/s + 2 x 2e9 FLOP / 40 GFLOP/s; prefill 2 x 100 x 2e9 / 40e9
    step, prefill = 0.010 + 0.4 + 0.1, 2 * 100 * 2e9 / 40e9
    assert default_throughput(s, CPU, 10, 100, 1.0) == pytest.approx(2 * 10 / (prefill + 10 * step))
    assert default_throughput(s, CPU, 10, 100, 2.0) == pytest.approx(2 * 10 / (prefill + 10 * step / 2))


def test_other_scenarios_of_the_model_on_this_machine_give_a_fitted_cost(tmp_path):
    prof = profile(tmp_path)
    measured, unseen = scenario(prof, "small-nosd-bs1-gsm8k"), scenario(prof, "small-nosd-bs4-gsm8k")
    modelled = default_throughput(measured, CPU, 20.0, 90.0, 1.0)
    planner = Planner(prof, [row(measured, throughput=3 * modelled, tokens=20)])
    estimate = planner.estimate(unseen)
    assert estimate.throughput.source == FITTED
    assert planner.factor("small") == (pytest.approx(3.0), 1, True)
    assert estimate.throughput.value == pytest.approx(3 * default_throughput(unseen, CPU, 32.0, 94, 1.0))


def test_rows_recorded_before_the_store_kept_timings_give_only_their_throughput(tmp_path):
    prof = profile(tmp_path)
    s = scenario(prof, "small-nosd-bs4-gsm8k")
    old = dataclasses.replace(
        row(s, throughput=40.0),
        engine_start_s=None,
        warmup_s=None,
        measure_s=None,
        rounds=None,
        output_tokens=None,
        sequences=None,
        prompt_tokens=None,
    )
    planner = Planner(prof, [old])
    estimate = planner.estimate(s)
    assert (estimate.throughput.value, estimate.throughput.source) == (40.0, HISTORY)
    assert estimate.tokens.source == TRACES
    assert estimate.warmup_s.value == pytest.approx(estimate.measure_s / s.rounds / 2)  # one call of two
    assert planner.engine_start([s]).source == DEFAULT
    assert planner.scenario_s.source == DEFAULT


def test_an_sd_scenario_takes_its_methods_speedup_measured_here(tmp_path):
    prof = profile(tmp_path)
    ref, sd = scenario(prof, "small-nosd-bs1-gsm8k"), scenario(prof, "small-ngram-k3-bs1-aime")
    other = scenario(prof, "small-ngram-k3-bs4-gsm8k")
    planner = Planner(prof, [row(ref, throughput=10.0), row(other, throughput=15.0, speedup=1.5)])
    assert planner.speedup(sd) == 1.5
    assert Planner(prof).speedup(sd) == 1.0  # CPU tier, nothing measured: no speedup assumed


def test_gpu_tier_uses_the_studys_h100_throughputs_and_speedups(tmp_path):
    prof = profile(tmp_path, GPU_PROFILE, "unit-gpu.toml")
    planner = Planner(prof)
    assert planner.machine is H100
    qwen = planner.estimate(scenario(prof, "qwen3-8b-nosd-bs16-gsm8k")).throughput
    assert (qwen.value, qwen.source) == (1885, STUDY)  # figure 3, Qwen3-8B GSM8K, batch 16
    eagle3 = planner.estimate(scenario(prof, "llama3.1-8b-eagle3-k3-bs1-gsm8k")).throughput
    assert eagle3.value == pytest.approx(136 * 1.749)  # Qwen3-8B's no-SD curve x figure 1's speedup
    between = planner.estimate(scenario(prof, "llama3.1-8b-eagle3-k3-bs32-gsm8k")).throughput.value
    base = 1885 * (5469 / 1885) ** 0.5  # log-log halfway from batch 16 to 64
    assert between == pytest.approx(base * 1.699 * (1.486 / 1.699) ** 0.5)
    big = planner.estimate(scenario(prof, "llama3-70b-nosd-bs1-gsm8k")).throughput.value
    assert big == pytest.approx(136 * 8.0 / (70.0 / 4))  # scaled by parameters per GPU


# ------------------------------------------------------------------ engine starts, shards and GPUs


def test_engine_start_from_history_then_the_same_model_then_the_default(tmp_path):
    prof = profile(tmp_path)
    ref = [s for s in prof.scenarios if s.method.is_reference]
    draft = [s for s in prof.scenarios if s.method.label == "draft-k3"]
    planner = Planner(prof, [row(ref[0], start=20.0), row(ref[1], start=0.0, run_id="r2")])
    assert (planner.engine_start(ref).value, planner.engine_start(ref).source) == (20.0, HISTORY)
    assert (planner.engine_start(draft).value, planner.engine_start(draft).source) == (20.0, FITTED)
    default = Planner(prof).engine_start(draft)
    # 10 s + 10 s per GB: target 135M and draft 35M in float32
    assert (default.value, default.source) == (pytest.approx(10 + 10 * 0.17 * 4), DEFAULT)


def test_shards_are_the_ones_shard_option_runs_and_each_pays_its_engine_starts(tmp_path):
    prof = profile(tmp_path)
    planner = Planner(prof)
    shards = split(planner, list(prof.scenarios), 2)
    expected = sharding.assign(list(prof.scenarios), 2)
    for shard, scenarios in zip(shards, expected):
        assert sorted(e.scenario.id for line in shard.engines for e in line.scenarios) == sorted(
            s.id for s in scenarios
        )
        assert shard.engine_starts == len({s.engine_key for s in scenarios})
        assert shard.command.endswith(f"--shard {shard.index}/2")
        assert shard.seconds == pytest.approx(
            CPU.run_s
            + sum(
                planner.engine_start([s for s in scenarios if s.engine_key == key]).value
                for key in {s.engine_key for s in scenarios}
            )
            + sum(planner.estimate(s).seconds for s in scenarios)
        )


def test_a_paired_reference_costs_a_second_engine_and_its_rounds(tmp_path):
    prof = profile(tmp_path, CPU_PROFILE.replace("output_len = 32", "output_len = 32\npaired_reference = true"))
    sd = scenario(prof, "small-ngram-k3-bs1-gsm8k")
    planner = Planner(prof)
    unpaired = profile(tmp_path, CPU_PROFILE, "unpaired.toml")
    alone = Planner(unpaired).estimate(scenario(unpaired, "small-nosd-bs1-gsm8k"))
    estimate = planner.estimate(sd)
    assert estimate.measure_s == pytest.approx(2 * alone.measure_s)  # same default throughput, both sides
    assert estimate.warmup_s.value == pytest.approx(2 * alone.warmup_s.value)  # the first call on each engine
    shard = split(planner, [sd], 1)[0]
    assert shard.engine_starts == 2
    # the sharder prices the same scenario by the same formula (analysis/cost.measuring_parts)
    unpaired_sd = scenario(unpaired, "small-ngram-k3-bs1-gsm8k")
    assert sharding.estimated_cost(sd) == pytest.approx(2 * sharding.estimated_cost(unpaired_sd))


def test_gpus_schedule_shards_by_their_tp_and_skip_what_does_not_fit(tmp_path):
    prof = profile(tmp_path, GPU_PROFILE, "unit-gpu.toml")
    planner = Planner(prof)
    one = make_plan(prof, list(prof.scenarios), planner, gpus=1)
    assert {s.model.tp for s in one.skipped} == {4} and len(one.skipped) == 4
    assert one.wall_s == pytest.approx(one.total_s)  # one GPU: shards one after another
    four = make_plan(prof, list(prof.scenarios), planner, gpus=4)
    assert not four.skipped
    assert any(s.gpus == 4 for s in four.shards) and any(s.gpus == 1 for s in four.shards)
    plain = [make_plan(prof, list(prof.scenarios), planner, shards=n, gpus=4).wall_s for n in range(1, 5)]
    assert four.wall_s <= min(plain) and four.wall_s < plain[0]  # the shortest split is taken
    assert four.gpu_hours == pytest.approx(sum(s.seconds * s.gpus for s in four.shards) / 3600)
    for shard in four.shards:  # never more GPUs busy than there are
        at = shard.start_at
        assert sum(o.gpus for o in four.shards if o.start_at <= at < o.start_at + o.seconds / 60) <= 4


def test_bad_counts_are_refused(tmp_path):
    prof = profile(tmp_path)
    with pytest.raises(ValueError):
        make_plan(prof, list(prof.scenarios), Planner(prof), gpus=0)


# ------------------------------------------------------------------ selection, text and command line


def test_selection_brings_the_references_its_sd_scenarios_need(tmp_path):
    prof = profile(tmp_path)
    chosen = select(prof, keyword="draft and bs4")
    assert [s.id for s in chosen] == [
        "small-nosd-bs4-gsm8k",
        "small-nosd-bs4-aime",
        "small-draft-k3-bs4-gsm8k",
        "small-draft-k3-bs4-aime",
    ]
    assert {s.id for s in select(prof, marks="ngram and aime")} == {
        "small-nosd-bs1-aime",
        "small-nosd-bs4-aime",
        "small-ngram-k3-bs1-aime",
        "small-ngram-k3-bs4-aime",
    }
    with pytest.raises(ValueError, match="^-k 'and or': "):
        select(prof, keyword="and or")


def test_the_text_names_sources_shards_and_gpu_hours(tmp_path):
    prof = profile(tmp_path, GPU_PROFILE, "unit-gpu.toml")
    plan = make_plan(prof, list(prof.scenarios), Planner(prof), gpus=4)
    text = "\n".join(plan_lines(plan, "the study's hardware (H100)", detail=True))
    assert f"{len(prof.scenarios)} scenarios" in text and "throughput from: study" in text
    assert re.search(r"wall time [\d.]+ min, [\d.]+ GPU-hours busy", text)
    assert "qwen3-8b-nosd-bs16-gsm8k: 163 tokens/sequence (study traces), 1885.0 tok/s (study)" in text


def test_history_recorded_by_a_run_feeds_the_plan(tmp_path):
    """A result recorded into the store keeps its timings, output tokens and sequences for the planner."""
    s = make_scenario(batch_size=4, output_len=32, rounds=5)
    record = make_record(s, hardware_key=HARDWARE)
    record.timings = Timings(engine_start_s=7.5, warmup_s=1.25, measure_s=9.0)
    record.output_hashes = ["h"] * 8  # 2 requests x batch 4
    with History(f"sqlite:///{tmp_path / 'h.sqlite'}") as history:
        history.record("run-1", None, [record])
        [stored] = history.reader().timed_results(HARDWARE)
    assert (stored.engine_start_s, stored.warmup_s, stored.measure_s) == (7.5, 1.25, 9.0)
    assert (stored.rounds, stored.output_tokens, stored.sequences) == (5, 500, 8)
    assert stored.throughput == pytest.approx(100.0)


def run_cli(capsys, *argv):
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--profile", "no-such-profile"], "no-such-profile.toml: no such profile"),
        (["--profile", "h100-nightly", "--gpus", "0"], "--gpus must be at least 1, got 0"),
        (["--profile", "cpu-smoke", "--shards", "0"], "--shards must be at least 1, got 0"),
        (["--profile", "cpu-smoke", "--shards", "1000000000"], "--shards must be at most 4096, got 1000000000"),
        (["--profile", "cpu-smoke", "--gpus", "2"], "--gpus: cpu-smoke is a cpu-tier profile"),
        (["--profile", "cpu-smoke", "-k", "nothing-matches-this"], "no scenario matches the selection"),
        (["--profile", "cpu-smoke", "--history", "/nonexistent/h.sqlite"], "no such database"),
        (["--profile", "cpu-smoke", "--history", "sqlite+pysqlcipher://:KEY@//x/y.db"], ":***@//x/y.db: no such"),
        (["--profile", "cpu-smoke", "--max-shard-hours", "0"], "--max-shard-hours: expected hours above 0"),
        (["--profile", "cpu-smoke", "--max-shard-hours", "1", "--shards", "2"], "give it or --shards, not both"),
        (["--profile", "cpu-smoke", "--arrays"], "--arrays prints the arrays of --max-shard-hours H"),
    ],
)
def test_bad_input_is_one_line(capsys, argv, words):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and not out
    assert err.count("\n") == 1 and err.startswith("specperf: error: ") and words in err


def test_plan_command_on_a_profile_with_history(tmp_path, capsys):
    prof = profile(tmp_path)
    s = scenario(prof, "small-nosd-bs1-gsm8k")
    record = make_record(s, hardware_key=HARDWARE)
    record.timings = Timings(engine_start_s=4.0, warmup_s=1.0, measure_s=5.0)
    record.output_hashes = ["h"] * 2
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    with History(url) as history:
        history.record("run-1", None, [record])
    code, out, _ = run_cli(
        capsys,
        "--profile",
        str(prof.path),
        "--history",
        url,
        "--hardware-key",
        HARDWARE,
        "--shards",
        "2",
        "--scenarios",
    )
    assert code == 0
    assert "hardware cpu-test-2c, 1 results in the history" in out
    assert "small-nosd-bs1-gsm8k: 50 tokens/sequence (history), 100.0 tok/s (history)" in out
    assert out.count("\nshard ") == 2 and "total: 12 scenarios" in out


def test_h100_nightly_header_states_the_planners_figure():
    """The profile's header quotes `specperf plan --profile h100-nightly --gpus 1`; it must stay true."""
    prof = load_profile("h100-nightly")
    header = prof.path.read_text(encoding="utf-8").split("[profile]")[0]
    claimed = re.search(r"([\d.]+) GPU-hours", header)
    assert claimed and "specperf plan --profile h100-nightly" in header
    plan = make_plan(prof, list(prof.scenarios), Planner(prof), gpus=1)
    assert math.isclose(float(claimed.group(1)), round(plan.gpu_hours, 1))


def test_a_cuda_visible_devices_entry_nvml_does_not_list_is_one_line(capsys, monkeypatch):
    from specperf.run.hardware import device

    def mig_unknown():
        raise ValueError("CUDA_VISIBLE_DEVICES: 'MIG-0000' names no MIG device NVML lists (MIG devices: none)")

    monkeypatch.setattr(device, "has_nvidia_gpu", lambda: True)
    monkeypatch.setattr(device, "describe_device", mig_unknown)
    code, out, err = run_cli(capsys, "--profile", "h100-nightly")
    assert code == 2 and not out
    assert (
        err == "specperf: error: CUDA_VISIBLE_DEVICES: 'MIG-0000' names no MIG device NVML lists (MIG devices: none)\n"
    )


def test_a_gpu_plan_starts_each_engine_keys_output_check_engine_once():
    """On a GPU each engine key's outputs are checked on an engine of its own (run/output_check.py),
    shared by the key's served and traced variants; a CPU run checks on its timing rounds."""
    gpu = load_profile("h100-nightly")
    starts = {}
    for engine in make_plan(gpu, list(gpu.scenarios), Planner(gpu), gpus=1).shards[0].engines:
        served = '"mode":"serve"' in engine.engine_key
        starts[(engine.label, served)] = engine.starts
    assert starts[("llama3.1-8b / eagle3-k3", False)] == 2 and starts[("llama3.1-8b / eagle3-k3", True)] == 1
    cpu = load_profile("cpu-smoke")
    for engine in (e for s in make_plan(cpu, list(cpu.scenarios), Planner(cpu)).shards for e in s.engines):
        paired = any(e.scenario.paired_reference and not e.scenario.is_reference for e in engine.scenarios)
        assert engine.starts == (2 if paired else 1), engine.label  # a paired engine starts its no-SD one beside it


def test_arrays_of_a_longest_shard_are_what_their_tasks_run(capsys):
    """study-full on a cluster, shards of at most 6 hours: an array per TP size, its tasks asking for
    that many GPUs; what each task's --shard I/N --max-shard-hours 6 runs is the plan's shard, every
    scenario runs, and each shard keeps within 6 hours unless it holds a piece that alone does not."""
    prof = load_profile("study-full")
    scenarios = list(prof.scenarios)
    plan = make_plan(prof, scenarios, Planner(prof), gpus=64, max_shard_s=6 * 3600)
    arrays = plan.arrays()
    assert sorted(gpus for gpus, _, _, _ in arrays) == sorted({s.model.tp for s in scenarios})
    assert sum(count for _, count, _, _ in arrays) == len(plan.shards)
    ran = set()
    for gpus, count, options, hours in arrays:
        selected = select(prof, None, re.search(r'-m "([^"]+)"', options).group(1))
        assert options.endswith("--max-shard-hours 6") and {s.model.tp for s in selected} == {gpus}
        shards = [p for p in plan.shards if p.selection and p.selection.strip() in options]
        assert len(shards) == count and hours == max(p.seconds for p in shards) / 3600
        parts = sharding.assign(selected, count, 6 * 3600)  # what each task's sharding.shard takes
        for index, (shard, mine) in enumerate(zip(shards, parts), start=1):
            planned = sorted(e.scenario.id for line in shard.engines for e in line.scenarios)
            assert planned == sorted(s.id for s in mine) and shard.gpus == gpus
            assert shard.command.endswith(f"--shard {index}/{count} --max-shard-hours 6")
            ran |= {s.id for s in mine}
    assert ran == {s.id for s in scenarios}
    longest_key = max(
        plan_shard(plan.planner, 0, list(u.scenarios + u.references)).seconds for u in sharding.units(scenarios)
    )
    assert plan.wall_s < longest_key / 3  # uncut, an engine key of the 70B model ran for days on one shard
    code, out, _ = run_cli(capsys, "--profile", "study-full", "--max-shard-hours", "6", "--arrays")
    assert code == 0 and out.splitlines() == [f"{g}\t{c}\t{o}\t{h:.3f}" for g, c, o, h in arrays]
    code, out, _ = run_cli(capsys, "--profile", "study-full", "--gpus", "64", "--max-shard-hours", "6")
    assert (
        code == 0 and f"{arrays[1][1]} tasks, 4 GPUs a task, the longest {arrays[1][3]:.2f} h: pytest tests_perf" in out
    )
    assert re.search(r"\n +1 +1 +[0-9.]+  pytest tests_perf --profile study-full -m .* --shard 1/\d+ --max", out)


def test_a_cpu_array_asks_for_no_gpu(capsys):
    code, out, _ = run_cli(capsys, "--profile", "cpu-smoke", "--max-shard-hours", "0.001", "--arrays")
    ((gpus, count, options, _),) = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and gpus == "0" and int(count) > 1 and options == "--max-shard-hours 0.001"


def test_a_selection_the_gpus_leave_empty_plans_nothing_and_its_tasks_repeat_the_selection(capsys):
    """study-extra on 1 GPU: its 70B and GLM models (TP 4) cannot run, as a run there skips them; the
    TP-1 array's tasks name its models, so that their --shard splits what the plan split; the
    user's -k/-m reach every task, and-ed with the array's models."""
    code, out, _ = run_cli(capsys, "--profile", "study-extra", "-m", "model_llama3_70b", "--gpus", "1")
    assert code == 0 and "not run on 1 GPU(s): 8 scenarios need 4 GPUs" in out
    code, out, _ = run_cli(
        capsys, "--profile", "study-extra", "-m", "model_llama3_70b", "--gpus", "1", "--max-shard-hours", "6"
    )
    assert code == 0 and "arrays, shards of at most 6 h" in out
    code, out, _ = run_cli(capsys, "--profile", "study-extra", "--gpus", "1", "--max-shard-hours", "6", "--arrays")
    ((gpus, _, options, _),) = [line.split("\t") for line in out.splitlines()]
    assert gpus == "1" and options.startswith('-m "model_llama3_1_8b or ')
    code, out, _ = run_cli(
        capsys, "--profile", "study-extra", "-k", "eagle3", "-m", "not gsm8k", "--max-shard-hours", "6", "--arrays"
    )
    options = [line.split("\t")[2] for line in out.splitlines()]
    assert options and all(o.startswith('-k "eagle3" -m "') and "not gsm8k" in o for o in options)
    prof = load_profile("study-extra")
    chosen = select(prof, "eagle3", "not gsm8k")
    for option in options:  # what the tasks select is what the plan split
        models = re.search(r'-m "\(not gsm8k\) and \(([^)]*)\)"', option)
        expression = f"(not gsm8k) and ({models.group(1)})" if models else "not gsm8k"
        assert {s.id for s in select(prof, "eagle3", expression)} <= {s.id for s in chosen}
    code, out, _ = run_cli(capsys, "--profile", "study-extra", "--max-shard-hours", "0.0123456789", "--arrays")
    assert all(line.split("\t")[2].endswith("--max-shard-hours 0.0123456789") for line in out.splitlines())
