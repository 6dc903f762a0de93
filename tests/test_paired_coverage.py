"""The gate's 95% intervals hold the true change 93-97% of the time, simulated with the measured
variance components (pair noise 7.5%, engine offset 2%, the floor at it) over 1,000 gates of each
design the judge sees, and the floor never narrows one (benchmarks/gate_coverage.py prints the table);
a sequential gate's looks raise no false alarm."""

from __future__ import annotations

import pytest
from scipy import stats

from benchmarks.gate_coverage import DESIGNS, coverage, sequential
from specperf.judge.sequential import boundaries, look_confidence


@pytest.mark.parametrize("design", DESIGNS, ids=[d.mode + ": " + d.name for d in DESIGNS])
def test_the_95_percent_interval_holds_the_true_change_93_to_97_percent_of_the_time(design):
    found = coverage(design, gates=1000, seed=7)
    assert 0.93 <= found.share <= 0.97, f"{found.share:.1%} of 1,000 intervals hold the change"
    assert found.narrowed == 0


def test_a_floor_below_the_true_offset_is_seen_as_too_narrow():
    """The check has teeth: with the floor at a quarter of the true offset and the engine offset
    dominating, the 8 x 6 design's intervals hold the change well under 93% of the time."""
    found = coverage(DESIGNS[0], gates=1000, seed=7, floor=0.01, offset=0.04, noise=0.02)
    assert found.share < 0.93


def test_a_sequential_gates_looks_raise_no_false_alarm():
    """1,000 A/A gates that add a set of two engine pairs at a time, from 2 sets to 6, while they
    cannot decide: with alpha spent over the looks, false regressions stay within the one-sided
    2.5% of a single look; judging every look with a 95% interval more than doubles them."""
    spent = sequential(1000, change=0.0, seed=3)
    naive = sequential(1000, change=0.0, seed=3, naive=True)
    assert spent.verdicts.get("regression", 0) <= 30, spent
    assert (
        naive.verdicts.get("regression", 0) >= 2 * spent.verdicts.get("regression", 0)
        and naive.verdicts["regression"] > 40
    )


def test_the_boundaries_are_the_published_ones():
    """Lan-DeMets O'Brien-Fleming-like spending of a one-sided 2.5% (gsDesign sfLDOF): looks at half,
    three quarters and all of the information, and three equal looks (Jennison and Turnbull)."""
    assert boundaries([0.5, 0.75, 1.0]) == pytest.approx([2.963, 2.359, 2.014], abs=2e-3)
    assert boundaries([1 / 3, 2 / 3, 1.0]) == pytest.approx([3.710, 2.511, 1.993], abs=2e-3)
    assert look_confidence([1.0]) == look_confidence([]) == 0.95
    assert look_confidence([0.5, 0.75, 1.0]) == pytest.approx(1 - 2 * stats.norm.sf(2.014), abs=1e-4)
