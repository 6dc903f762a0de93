"""Effective-config drift: the engine settings whose value differs from the baseline's (vLLM's
defaults move between versions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Drift:
    key: str
    baseline: Any
    current: Any


def config_drift(current: dict | None, baseline: dict | None) -> list[Drift]:
    """Effective-config keys whose value differs from the baseline's (defaults drift across vLLM versions)."""
    if current is None or baseline is None:
        return []
    return [
        Drift(k, baseline.get(k), current.get(k))
        for k in sorted(set(current) | set(baseline))
        if current.get(k) != baseline.get(k)
    ]
