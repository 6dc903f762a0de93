"""The study's tree against chain: each tree-verifying scenario beside the chain at the same k."""

from __future__ import annotations

from dataclasses import dataclass

from ..methods import method_of
from ..records import ScenarioResult
from ..run.builds.methods import TREE_BACKEND
from ..status import OK


@dataclass(frozen=True)
class TreeVsChain:
    """A tree method's scenario beside the chain method it drafts as, at the same k, model, dataset
    and batch size (the study's comparison); the chain's figures are None where it was not run."""

    model: str
    dataset: str
    batch_size: int
    k: int
    tree: str  # method labels
    chain: str | None
    backend: str | None  # the tree's VLLM_ATTENTION_BACKEND: only TREE_ATTN drafts the tree
    tree_speedup: float | None
    chain_speedup: float | None
    tree_acceptance: float | None  # mean acceptance length
    chain_acceptance: float | None

    @property
    def drafted_as_tree(self) -> bool:
        """Ran under the backend with which vLLM drafts the tree (under any other, a chain of k)."""
        return self.backend == TREE_BACKEND[1]

    @property
    def speedup_ratio(self) -> float | None:
        if self.tree_speedup is None or not self.chain_speedup:
            return None
        return self.tree_speedup / self.chain_speedup


def tree_vs_chain(results: list[ScenarioResult]) -> list[TreeVsChain]:
    """Every finished tree scenario against its chain: speedup and acceptance length of both."""
    done = [r for r in results if r.status == OK and not r.scenario.is_reference and not r.scenario.serves]

    def key(r: ScenarioResult, method: str) -> tuple:
        s = r.scenario
        return (s.model.name, s.dataset, s.batch_size, method, s.method.params.get("num_speculative_tokens"))

    chains = {key(r, r.scenario.method.name): r for r in done}
    rows = []
    for r in done:
        chain_method = method_of(r.scenario.method.name).tree_of
        if chain_method is None:
            continue
        chain = chains.get(key(r, chain_method))
        s = r.scenario
        rows.append(
            TreeVsChain(
                s.model.name,
                s.dataset,
                s.batch_size,
                s.method.params.get("num_speculative_tokens", 0),
                s.method.label,
                chain.scenario.method.label if chain else None,
                (r.provenance.get("engine_env") or {}).get(TREE_BACKEND[0]),
                r.value("speedup"),
                chain.value("speedup") if chain else None,
                r.value("mean_acceptance_length"),
                chain.value("mean_acceptance_length") if chain else None,
            )
        )
    return sorted(rows, key=lambda t: (t.model, t.dataset, t.k, t.batch_size, t.tree))
