"""Effective-config drift: the engine settings whose value differs from the baseline's (vLLM's
defaults move between versions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...run.gate.sides import config_diff


@dataclass(frozen=True)
class Drift:
    key: str
    baseline: Any
    current: Any


def config_drift(current: dict | None, baseline: dict | None) -> list[Drift]:
    """Effective-config keys whose value differs from the baseline's (defaults drift across vLLM
    versions), found as a gate finds the settings that differ between its builds."""
    if current is None or baseline is None:
        return []
    return [Drift(key, was, now) for key, (was, now) in config_diff(baseline, current).items()]
