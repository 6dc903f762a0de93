"""What a Python environment holds, asked of its interpreter without importing vLLM (which takes 10 s).

The interpreter runs this module (`python -m specperf.run.environments MODULE ...`): specperf must
be installed there anyway, since that environment's engines run specperf's engine module.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys

from . import vllm_methods
from .versions import installed_version, installed_vllm


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


def describe(python: str | None = None) -> dict:
    """{python, vllm, distribution, specperf, python_version, modules, methods}: methods maps each SD
    method of the table to None (supported) or the reason it is not, for that environment."""
    python = python or sys.executable
    try:
        done = subprocess.run(
            [python, "-m", "specperf.run.environments", *vllm_methods.extra_modules()],
            capture_output=True,
            text=True,
            timeout=120,
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
    found = json.loads(done.stdout)
    if found["vllm"] is None:
        raise EnvironmentProblem(f"{python}: vLLM is not installed in that environment")
    methods = vllm_methods.supported_methods(found["vllm"], importable=lambda m: found["modules"].get(m, False))
    return {"python": python, **found, "methods": methods}


if __name__ == "__main__":
    print(json.dumps(facts(sys.argv[1:])))
