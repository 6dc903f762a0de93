"""Each scenario's outcome, read from the test reports (in the xdist controller too), and why a run
that failed no case must still fail: it measured nothing, or judged nothing."""

from __future__ import annotations

from ..status import INVALID
from .scope import worker_input
from .selection import SCENARIO_PROPERTY, VERDICT_PROPERTY

SKIPPED = "skipped"


class ScenarioOutcomes:
    """Each scenario's outcome, from the test reports (in the xdist controller too): skipped, or
    measured with its verdict."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        properties = dict(report.user_properties)
        if SCENARIO_PROPERTY not in properties:
            return
        if report.skipped:
            self.outcomes[report.nodeid] = SKIPPED
        elif report.when == "call":
            self.outcomes.setdefault(report.nodeid, properties.get(VERDICT_PROPERTY, "measured"))

    def why_nothing_counts(self) -> str | None:
        """Why a run that failed no case must still fail: it measured nothing, or judged nothing
        (every measurement invalid: a shared or throttled GPU, say); None when something counts."""
        measured = [outcome for outcome in self.outcomes.values() if outcome != SKIPPED]
        if self.outcomes and not measured:
            return "every scenario was skipped: this run measured nothing, so it fails"
        if measured and all(outcome == INVALID for outcome in measured):
            return f"no scenario was judged: all {len(measured)} measurements were invalid, so this run fails"
        return None


def why_nothing_counts(session, outcomes: ScenarioOutcomes) -> str | None:
    """In the process that closes the run (not an xdist worker): ScenarioOutcomes.why_nothing_counts."""
    return None if worker_input(session.config) is not None else outcomes.why_nothing_counts()
