"""What a Python environment holds, asked of its interpreter without importing vLLM (which takes 10 s).

The interpreter runs this module (`python -m specperf.run.builds.environments MODULE ...`, or
`... --vllm-facts`): specperf must be installed there anyway, since that environment's engines run
specperf's engine module.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys

from . import methods as vllm_methods
from .arguments import VllmFacts
from .versions import installed_version, installed_vllm

VLLM_FACTS = "--vllm-facts"  # the interpreter prints own_vllm_facts() instead of facts()


class EnvironmentProblem(Exception):
    """The interpreter cannot run, or lacks vLLM or specperf; the message says which, in one line."""


def facts(modules: list[str]) -> dict:
    """This environment: its vLLM distribution and version, specperf's version, and which of `modules` import."""
    distribution, vllm = installed_vllm() or (None, None)
    specperf = installed_version("specperf")
    return {
        "vllm": vllm,
        "distribution": distribution,
        "specperf": str(specperf) if specperf else None,
        "python_version": platform.python_version(),
        "modules": {name: importlib.util.find_spec(name) is not None for name in modules},
    }


def own_vllm_facts() -> dict:
    """This environment's vLLM as vllm_facts() needs it: its version, distribution and EngineArgs'
    names (from its source)."""
    from .fields import engine_arg_names

    installed = installed_vllm()
    distribution, version = installed or (None, None)
    return {"version": version, "distribution": distribution, "engine_args": sorted(engine_arg_names() or ())}


def _ask(python: str, *args: str) -> dict:
    """What `python -m specperf.run.builds.environments ARGS` prints, read as JSON."""
    try:
        done = subprocess.run(
            [python, "-m", "specperf.run.builds.environments", *args], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise EnvironmentProblem(f"{python}: cannot run it ({err})") from None
    last = done.stderr.strip().splitlines()[-1:] or [""]
    if "ModuleNotFoundError" in last[0]:  # specperf, or what it needs, is missing there
        raise EnvironmentProblem(
            f"{python}: specperf does not run in that environment ({last[0]}); pip install -e <this checkout> there"
        )
    if done.returncode != 0:
        raise EnvironmentProblem(f"{python}: exit code {done.returncode}: {last[0]}")
    return json.loads(done.stdout)


def describe(python: str | None = None) -> dict:
    """{python, vllm, distribution, specperf, python_version, modules, methods}: methods maps each SD
    method of the table to None (supported) or the reason it is not, for that environment."""
    python = python or sys.executable
    found = _ask(python, *vllm_methods.extra_modules())
    if found["vllm"] is None:
        raise EnvironmentProblem(f"{python}: vLLM is not installed in that environment")
    methods = vllm_methods.supported_methods(found["vllm"], importable=lambda m: found["modules"].get(m, False))
    return {"python": python, **found, "methods": methods}


def vllm_facts(python: str | None = None) -> VllmFacts:
    """What vllm_arguments needs of the vLLM in the environment of `python` (None: this one), for a
    server started there.  This interpreter reads it itself, another is asked in a subprocess."""
    here = python is None or python == sys.executable
    found = own_vllm_facts() if here else _ask(python, VLLM_FACTS)
    if found["version"] is None:
        raise EnvironmentProblem(f"{python or sys.executable}: vLLM is not installed in that environment")
    return VllmFacts(found["version"], frozenset(found["engine_args"]), distribution=found.get("distribution"))


if __name__ == "__main__":
    print(json.dumps(own_vllm_facts() if sys.argv[1:] == [VLLM_FACTS] else facts(sys.argv[1:])))
