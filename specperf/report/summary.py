"""The JSON summary (summary.json): verdict counts and, per scenario, key metrics and verdicts."""

from __future__ import annotations

import dataclasses

from ..records import SCHEMA_VERSION
from .view import KEY_METRICS, ReportView


def _memory_rows(view: ReportView) -> list[dict]:
    rows = []
    for row in view.memory.rows:
        reference = dataclasses.asdict(row.reference) if row.reference else None
        if reference:
            del reference["method"]
        rows.append(
            {
                "model": row.model,
                "dataset": row.dataset,
                "batch_size": row.batch_size,
                "reference": reference,
                "methods": [dataclasses.asdict(c) for c in row.methods if c],
            }
        )
    return rows


def summary_json(view: ReportView) -> dict:
    header = view.header
    scenarios = []
    for v in view.scenarios:
        r = v.result
        scenarios.append(
            {
                "id": v.id,
                "model": v.model,
                "method": v.method,
                "batch_size": v.batch_size,
                "dataset": v.dataset,
                "verdict": v.status,
                "note": v.note,
                "result_status": r.status,
                "error": r.error or None,
                "metrics": {name: v.value(name) for name in KEY_METRICS},
                "metric_verdicts": [
                    {**s.verdict.to_json(), "baseline_stats": s.baseline_stats, "current_stats": s.current_stats}
                    for s in v.spreads
                ],
                "hint": v.hint or None,
                "attribution": v.attribution.to_json() if v.attribution else None,
                "lossless": r.lossless.to_json() if r.lossless else None,
                "memory": r.memory.to_json() if r.memory else None,
                "gpu_telemetry": r.gpu_telemetry,
                "stand_in": r.workload.stand_in if r.workload else None,
                "source": v.source,
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "run_ids": header.run_ids,
        "run_dirs": [str(d) for d in view.data.run_dirs],
        "profiles": header.profiles,
        "counts": {c.status: c.n for c in header.counts},
        "total": header.total,
        "failed": header.failed,
        "passed": header.failed == 0,
        "vllm": header.vllm,
        "baseline_vllm": header.baseline_vllm,
        "hardware_keys": header.hardware_keys,
        "drivers": header.drivers,
        "clocks": dataclasses.asdict(header.clocks),
        "memory": _memory_rows(view),
        "started_at": header.started,
        "finished_at": header.finished,
        "engine_starts": header.engine_starts,
        "interrupted": header.interrupted,
        "problems": header.problems,
        "scenarios": scenarios,
        "traces": view.traces.to_json(),
        "best_k": [row.to_json() for row in view.best_k],
        "dynamic_sd": [row.to_json() for row in view.dynamic],
    }
