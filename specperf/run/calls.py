"""The generate() calls of one round of a scenario: its workload's prompts, tokenised and batched."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import checkpoints
from ..profiles import workloads
from ..profiles.scenarios import Scenario
from ..profiles.workloads import Request
from ..records import WorkloadFacts
from .engines.protocol import Batch, Load


@dataclass
class Calls:
    """One round's calls (token-id prompts per call), the request behind each prompt, and the facts."""

    calls: list[list[list[int]]] | list[Batch] | list[Load]  # a sampled call is a Batch, a served round one Load
    requests: list[Request]  # flat, in the order of the calls' prompts
    facts: WorkloadFacts


def batch(scenario: Scenario, requests: list[Request], prompts: list[list[int]]) -> tuple[list, list]:
    """Group prompts into calls of the scenario's batch size.

    "replicate" (the study): each prompt alone, replicated B times in one call.
    "distinct": B different prompts per call, cycling through them when there are too few."""
    b = scenario.batch_size
    if scenario.batching == "replicate":
        return [[ids] * b for ids in prompts], [r for r in requests for _ in range(b)]
    count = -(-len(prompts) // b) * b
    cycled = [i % len(prompts) for i in range(count)]
    calls = [[prompts[i] for i in cycled[s : s + b]] for s in range(0, count, b)]
    return calls, [requests[i] for i in cycled]


def sampled_params(scenario: Scenario, count: int) -> list[dict] | None:
    """A sampled scenario's SamplingParams keywords for each of a round's `count` requests, in order
    (each its own seed); None for a greedy one."""
    sampling = scenario.sampling
    return None if sampling.greedy else [sampling.params(place) for place in range(count)]


def sampled_calls(scenario: Scenario, calls: list[list[list[int]]]) -> list:
    """A sampled scenario's calls as Batches, each prompt with its sampling keywords (its seed that
    of its place in the round); a greedy scenario's as they are."""
    params = sampled_params(scenario, sum(len(call) for call in calls))
    if params is None:
        return calls
    places = iter(params)
    return [Batch(call, [next(places) for _ in call]) for call in calls]


def prompting(scenario: Scenario) -> workloads.Prompting:
    """The scenario's prompt settings: its cell's `chat`, its model's `thinking` switch, its prompt form."""
    thinking = scenario.model.thinking
    return workloads.Prompting(
        chat=scenario.chat,
        template_kwargs=() if thinking is None else (("enable_thinking", thinking),),
        study_form=scenario.prompt_form == "study",
    )


def tokenise(requests: list[Request], tokenizer) -> list[list[int]]:
    return [workloads.prompt_ids(r, tokenizer) for r in requests]


class CallPreparer:
    """Loads each scenario's workload sample and tokenises it with the target's tokenizer (cached)."""

    def __init__(self, dataset_dir: Path | None):
        self.dataset_dir = dataset_dir
        self._tokenizers: dict[str, object] = {}

    def tokenizer(self, scenario: Scenario):
        path = checkpoints.resolve(scenario.model.tokenizer or scenario.model.path)
        if path not in self._tokenizers:
            from transformers import AutoTokenizer

            self._tokenizers[path] = AutoTokenizer.from_pretrained(path)
        return self._tokenizers[path]

    def __call__(self, scenario: Scenario) -> Calls:
        tokenizer = self.tokenizer(scenario)
        sample = workloads.load(
            scenario.dataset,
            scenario.num_requests,
            scenario.seed,
            self.dataset_dir,
            tokenizer=tokenizer,
            selection=scenario.selection,
            prompting=prompting(scenario),
            vllm=scenario.vllm,
        )
        requests = list(sample.requests)
        prompts = tokenise(requests, tokenizer)
        if scenario.serves:  # the round is one load of every prompt (run/serving/served.py)
            params = sampled_params(scenario, len(prompts))
            calls, call_requests = (
                [Load(prompts, scenario.concurrency or 1, scenario.request_rate, scenario.seed, params)],
                requests,
            )
        else:
            calls, call_requests = batch(scenario, requests, prompts)
            calls = sampled_calls(scenario, calls)
        facts = WorkloadFacts(
            source=sample.source,
            checksum=sample.checksum,
            stand_in=sample.stand_in,
            request_ids=[r.id for r in requests],
            prompt_tokens=[len(p) for p in prompts],
            output_len=scenario.output_len,
            selection=sample.selection,
        )
        return Calls(calls, call_requests, facts)
