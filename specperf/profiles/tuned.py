"""A profile that runs `specperf tune`'s schedules back (`specperf tune RUN_DIR --profile-out FILE`).

Per tuned schedule (one model, method and dataset), pairs of cells in one run: the sweep's k again
and the schedule as a dynamic method, both at every measured batch size and at each switch point
and its two neighbours, where a schedule that switches k badly would show.  Measured side by side,
each paired with its no-SD reference, they fill the report's "Dynamic SD against the fixed k"
table without a second run's drift, and a schedule shown slower than the best fixed k fails the
run.  The scenarios keep the settings the sweep was measured with.

An offline sweep's schedule also runs behind the server: at the same sizes as concurrencies (each
round num_requests x the largest size requests, as many as the largest batch held), and under
seeded Poisson arrivals at the largest concurrency, where the running batch changes under load.
Their rate is the no-SD service rate at the measured size nearest the first switch point (the
middle measured size without one): its no-SD throughput over output_len requests per second, so
that by Little's law the batch hovers about that size and crosses the switch.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..analysis.tune import Tuned
from ..judge.metrics import DYNAMIC_VS_BEST_K
from ..methods import K_FIELD
from ..records import ScenarioResult
from ..records.scenario import Scenario
from ..schedule import from_points, k_at, switch_points

# Cell settings copied from a sweep's scenario (profiles/schema.py CellTable).
CELL_SETTINGS = ("num_requests", "output_len", "rounds", "batching", "selection", "prompt_form", "chat", "trace")


def batch_sizes(tuned: Tuned) -> list[int]:
    """The measured batch sizes, and each switch point with its two neighbours."""
    sizes = {row.batch_size for row in tuned.rows}
    for point in switch_points(tuned.schedule):
        sizes |= {point - 1, point, point + 1}
    return sorted(size for size in sizes if size >= 1)


def tuned_profile(name: str, tier: str, tuned: list[Tuned], results: list[ScenarioResult]) -> str:
    """The profile's TOML text; only schedules of one dataset (not a mix) and that pay are run."""
    by_id = {r.id: r.scenario for r in results}
    lines = [
        "# Written by `specperf tune --profile-out`: each tuned schedule as a dynamic method beside its",
        "# sweep's fixed k, at every measured batch size and at each switch point and its neighbours;",
        "# an offline sweep's also behind the server, at those concurrencies and under Poisson arrivals.",
        "",
        "[profile]",
        f"name = {toml_value(name)}",
        f"tier = {toml_value(tier)}",
    ]
    models: dict[str, Scenario] = {}
    methods: dict[str, dict[str, dict[str, Any]]] = {}  # model -> label -> its table
    cells: list[str] = []
    served_sweeps = {(t.model, t.method, t.dataset) for t in tuned if t.rows[0].served}
    for t in tuned:
        source = next((by_id[s.scenario_id] for s in t.rows[0].ks if s.scenario_id in by_id), None)
        if not t.pays or source is None or source.dataset != t.dataset:  # a mix, or no SD to run
            continue
        models.setdefault(source.model.name, source)
        label = f"{t.method}-tuned-{t.dataset}{_series_suffix(t.rows[0])}".replace("_", "-")
        methods.setdefault(source.model.name, {})[label] = t.speculative_config()
        methods[source.model.name][t.method] = {**t.config, K_FIELD: 1}
        ks = sorted({s.k for row in t.rows for s in row.ks if s.k > 0})
        for cell in _loads(t, source, results, serve=(t.model, t.method, t.dataset) not in served_sweeps):
            common = {"model": source.model.name, "datasets": [t.dataset], **cell}
            cells += toml_table("[cells]", {**common, "methods": [t.method], K_FIELD: ks})
            cells += toml_table("[cells]", {**common, "methods": [label]})
    if not cells:
        raise ValueError("no schedule to run: every tuned schedule is of a mix or runs no SD")
    first = next(iter(models.values()))
    lines += [f"{key} = {toml_value(getattr(first, key))}" for key in ("warmup", "seed")]
    # the sweep's profile may show a hand-written schedule without failing on it; a tuned one gates
    lines += [f"informational = {toml_value([m for m in first.informational if m != DYNAMIC_VS_BEST_K])}"]
    for name, scenario in models.items():
        lines += _model_table(scenario)
        for label, table in methods[name].items():
            lines += toml_table(f"models.{_key(name)}.methods.{_key(label)}", table)
    return "\n".join(lines + cells) + "\n"


def _series_suffix(row) -> str:
    """What tells one schedule of a method and dataset from another's in its label: each series
    (served, at a rate, traced, sampled) is tuned on its own, and one label would run only the last."""
    served = "-served" + (f"-r{row.request_rate:g}" if row.request_rate else "") if row.served else ""
    return served + ("-traced" if row.traced else "") + row.sampling


def _loads(tuned: Tuned, source: Scenario, results: list[ScenarioResult], serve: bool = True) -> list[dict[str, Any]]:
    """The settings of each pair of cells: where the sweep ran, and an offline sweep's serve loads
    (`serve`: unless a served sweep of the method and dataset has a schedule of its own to run there)."""
    sizes = batch_sizes(tuned)
    settings = _settings(source)
    if source.serves:
        return [{**settings, "mode": "serve", "concurrencies": sizes, "request_rate": source.request_rate}]
    if not serve:
        return [{**settings, "batch_sizes": sizes}]
    served = {k: v for k, v in settings.items() if k != "trace"} | {
        "mode": "serve",
        "num_requests": source.num_requests * max(row.batch_size for row in tuned.rows),
    }
    loads = [{**settings, "batch_sizes": sizes}, {**served, "concurrencies": sizes}]
    if rate := poisson_rate(tuned, source, results):
        loads.append({**served, "concurrencies": [max(sizes)], "request_rate": rate})
    return loads


def poisson_rate(tuned: Tuned, source: Scenario, results: list[ScenarioResult]) -> float | None:
    """Requests per second of the Poisson cells (the module's rule); None without the no-SD throughput."""
    measured = sorted(row.batch_size for row in tuned.rows)
    points = switch_points(tuned.schedule)
    target = points[0] if points else measured[len(measured) // 2]
    size = k_at(from_points({b: b for b in measured}), target)  # the schedule's own nearest-size rule
    row = next(row for row in tuned.rows if row.batch_size == size)
    reference = next((r for r in results if r.id == row.reference_id and r.ok), None)
    throughput = reference.value("throughput_tok_s") if reference else None
    if not isinstance(throughput, (int, float)) or throughput <= 0:
        return None
    return float(f"{throughput / source.output_len:.3g}")


def _model_table(scenario: Scenario) -> list[str]:
    fields = {"path": scenario.model.path, "tokenizer": scenario.model.tokenizer, "tp": scenario.model.tp}
    fields["thinking"] = scenario.model.thinking
    return toml_table(f"models.{_key(scenario.model.name)}", fields)


def _settings(scenario: Scenario) -> dict[str, Any]:
    """The sweep's cell settings, its sampling among them: a sampled sweep's schedule runs sampled."""
    values = {key: getattr(scenario, key) for key in CELL_SETTINGS}
    values |= {key: getattr(scenario, key) for key in ("engine_args", "env", "tolerances") if getattr(scenario, key)}
    if not scenario.sampling.greedy:
        values["sampling"] = scenario.sampling.to_json()
    return values


def toml_table(header: str, fields: dict[str, Any]) -> list[str]:
    """A TOML table ("[cells]" makes an array entry); None values are left out (TOML has no null)."""
    return ["", f"[{header}]", *(f"{_key(k)} = {toml_value(v)}" for k, v in fields.items() if v is not None)]


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # numbers; strings, whose JSON escapes TOML reads the same
