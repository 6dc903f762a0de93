"""Numbers and text as the report shows them; every renderer formats through these."""

from __future__ import annotations

import json
from dataclasses import dataclass

TEXT_LIMIT = 2000  # characters of a prompt or output shown on the page
NONE = "—"


def fmt_num(value, digits: int = 4) -> str:
    """A number to `digits` significant digits, ints as they are, lists element-wise, None as a dash."""
    if value is None:
        return NONE
    if isinstance(value, list):
        return "[" + ", ".join(fmt_num(v, digits) for v in value) + "]"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}g}"


def _or_dash(pattern: str):
    """A formatter of one number by `pattern`, None shown as a dash."""
    return lambda value: NONE if value is None else pattern.format(value)


fmt_change = _or_dash("{:+.1%}")  # a signed relative change: +3.6%
fmt_pct = _or_dash("{:.1%}")
fmt_p = _or_dash("{:.3g}")  # a p-value
fmt_mib = _or_dash("{:.0f} MiB")
fmt_ratio = _or_dash("x{:.2f}")


def fmt_estimate(cell) -> str:
    """What the checkpoints' configs call for beside a measured peak (a report.analyses.memory.MemoryCell):
    "weights 513.1 MiB, KV 45 KiB/token" for no-SD, "draft 270 MiB, KV +6 KiB/token x1.13" for a
    method (the ratio: its KV per token with the target's over the target's), then the note; "" where
    the result has neither."""
    parts = []
    if cell.weights_mib is not None or cell.kv_kib_per_token is not None:
        own, plus = ("weights", "") if cell.method is None else ("draft", "+")
        weights = NONE if cell.weights_mib is None else f"{fmt_num(cell.weights_mib)} MiB"
        kv = NONE if cell.kv_kib_per_token is None else f"{plus}{fmt_num(cell.kv_kib_per_token)} KiB/token"
        parts.append(f"{own} {weights}, KV {kv}" + (f" {fmt_ratio(cell.kv_ratio)}" if cell.kv_ratio else ""))
    if cell.estimate_note:
        parts.append(f"({cell.estimate_note})" if parts else cell.estimate_note)
    return " ".join(parts)


def fmt_spread(median, stats: dict | None) -> str:
    """A median with the spread of its rounds, e.g. "31.2 ±4.1% (n=4)" (spread: coefficient of variation)."""
    text = fmt_num(median)
    if median is None or not stats:
        return text
    if stats.get("cv") is not None:
        text += f" ±{stats['cv']:.1%}"
    return text + f" (n={stats['n']})"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return NONE
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


@dataclass(frozen=True)
class Clipped:
    """Untrusted text cut to TEXT_LIMIT characters for display (escaped later by the template)."""

    text: str
    truncated: bool
    length: int


def clip(text: str) -> Clipped:
    return Clipped(text[:TEXT_LIMIT], len(text) > TEXT_LIMIT, len(text))


def distinct(values) -> list:
    """Values in first-seen order, without repeats, None and empty strings."""
    seen = []
    for value in values:
        if value not in (None, "") and value not in seen:
            seen.append(value)
    return seen
