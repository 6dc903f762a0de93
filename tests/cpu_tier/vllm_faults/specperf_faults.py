"""A vLLM general plugin that injects faults into engines, for specperf's CPU-tier tests.

Tests put this folder on PYTHONPATH; vLLM then loads `register` in every engine process
(entry point group `vllm.general_plugins`).  Nothing happens unless SPECPERF_FAULT is set:

    SPECPERF_FAULT="propose_delay_ms=20"      sleep around every n-gram proposal (a slower proposer)
    SPECPERF_FAULT="ngram_window=3:3"         n-gram matching with a smaller window (fewer accepted tokens)
    SPECPERF_FAULT="die_on_generate=eagle3:3" an EAGLE-3 engine kills itself on its 3rd generate()
    SPECPERF_FAULT="hang_on_generate=mtp:2"   an MTP engine's 2nd generate() never returns
    SPECPERF_FAULT="lossy=ngram"              an n-gram engine changes the last token of its first output
    SPECPERF_FAULT="step_slowdown=0.05"       every engine step takes 5% longer (a sleep of 5% of its time)
    SPECPERF_FAULT="step_slowdown=none:0.5"   the same, for the engines of one method only
    SPECPERF_FAULT="step_slowdown=@/tmp/f"    the fraction read from that file at every step, so that
                                              a benchmark can change it between rounds
    SPECPERF_FAULT="draft_wrong=0.1"          an n-gram draft's first token is wrong in 10% of drafts
                                              (seeded): acceptance lower by a known amount
    SPECPERF_FAULT="accept_all=1"             the rejection sampler accepts every draft: a broken
                                              sampler whose outputs no longer follow the target's

Faults combine with commas.  The method "none" names engines without speculative decoding.
"""

import os
import random
import signal
import time

from specperf.run.tracing.after_import import after_import

_calls = 0


def _faults() -> dict:
    spec = os.environ.get("SPECPERF_FAULT", "")
    return dict(item.split("=", 1) for item in spec.split(",") if "=" in item)


def _method(vllm_config) -> str:
    spec = vllm_config.speculative_config
    return spec.method if spec is not None else "none"


def _nth_call(faults: dict, fault: str, method: str) -> int | None:
    """The generate() call on which this fault fires for engines of this method, if it targets them."""
    if fault not in faults:
        return None
    wanted, n = faults[fault].split(":")
    return int(n) if wanted == method else None


def register() -> None:
    faults = _faults()
    if not faults or getattr(register, "done", False):
        return
    register.done = True
    if "propose_delay_ms" in faults or "ngram_window" in faults or "draft_wrong" in faults:
        _patch_ngram(faults)
    if "accept_all" in faults:
        after_import("vllm.v1.sample.rejection_sampler", _accept_every_draft)
    if "die_on_generate" in faults or "hang_on_generate" in faults or "lossy" in faults:
        _patch_generate(faults)
    if "step_slowdown" in faults:
        method, _, fraction = faults["step_slowdown"].rpartition(":")
        after_import("vllm.v1.engine.core", lambda module: _patch_step(module.EngineCore, _fraction(fraction), method))


def _patch_ngram(faults: dict) -> None:
    after_import("vllm.v1.spec_decode.ngram_proposer", lambda module: _patch_proposer(module.NgramProposer, faults))


def _patch_proposer(NgramProposer, faults: dict) -> None:
    init, propose = NgramProposer.__init__, NgramProposer.propose
    delay_s = float(faults.get("propose_delay_ms", 0)) / 1000
    wrong = float(faults.get("draft_wrong", 0))
    draws = random.Random(0)

    def patched_init(self, vllm_config, *args, **kwargs):
        init(self, vllm_config, *args, **kwargs)
        if "ngram_window" in faults:
            self.min_n, self.max_n = (int(n) for n in faults["ngram_window"].split(":"))

    def patched_propose(self, *args, **kwargs):
        if delay_s:
            time.sleep(delay_s)
        drafts = propose(self, *args, **kwargs)
        if wrong:  # the neighbouring token id: the target seldom draws it where it drew the draft
            drafts = [[d[0] ^ 1, *d[1:]] if d and draws.random() < wrong else d for d in drafts]
        return drafts

    NgramProposer.__init__ = patched_init
    NgramProposer.propose = patched_propose


def _accept_every_draft(module) -> None:
    """rejection_sample (looked up by RejectionSampler.forward at each call) replaced by one that
    keeps every draft token and appends the bonus token."""
    import torch

    def accept_all(
        draft_token_ids,
        num_draft_tokens,
        max_spec_len,
        cu_num_draft_tokens,
        draft_probs,
        target_logits,
        bonus_token_ids,
        *args,
        **kwargs,
    ):
        out = torch.full(
            (len(num_draft_tokens), max_spec_len + 1),
            -1,  # vLLM's PLACEHOLDER_TOKEN_ID
            dtype=torch.int32,
            device=bonus_token_ids.device,
        )
        for i, n in enumerate(num_draft_tokens):
            start = int(cu_num_draft_tokens[i]) - n
            out[i, :n] = draft_token_ids[start : start + n]
            out[i, n] = bonus_token_ids[i, 0]
        return out

    module.rejection_sample = accept_all


def _fraction(spec: str):
    """The slowdown's fraction, a number or `@FILE` (read again at each step: a few microseconds)."""
    if not spec.startswith("@"):
        value = float(spec)
        return lambda: value
    fd = os.open(spec[1:], os.O_RDONLY)
    return lambda: float(os.pread(fd, 64, 0) or 0)


def _patch_step(EngineCore, fraction, method: str = "") -> None:
    """Each engine step (of `method`'s engines only, if given) sleeps `fraction()` of the time it
    took: a slower build by a known amount.  EngineCore binds step_fn at construction, after this patch."""
    for name in ("step", "step_with_batch_queue"):
        original = getattr(EngineCore, name, None)
        if original is None:
            continue

        def slowed(self, *args, _original=original, **kwargs):
            t0 = time.perf_counter()
            result = _original(self, *args, **kwargs)
            if not method or _method(self.vllm_config) == method:
                time.sleep((time.perf_counter() - t0) * fraction())
            return result

        setattr(EngineCore, name, slowed)


def _patch_generate(faults: dict) -> None:
    from vllm import LLM

    generate = LLM.generate

    def patched_generate(self, *args, **kwargs):
        global _calls
        method = _method(self.llm_engine.vllm_config)
        _calls += 1
        if _calls == _nth_call(faults, "die_on_generate", method):
            os.kill(os.getpid(), signal.SIGKILL)
        if _calls == _nth_call(faults, "hang_on_generate", method):
            while True:
                time.sleep(60)
        outputs = generate(self, *args, **kwargs)
        if faults.get("lossy") == method and outputs and outputs[0].outputs[0].token_ids:
            completion = outputs[0].outputs[0]
            ids = list(completion.token_ids)
            ids[-1] = ids[-1] + 1 if ids[-1] + 1 < self.llm_engine.model_config.get_vocab_size() else 0
            completion.token_ids = ids
        return outputs

    LLM.generate = patched_generate
