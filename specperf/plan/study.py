"""The study's figures a cost plan can lean on (arXiv 2601.11580): output and prompt lengths per
workload from its released traces, H100 throughputs (figure 3) and SD speedups (figure 1).

Used by plan.py where this machine's history has nothing better; all values are for one H100 80GB.
"""

from __future__ import annotations

import bisect
import functools
import math
import statistics

from ..methods import method_of
from ..profiles.scenarios import Scenario
from ..report.analyses.study_figure import load_reference as _load_reference
from ..report.analyses.study_figure import study_panel, study_series_name

load_reference = functools.cache(_load_reference)  # read once per process

# Mean output tokens per request when outputs stop at EOS or at the cap, for caps 16..8192, and the
# mean prompt tokens (chat template included).  Source: the study's released per-request traces,
# github.com/SpecDecode-Bench/simulator @2fdccbd, data/llama3.1-8B/combined_<dataset>.jsonl
# (Llama-3.1-8B-Instruct, greedy, max 8192 tokens): mean of min(len(generated_token_ids), cap)
# and of len(prompt_token_ids) over 300 (cnn, gsm8k), 500 (instructcoder) and 310 (sharegpt) requests.
CAPS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
OUTPUT_TOKENS = {
    "cnn_dailymail": (16, 32, 64, 128, 238, 322, 323, 323, 323, 323),
    "gsm8k": (16, 32, 64, 122, 163, 166, 166, 166, 166, 166),
    "instructcoder": (16, 32, 62, 109, 155, 179, 189, 201, 221, 262),
    "sharegpt": (16, 31, 62, 122, 235, 420, 583, 643, 675, 728),
}
PROMPT_TOKENS = {"cnn_dailymail": 838, "gsm8k": 94, "instructcoder": 171, "sharegpt": 355}

# Figure 3's panel titles: the workload of each, and the model families it covers.
FIG3_DATASETS = {
    "GSM8K": "gsm8k",
    "CNN/DM": "cnn_dailymail",
    "ShareGPT": "sharegpt",
    "InstructCoder": "instructcoder",
    "AIME22-24": "aime",
    "GPQA-Main": "gpqa",
}
FIG3_FAMILIES = {"Qwen3-8B-Thinking": "qwen3-8b", "GLM-4.5-Air": "glm-4.5-air"}
# Models without panels of their own take Qwen3-8B's, scaled by parameters per GPU (decode reads
# every weight once per step, so a step's time grows with the bytes each GPU holds).
SCALE_FROM = ("qwen3-8b", 8.0)


def expected_output_tokens(dataset: str, output_len: int) -> float | None:
    """Mean output tokens per request capped at output_len (linear between the table's caps); None
    for a workload without a released trace.  Beyond 8192 the traces say nothing more: their mean."""
    row = OUTPUT_TOKENS.get(dataset)
    if row is None:
        return None
    if output_len <= CAPS[0]:
        return float(min(output_len, row[0]))
    if output_len >= CAPS[-1]:
        return float(row[-1])
    i = bisect.bisect_right(CAPS, output_len) - 1
    share = (output_len - CAPS[i]) / (CAPS[i + 1] - CAPS[i])
    return min(float(output_len), row[i] + share * (row[i + 1] - row[i]))


def prompt_tokens(dataset: str | None) -> float | None:
    return PROMPT_TOKENS.get(dataset or "")


def interpolate(points: dict[int, float], batch: int) -> float | None:
    """Log-log interpolation over batch sizes; beyond the ends, the nearest end's value scaled along
    the last segment's slope."""
    if not points:
        return None
    sizes = sorted(points)
    if len(sizes) == 1:
        return points[sizes[0]]
    i = min(max(bisect.bisect_right(sizes, batch) - 1, 0), len(sizes) - 2)
    low, high = sizes[i], sizes[i + 1]
    slope = math.log(points[high] / points[low]) / math.log(high / low)
    return points[low] * math.exp(slope * math.log(batch / low))


def _fig3(family: str, dataset: str) -> list[dict[int, dict[str, float]]]:
    """Figure 3 panels of a family: the dataset's own, else all of the family's."""
    panels = {}
    for title, by_batch in load_reference().get("fig3_throughput_tokens_per_s", {}).items():
        name = title.split(") ", 1)[-1]
        for label, fam in FIG3_FAMILIES.items():
            if fam == family and name.startswith(label + " "):
                panels[FIG3_DATASETS.get(name[len(label) + 1 :])] = {int(b): v for b, v in by_batch.items()}
    return [panels[dataset]] if dataset in panels else list(panels.values())


def _family(scenario: Scenario) -> str | None:
    names = f"{scenario.model.name} {scenario.model.path}".lower()
    return next((fam for fam in FIG3_FAMILIES.values() if fam in names), None)


def _fig3_series(panels, series: str, batch: int) -> float | None:
    values = [interpolate({b: v[series] for b, v in p.items() if series in v}, batch) for p in panels]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def reference_throughput(scenario: Scenario, params_per_gpu_b: float) -> float | None:
    """The study's no-SD output tokens/s on H100 for this model, workload and batch size; a model
    without panels of its own scaled from Qwen3-8B's by its (active) parameters per GPU."""
    family = _family(scenario)
    scale = 1.0
    if family is None or not _fig3(family, scenario.dataset):
        family, scale = SCALE_FROM[0], SCALE_FROM[1] / params_per_gpu_b
    value = _fig3_series(_fig3(family, scenario.dataset), "None", scenario.batch_size)
    return value * scale if value is not None else None


def speedup(scenario: Scenario) -> float | None:
    """The study's speedup for this method: its figure 1 panel (model, workload), else figure 3's
    throughputs of the model's family, else the median over figure 1's panels of the same series."""
    method, k = scenario.method.name, scenario.method.params.get("num_speculative_tokens")
    reference = load_reference()
    figure1 = reference.get("fig1_speedup_vs_batch", {})
    sizes = figure1.get("batch_sizes", [])
    series = study_series_name(method, scenario.method.params)
    panel = study_panel(scenario.model.name, scenario.model.path, scenario.dataset, reference)
    if panel is not None and series in panel[1]:
        return interpolate(dict(zip(sizes, panel[1][series])), scenario.batch_size)
    family, fig3_series = _family(scenario), method_of(method).figure3_series.get(k)
    if family is not None and fig3_series is not None:
        panels = _fig3(family, scenario.dataset)
        sd, none = (
            _fig3_series(panels, fig3_series, scenario.batch_size),
            _fig3_series(panels, "None", scenario.batch_size),
        )
        if sd is not None and none:
            return sd / none
    others = [
        interpolate(dict(zip(sizes, values[series])), scenario.batch_size)
        for values in figure1.get("panels", {}).values()
        if series in values
    ]
    return statistics.median(others) if others else None


def throughput(scenario: Scenario, params_per_gpu_b: float) -> float | None:
    """The study's output tokens/s for the scenario: no-SD, times the method's speedup (1 without one)."""
    base = reference_throughput(scenario, params_per_gpu_b)
    if base is None or scenario.method.is_reference:
        return base
    return base * (speedup(scenario) or 1.0)
