"""Where SD pays: per (model, dataset, method) the largest batch size at which its measured speedup
is above 1.0, and per batch size the fastest method."""

from __future__ import annotations

from dataclasses import dataclass

from ...records import ScenarioResult


def speedup_curves(results: list[ScenarioResult]) -> dict[tuple[str, str, str], dict[int, float]]:
    """(model, dataset, method) -> batch size -> measured speedup, for SD scenarios that have one."""
    curves: dict[tuple[str, str, str], dict[int, float]] = {}
    for r in results:
        speedup = r.value("speedup")
        if not r.scenario.is_reference and speedup is not None and not r.scenario.serves:  # x: batch size
            key = (r.scenario.model.name, r.scenario.dataset, r.scenario.method.label)
            curves.setdefault(key, {})[r.scenario.batch_size] = speedup
    return curves


@dataclass(frozen=True)
class PayLimit:
    """The largest batch size at which a method's speedup is above 1.0 (None: at no size tested)."""

    model: str
    dataset: str
    method: str
    points: dict[int, float]  # batch size -> speedup, ascending
    largest: int | None
    all_pay: bool  # above 1.0 at every size tested
    gap: bool  # at or below 1.0 at some size smaller than `largest`


@dataclass(frozen=True)
class BestMethod:
    model: str
    dataset: str
    batch_size: int
    method: str
    speedup: float
    others: list[tuple[str, float]]  # the other methods, fastest first

    @property
    def pays(self) -> bool:
        return self.speedup > 1.0


@dataclass(frozen=True)
class SdPays:
    limits: list[PayLimit]
    best: list[BestMethod]


def where_sd_pays(results: list[ScenarioResult]) -> SdPays:
    curves = speedup_curves(results)
    limits = []
    for (model, dataset, method), points in sorted(curves.items()):
        points = dict(sorted(points.items()))
        paying = [b for b, s in points.items() if s > 1.0]
        largest = max(paying) if paying else None
        limits.append(
            PayLimit(
                model,
                dataset,
                method,
                points,
                largest,
                bool(paying) and len(paying) == len(points),
                bool(paying) and any(b < largest and s <= 1.0 for b, s in points.items()),
            )
        )
    cells: dict[tuple[str, str, int], list[tuple[float, str]]] = {}
    for (model, dataset, method), points in curves.items():
        for batch_size, speedup in points.items():
            cells.setdefault((model, dataset, batch_size), []).append((speedup, method))
    best = []
    for (model, dataset, batch_size), options in sorted(cells.items()):
        options.sort(key=lambda o: (-o[0], o[1]))
        best.append(
            BestMethod(model, dataset, batch_size, options[0][1], options[0][0], [(m, s) for s, m in options[1:]])
        )
    return SdPays(limits, best)
