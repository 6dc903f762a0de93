"""A draft model run by specperf itself (transformers, greedy), in the engine process.

Two uses: the adaptive proposer's drafts (adaptive_proposer.py), and what a draft model would
accept at every output position of a finished request (the headroom simulator's input, as
analysis/ngram.py gives it for n-gram).  At greedy decoding the second needs one teacher-forced pass:
while a draft agrees with the output, its context is the output's, so its next prediction is the
teacher-forced one at the next position.
"""

from __future__ import annotations

import numpy as np


class DraftLM:
    """A causal LM checkpoint with a key-value cache per batch row, reused where the row's tokens
    still start with what the cache holds (rows are matched by content, not by request)."""

    def __init__(self, path: str, dtype=None, device: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32).to(self.device).eval()
        self._rows: dict[int, tuple[np.ndarray, object]] = {}  # row -> (tokens cached, cache)

    def _forward(self, tokens, cache):
        ids = self.torch.as_tensor(np.asarray(tokens, dtype=np.int64)[None, :], device=self.device)
        return self.model(input_ids=ids, past_key_values=cache, use_cache=cache is not None).logits[0]

    def propose(self, row: int, context: np.ndarray, k: int) -> list[int]:
        """The draft's k greedy tokens after `context` (the whole sequence so far of batch row `row`)."""
        from transformers import DynamicCache

        cached, cache = self._rows.get(row, (context[:0], None))
        same = min(len(cached), len(context) - 1)
        differ = np.flatnonzero(cached[:same] != context[:same])
        keep = int(differ[0]) if differ.size else same
        if cache is None or keep == 0:
            cache, keep = DynamicCache(), 0
        elif len(cached) > keep:
            cache.crop(keep - len(cached))  # drop the tokens past `keep` (a negative length)
        with self.torch.inference_mode():
            logits = self._forward(context[keep:], cache)
            drafts = [int(logits[-1].argmax())]
            for _ in range(k - 1):
                drafts.append(int(self._forward(drafts[-1:], cache)[-1].argmax()))
        self._rows[row] = (np.concatenate([context, np.asarray(drafts[:-1], dtype=context.dtype)]), cache)
        return drafts

    def predictions(self, tokens: list[int]) -> np.ndarray:
        """Teacher-forced: at each position, the draft's greedy next token."""
        with self.torch.inference_mode():
            return self._forward(tokens, None).argmax(-1).cpu().numpy()

    def acceptance_lengths(self, prompt: list[int], output: list[int], max_draft: int) -> list[int]:
        """For each output position p (p tokens generated), the tokens a step starting there would
        produce with drafts of up to `max_draft` tokens: accepted drafts + 1 (analysis/ngram.py's form)."""
        tokens = list(prompt) + list(output)
        agrees = self.predictions(tokens)[:-1] == np.asarray(tokens[1:])  # prediction at j is token j+1
        lengths = []
        for p in range(1, len(output) + 1):
            run = agrees[len(prompt) + p - 1 : len(prompt) + p - 1 + max_draft]
            misses = np.flatnonzero(~run)
            lengths.append(1 + int(misses[0] if misses.size else len(run)))
        return lengths
