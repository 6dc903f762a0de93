"""No side of a paired measurement is favoured by its place in the schedule: counted for every mode
(a gate's engine pairs side by side, in sets, with no-SD references beside them, in blocks; an SD
engine beside its own reference), each side starts, warms up and runs first (in a set, in a pair),
follows its own build and follows itself as often as the other: equally, or by one where the
count is odd (one engine pair has one side that starts first)."""

from __future__ import annotations

from collections import Counter

import pytest

from specperf.run.measurement import Instance, phases

GATE = ["current", "candidate"]
GATE_WITH_REFERENCES = ["current", "candidate", "current no-SD", "candidate no-SD"]
SD_BESIDE_REFERENCE = ["sd", "no-SD"]


def positions(labels: list[str], rounds: int, blocks=None, instances: int = 1, sets: int = 1) -> dict[str, Counter]:
    """Per place, how often each engine (by its label's position in `labels`) takes it."""
    side = {label: labels.index(label) for label in labels}
    counts: dict[str, Counter] = {
        name: Counter()
        for name in ("starts first", "warms up first", "warms up last", "first in a set", "first in a pair")
    }
    counts |= {"after its own build": Counter(), "after itself": Counter()}
    sequence: list[Instance] = []
    clusters_started: set[int] = set()
    for alive, schedule, _ in phases({label: ("scenario", None) for label in labels}, rounds, blocks, instances, sets):
        started = list(alive)
        for engine in started:  # the first engine started of each engine pair
            if engine.cluster not in clusters_started:
                clusters_started.add(engine.cluster)
                counts["starts first"][side[engine.label]] += 1
        if blocks is None:
            counts["warms up first"][side[started[0].label]] += 1
            counts["warms up last"][side[started[-1].label]] += 1
        counts["first in a set"][side[schedule[0].label]] += 1
        sequence += schedule
    for before, engine in zip(sequence, sequence[1:]):
        if before == engine:
            counts["after itself"][side[engine.label]] += 1
        elif side[before.label] % 2 == side[engine.label] % 2:  # labels alternate builds
            counts["after its own build"][side[engine.label]] += 1
    seen: Counter = Counter()
    for engine in sequence:  # pair k: the k-th round of every label
        if seen[engine.label] == min(seen[label] for label in labels):
            if all(seen[label] == seen[engine.label] for label in labels):
                counts["first in a pair"][side[engine.label]] += 1
        seen[engine.label] += 1
    assert all(seen[label] == rounds for label in labels)
    return counts


MODES = {
    "cpu-gate: 2 per side alive, 4 sets, 48 pairs": (GATE, 48, None, 2, 4),
    "tiny cells: 2 per side, 2 sets": (GATE, 48, None, 2, 2),
    "one engine per side": (GATE, 8, None, 1, 1),
    "one per side, 4 sets": (GATE, 48, None, 1, 4),
    "paired_reference gate: 2 sets": (GATE_WITH_REFERENCES, 48, None, 1, 2),
    "paired_reference gate: 2 per side alive, 2 sets": (GATE_WITH_REFERENCES, 48, None, 2, 2),
    "blocks of 2": (GATE, 8, 2, 1, 1),
    "blocks of 3 with references": (GATE_WITH_REFERENCES, 12, 3, 1, 1),
    "SD engine beside its reference": (SD_BESIDE_REFERENCE, 8, None, 1, 1),
    "SD engine beside its reference, 2 sets": (SD_BESIDE_REFERENCE, 16, None, 2, 2),
}


@pytest.mark.parametrize("mode", MODES)
def test_no_side_is_favoured_by_its_place(mode):
    labels = MODES[mode][0]
    counts = positions(*MODES[mode])
    unequal = {
        (place, labels[i]): dict(count)
        for place, count in counts.items()
        for i in range(0, len(labels), 2)
        if abs(count[i] - count[i + 1]) > 1  # the engine against its counterpart of the other build
    }
    assert not unequal, unequal


def test_the_counts_see_a_schedule_that_favours_a_side(monkeypatch):
    """The check has teeth: with the engines of every pair in one order, the current build starts,
    warms up and runs first everywhere."""
    from specperf.run import measurement

    monkeypatch.setattr(measurement, "orders", lambda labels: [labels])
    counts = positions(GATE, 8, None, 2, 2)
    assert counts["first in a pair"] == Counter({0: 8}) and counts["first in a set"] == Counter({0: 2})
    assert counts["starts first"] == Counter({0: 4}) and counts["after itself"] == Counter()
