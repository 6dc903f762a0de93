"""The upgrade gate's part of the report: the two builds, what each supports, what differs between them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..records import RunFile, ScenarioResult

SIDES = ("current", "candidate")


@dataclass(frozen=True)
class GateView:
    builds: list[dict]  # side, python, vllm, distribution
    capabilities: list[tuple[str, list[str]]]  # method -> per side "supported" or the reason
    config_diff: list[tuple[str, list[str], list[str]]]  # setting, [current, candidate], scenario ids
    drift: list[tuple[str, int, int]]  # scenario id, requests whose output differs, requests
    pairings: list[str] = field(default_factory=list)

    @property
    def versions(self) -> str:
        return " → ".join(f"{b['side']} vLLM {b['vllm']}" for b in self.builds)


def gate_view(runs: list[RunFile], results: list[ScenarioResult]) -> GateView | None:
    """None unless the runs were gates (--candidate)."""
    environments = next((r.environments for r in runs if r.environments), None)
    gated = [r for r in results if r.gate is not None]
    if environments is None and not gated:
        return None
    environments = environments or {}
    builds = [
        {"side": side, **{k: environments[side].get(k) for k in ("python", "vllm", "distribution")}}
        for side in SIDES
        if side in environments
    ]
    methods = sorted({m for e in environments.values() for m in e.get("methods", {})})
    capabilities = [
        (m, [environments[s]["methods"].get(m) or "supported" for s in SIDES if s in environments]) for m in methods
    ]
    diffs: dict[tuple[str, str, str], list[str]] = {}
    for r in gated:
        for setting, (current, candidate) in r.gate.config_diff.items():
            diffs.setdefault((setting, str(current), str(candidate)), []).append(r.id)
    return GateView(
        builds=builds,
        capabilities=capabilities,
        config_diff=[(setting, [a, b], ids) for (setting, a, b), ids in sorted(diffs.items())],
        drift=[(r.id, r.gate.output_drift, len(r.output_hashes or [])) for r in gated if r.gate.output_drift],
        pairings=sorted({r.gate.pairing for r in gated}),
    )
