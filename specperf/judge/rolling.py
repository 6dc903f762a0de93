"""Judging against history instead of committed baselines (asv's way): each metric against the
median of its values in the last N valid runs of the scenario on this hardware.

The baseline's samples are those runs' medians, so the significance test weighs the run-to-run
spread the history shows.  With `two_strike`, a speed regression fails only when the run before it
already saw one: the first time it is "suspect" (shown, not failing), and the next run confirms it.
"""

from __future__ import annotations

import statistics

from ..history.queries import Reader, Series
from ..messages import one_line
from ..records import Baseline, Metric, ScenarioResult, Verdict
from ..status import ERROR, REGRESSION, SUSPECT
from .rules import DEFAULT_RULES, Judgement, Rules
from .verdicts import judge, scenario_verdict, spec_for

MIN_RUNS = 3  # fewer runs in history: no rolling baseline yet
JUDGED_BY = "history"


class RollingJudge:
    """Judges the results of one run (`run_id`, hardware key) against the history `reader` reads."""

    def __init__(self, reader: Reader, hardware_key: str, runs: int, run_id: str, two_strike: bool = False):
        self.reader, self.hardware_key, self.runs = reader, hardware_key, runs
        self.run_id, self.two_strike = run_id, two_strike

    def _series(self, result: ScenarioResult, metric: str) -> Series:
        return self.reader.series(
            result.id,
            metric,
            self.hardware_key,
            last=self.runs,
            scenario_hash=result.scenario.hash,
            before_run=self.run_id,
        )

    def baseline(self, result: ScenarioResult) -> tuple[Baseline | None, dict[str, str | None]]:
        """The rolling baseline (None: fewer than MIN_RUNS runs), and each metric's verdict in the
        latest of those runs (what the two-strike rule looks at)."""
        metrics: dict[str, Metric] = {}
        previous: dict[str, str | None] = {}
        counts: list[int] = []
        for name, metric in result.metrics.items():
            samples: list[float | list[float] | None]
            value: float | list[float] | None
            if isinstance(metric.value, list):  # per position: one series each, joined by run
                positions = [self._series(result, f"{name}[{i}]") for i in range(len(metric.value))]
                runs = [p.run_id for p in positions[0].points] if positions else []
                by_run = [{p.run_id: p.value for p in s.points} for s in positions]
                rows = [[values[run] for values in by_run] for run in runs if all(run in v for v in by_run)]
                samples = list(rows)
                value = [statistics.median(column) for column in zip(*rows)] if rows else None
            else:
                series = self._series(result, name)
                points = [p.value for p in series.points]
                samples = list(points)
                value = statistics.median(points) if points else None
                if series.points:
                    previous[name] = series.points[-1].verdict
            counts.append(len(samples))
            if samples:
                metrics[name] = Metric(value=value, samples=samples)
        if not counts or max(counts) < MIN_RUNS:
            return None, previous
        return Baseline(
            scenario_id=result.id, scenario_hash=result.scenario.hash, hardware_key=self.hardware_key, metrics=metrics
        ), previous

    def __call__(self, result: ScenarioResult, rules: Rules = DEFAULT_RULES) -> Judgement:
        """The verdict by the profile's `rules`."""
        try:
            baseline, previous = self.baseline(result) if result.ok else (None, {})
            verdict = judge(result, baseline, rules=rules)
        except Exception as err:  # noqa: BLE001 - the history failing is an error verdict, not a crash
            verdict = judge(result, None, rules=rules)
            verdict.status, verdict.note = ERROR, f"{result.id}: cannot be judged against the history: {one_line(err)}"
            return Judgement(verdict)
        if baseline is None and result.ok:
            verdict.note = "; ".join(
                filter(
                    None,
                    [
                        verdict.note,
                        f"the history holds fewer than {MIN_RUNS} valid runs of this scenario on {self.hardware_key}",
                    ],
                )
            )
        for metric in verdict.metrics:
            metric.judged_by = JUDGED_BY if metric.baseline is not None else ""
        if self.two_strike:
            verdict = self._strikes(result, verdict, previous, rules)
        return Judgement(verdict)

    def _strikes(
        self, result: ScenarioResult, verdict: Verdict, previous: dict[str, str | None], rules: Rules
    ) -> Verdict:
        """A speed regression the run before did not see becomes suspect."""
        for metric in verdict.metrics:
            if (
                metric.status == REGRESSION
                and not spec_for(metric.metric).deterministic
                and previous.get(metric.metric) not in (REGRESSION, SUSPECT)
            ):
                metric.status = SUSPECT
                metric.note = "; ".join(filter(None, [metric.note, "first strike: fails if the next run confirms it"]))
        return scenario_verdict(result, verdict.metrics, True, rules) if verdict.status == REGRESSION else verdict
