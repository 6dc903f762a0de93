"""Judging a result against what is stored for this machine: its baseline and its measured noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..messages import one_line
from ..records import Baseline, BaselineRef, ScenarioResult
from ..status import ERROR, NO_BASELINE
from ..storage import ResultFileError
from .baselines import PORTABLE, baseline_path, load_baseline, speed_mismatch
from .noise import load_noise
from .rules import DEFAULT_RULES, Judgement, Rules
from .verdicts import judge


def baseline_ref(baseline: Baseline) -> BaselineRef:
    """What the report shows of the baseline that judged a result."""
    return BaselineRef.of(
        baseline.metrics,
        vllm=baseline.provenance.get("vllm"),
        recorded_at=baseline.recorded_at,
        effective_config=baseline.effective_config,
        device=baseline.device,
        memory_peak_mib=baseline.memory.peak_mib if baseline.memory else None,
        trace=baseline.trace,
    )


class StoredJudge:
    """Judges results of one hardware key against baselines/<hardware-key>/ (noise file read once)."""

    def __init__(self, baseline_dir: Path, hardware_key: str):
        self.baseline_dir = Path(baseline_dir)
        self.hardware_key = hardware_key
        self._noise: dict[str, Any] | None = None

    def noise(self) -> dict[str, Any]:
        if self._noise is None:
            self._noise = load_noise(self.baseline_dir, self.hardware_key)
        return self._noise

    def __call__(self, result: ScenarioResult, rules: Rules = DEFAULT_RULES) -> Judgement:
        """The verdict by the profile's `rules`, and the baseline that judged it; a corrupt file is an
        error verdict.

        Without a baseline of this hardware, the portable one judges the deterministic metrics; with
        one, the portable one judges those it lacks."""
        baseline, note, source, from_portable, other_speed = None, "", "hardware", set(), None
        try:
            baseline = load_baseline(self.baseline_dir, self.hardware_key, result.id)
            portable = load_baseline(self.baseline_dir, PORTABLE, result.id)
            other_speed = speed_mismatch(baseline.device, result.device) if baseline is not None else None
            if other_speed:  # this machine's speed was never measured: its deterministic metrics are portable
                baseline = None
            if baseline is None:
                baseline, source = portable, PORTABLE
            elif portable is not None:  # a metric the hardware's file lacks never goes unjudged
                from_portable = set(portable.metrics) - set(baseline.metrics)
                metrics = baseline.metrics | {name: portable.metrics[name] for name in from_portable}
                baseline = baseline.model_copy(update={"metrics": metrics})
        except ResultFileError as err:
            note = str(err)
        try:
            noise = self.noise().get(result.id)
        except ResultFileError as err:
            noise, note = None, str(err)
        shown = None
        try:
            verdict = judge(result, baseline, noise, rules)
            shown = baseline_ref(baseline) if baseline is not None else None
        except Exception as err:  # noqa: BLE001 - a result that cannot be judged is an error, not a crash
            where = baseline_path(self.baseline_dir, self.hardware_key, result.id)
            verdict = judge(result, None, rules=rules)
            note = f"{result.id}: cannot be judged against {where}: {one_line(err)}"
        if note:
            verdict.status, verdict.note = ERROR, note
        elif baseline is not None:
            for metric in verdict.metrics:
                by = PORTABLE if metric.metric in from_portable else source
                metric.judged_by = by if metric.baseline is not None else ""
            if source == PORTABLE:
                verdict.note = "; ".join(filter(None, [verdict.note, self.no_speed_baseline(other_speed)]))
        elif verdict.status == NO_BASELINE:
            verdict.note = "; ".join(filter(None, [verdict.note, other_speed, self.no_baseline()]))
        return Judgement(verdict, shown)

    def no_baseline(self) -> str:
        return f"no baseline yet, for {self.hardware_key} or portable: record one with --update-baselines"

    def no_speed_baseline(self, other_speed: str | None = None) -> str:
        """`other_speed`: why this hardware key's speed baseline was set aside (baselines.speed_mismatch)."""
        why = (
            f"{other_speed}, so speed has no baseline here"
            if other_speed
            else f"speed has no baseline on {self.hardware_key} yet"
        )
        return (
            f"acceptance and lossless judged against the portable baseline; {why}: record one with --update-baselines"
        )
