"""run.json's companions: one run file from those of several pytest-xdist workers, and the lines
that sum a run up in the terminal."""

from __future__ import annotations

from collections import Counter

from ..records import RunFile, RunStats, ScenarioResult
from ..status import IMPROVEMENT, PASS, SEVERITY
from ..storage import now_iso


def merge_run_files(parts: list[RunFile]) -> RunFile:
    """One run.json from those of several pytest-xdist workers that wrote into one run directory."""
    totals = {key: sum(getattr(p.stats, key) for p in parts) for key in RunStats.model_fields}
    totals["wall_s"] = max(p.stats.wall_s for p in parts)  # the workers ran side by side
    return parts[0].model_copy(
        update=dict(
            started_at=min(p.started_at for p in parts),
            finished_at=now_iso(),
            interrupted=any(p.interrupted for p in parts),
            stats=RunStats(**totals),
            workers=len(parts),
            engine_keys=sorted({key for p in parts for key in p.engine_keys}),
        )
    )


WORST_SHOWN = 5  # scenarios named in the closing lines; the report has them all


def summary_lines(run: RunFile, results: list[ScenarioResult] = ()) -> list[str]:
    """The run in a few lines: its counts and time, how many scenarios ended in each verdict, and
    the worst of them (worst first) with their reason."""
    s = run.stats
    lines = [
        f"specperf run {run.run_id}: {s.scenarios} scenarios ({s.resumed} resumed), "
        f"{s.errors} errors, {s.engine_starts} engine starts for {len(run.engine_keys)} engine keys",
        f"time: engine start {s.engine_start_s:.1f} s, warm-up {s.warmup_s:.1f} s, "
        f"measurement {s.measure_s:.1f} s, total {s.wall_s:.1f} s"
        + (f" (checkpoint downloads {s.checkpoint_fetch_s:.1f} s)" if s.checkpoint_fetch_s else ""),
    ]
    judged = [r for r in results if r.verdict is not None]
    if judged:
        counts = Counter(r.verdict.status for r in judged)
        lines.append("verdicts: " + ", ".join(f"{counts[status]} {status}" for status in SEVERITY if counts[status]))
        bad = sorted((r for r in judged if r.verdict.status not in (PASS, IMPROVEMENT)), key=_severity)
        for r in bad[:WORST_SHOWN]:
            lines.append(f"  {r.verdict.status}: {r.id}" + (f": {r.verdict.note}" if r.verdict.note else ""))
        if len(bad) > WORST_SHOWN:
            lines.append(f"  ... and {len(bad) - WORST_SHOWN} more (the report lists them all)")
    improved = [r.id for r in judged if r.verdict.status == IMPROVEMENT]
    if improved:
        lines.append(
            f"{len(improved)} improved: consider refreshing their baselines (--update-baselines): "
            + ", ".join(improved)
        )
    return lines


def _severity(result: ScenarioResult) -> tuple[int, str]:
    return SEVERITY.index(result.verdict.status) if result.verdict else len(SEVERITY), result.id
