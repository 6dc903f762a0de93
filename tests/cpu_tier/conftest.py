"""The CPU tier runs on two pytest-xdist workers, one module per worker at a time (tox -e cpu:
`-n 2 --dist loadfile --no-loadscope-reorder`).  Each engine computes on one thread, so two modules
side by side use both cores.  Modules go out longest first, so that the two workers finish about
together, but for those that judge speed, which wait until the end-to-end module's two-worker
repeat is done; what each costs alone is in docs/methodology/ci.md.
"""

from __future__ import annotations

import pytest

LONGEST_FIRST = (
    "test_end_to_end.py",
    "test_upgrade_gate.py",
    # While the end-to-end module's A/A repeat runs on two pytest-xdist workers (three engines on two
    # cores), the other worker runs modules that judge no speed: test_detection's clean run beside
    # it came out a speedup "improvement" against baselines stored under one engine's load.
    "test_every_method.py",
    "test_faults.py",
    "test_served_schedule.py",
    "test_sampled_engines.py",
    "test_detection.py",
    "test_gate_modes.py",
    "test_server.py",
    "test_distribution_engines.py",
    "test_interrupt.py",
    "test_output_check_rounds.py",
    "test_serve_adaptive.py",
    "test_engine.py",
    "test_live_engine_facts.py",
)


def _rank(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: the tests of a module keep their order
