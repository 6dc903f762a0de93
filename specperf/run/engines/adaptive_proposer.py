"""The adaptive proposer: per request and step, n-gram where the context has a match, else a draft model.

The study's combined oracle picks, per step, the better of n-gram and a learned method; this is a
real proposer that picks without knowing the future: n-gram's draft costs nothing and is often long
on code editing, so it is taken whenever the context offers one, and the draft model fills the
steps where it does not.  It runs through vLLM's extension point for custom proposers
(speculative_config method "custom_class", vLLM 0.22 and later: vLLM imports the class named by
`model`, builds it with the VllmConfig, calls `load_model` and then `propose` every step).  Profiles
name it method "adaptive" with an n-gram window and a draft model; run/builds/methods.py maps that to
vLLM's config, the options travelling in `additional_config[PROPOSER_OPTIONS_KEY]`.  vLLM verifies its
drafts as any other's, so it is lossless like them.
"""

from __future__ import annotations

from ...analysis import ngram
from ..builds.methods import PROPOSER_OPTIONS_KEY
from .draft_lm import DraftLM


class AdaptiveProposer:
    def __init__(self, vllm_config):
        options = (vllm_config.additional_config or {})[PROPOSER_OPTIONS_KEY]
        self.k = vllm_config.speculative_config.num_speculative_tokens
        self.window = (int(options["prompt_lookup_min"]), int(options["prompt_lookup_max"]))
        self.draft_path = options["model"]
        self.dtype = vllm_config.model_config.dtype
        self.max_model_len = vllm_config.model_config.max_model_len
        self.draft: DraftLM | None = None
        self.chosen = {"lookup": 0, "draft": 0}  # proposals made by n-gram lookup and by the draft model

    def load_model(self, *args, **kwargs) -> None:
        self.draft = DraftLM(self.draft_path, self.dtype)

    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu, *args, **kwargs) -> list[list[int]]:
        """A draft per batch row; none for a row still in prefill (nothing sampled) or at max_model_len,
        as vLLM's n-gram proposer does."""
        drafts = []
        for row, sampled in enumerate(sampled_token_ids):
            total = int(num_tokens_no_spec[row])
            k = min(self.k, self.max_model_len - total)
            if not len(sampled) or k <= 0:
                drafts.append([])
                continue
            context = token_ids_cpu[row, :total]
            proposal = ngram.proposal(context, *self.window, k)
            if len(proposal):
                self.chosen["lookup"] += 1
                drafts.append([int(t) for t in proposal])
            else:
                self.chosen["draft"] += 1
                drafts.append(self.draft.propose(row, context, k))
        return drafts
