"""Status words, defined once: of a result (did the scenario run?) and of a verdict (how did it compare?)."""

# A result's status.
OK = "ok"  # measured; judged against its baseline
SKIPPED = "skipped"  # its workload was unavailable; never judged
UNSUPPORTED = "unsupported"  # the candidate vLLM of a gate lacks the scenario's method (also a verdict)
# ERROR (below) also marks a result whose engine or input failed.

# Why a result has status ERROR.
ERROR_TIMEOUT = "timeout"
ERROR_ENGINE = "engine"
ERROR_INPUT = "input"
ERROR_INTERNAL = "internal"  # a fault of the suite itself, caught so the run goes on

# A verdict's status, per metric and per scenario.
PASS = "pass"
REGRESSION = "regression"
SUSPECT = "suspect"  # a speed regression seen once, under the two-strike rule: fails when the next run confirms it
# a gate's speed metric shown neither within its tolerance nor worse than no change: fails the case
# unless --inconclusive warn
INCONCLUSIVE = "inconclusive"
IMPROVEMENT = "improvement"
NO_BASELINE = "no-baseline"
INCOMPATIBLE = "incompatible"
INVALID = "invalid"
ERROR = "error"

# Worst first: a scenario's verdict is the worst of its metrics'.
SEVERITY = (
    ERROR,
    REGRESSION,
    INCONCLUSIVE,
    SUSPECT,
    INVALID,
    INCOMPATIBLE,
    UNSUPPORTED,
    NO_BASELINE,
    IMPROVEMENT,
    PASS,
)
FAILING = (ERROR, REGRESSION)  # and INCONCLUSIVE where the gate says so (Verdict.failed)


def worst(statuses) -> str:
    """The most severe status of an iterable (PASS when it is empty)."""
    return min(statuses, key=SEVERITY.index, default=PASS)
