"""k sweeps: a cell's `num_speculative_tokens` list runs each of its methods once per k, each k a
method of its own whose label's -kN names it (docs/tuning.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..methods import K_FIELD, label_with_k
from ..records.scenario import Method
from ..schedule import FIELD as SCHEDULE_FIELD

FIXING_K = ("speculative_token_tree", SCHEDULE_FIELD)  # method parameters that set k themselves


def sweep_problem(ks: list[int], methods: Mapping[str, Mapping[str, Any]]) -> tuple[tuple[str | int, ...], str] | None:
    """(where, what) is wrong with sweeping `ks` over `methods` (label -> its parameters, in the
    cell's order), or None: each k once, and no method whose k is fixed by a tree or a schedule."""
    if len(set(ks)) != len(ks):
        return ("num_speculative_tokens",), f"each k once, got {ks}"
    for j, (label, params) in enumerate(methods.items()):
        fixed = [name for name in FIXING_K if name in params]
        if fixed:
            return ("methods", j), f"method {label!r} sets its k by {fixed[0]}: a sweep cannot vary it"
    return None


def with_k(method: Method, k: int) -> Method:
    """The method drafting `k` tokens, its label's -kN saying so."""
    return method.model_copy(update={"label": label_with_k(method.label, k), "params": {**method.params, K_FIELD: k}})
