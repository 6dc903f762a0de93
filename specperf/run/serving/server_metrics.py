"""A server's SD counters from its Prometheus /metrics endpoint, in the shape the offline engine
reads them (run/engine_process.read_spec_counters), so that one round's acceptance is the difference of
two readings (judge/metrics.counter_delta) in either mode.  Parsed with prometheus_client's own
parser; summed over label sets (engines), per position by the `position` label."""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ..engines.process import SPEC_COUNTERS, SPEC_PER_POSITION

METRICS_TIMEOUT_S = 10.0


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def spec_counters(text: str) -> dict[str, Any]:
    """Cumulative drafts, draft tokens, accepted tokens and accepted tokens per position."""
    totals: dict[str, Any] = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
    per_position: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        counted = [s for s in family.samples if s.name.endswith("_total")]  # not the _created stamps
        if family.name in SPEC_COUNTERS:
            totals[SPEC_COUNTERS[family.name]] += sum(s.value for s in counted)
        elif family.name == SPEC_PER_POSITION:
            for sample in counted:
                position = int(sample.labels["position"])
                per_position[position] = per_position.get(position, 0.0) + sample.value
    totals = {key: _number(value) for key, value in totals.items()}
    size = max(per_position, default=-1) + 1
    totals["accepted_per_pos"] = [_number(per_position.get(i, 0.0)) for i in range(size)]
    return totals


def serves_sd(text: str) -> bool:
    """Whether the server exposes SD counters, that is, runs speculative decoding (a fresh SD server
    counts zero, as a no-SD one would: the families' presence tells them apart)."""
    return any(family.name in SPEC_COUNTERS for family in text_string_to_metric_families(text))


def read_metrics(url: str) -> str:
    """The text of `url`/metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=METRICS_TIMEOUT_S) as reply:
        return reply.read().decode("utf-8")


def read_spec_counters(url: str) -> dict[str, Any]:
    return spec_counters(read_metrics(url))
