"""The vLLM fixes (specperf/run/builds/fixes.py) against the installed vLLM: each bug is there
exactly where fixes.wanted says so (a vLLM that fixed it fails here: narrow the range), and the
fix mends it.  Each side runs in a fresh interpreter: the fix patches vLLM's modules."""

import json
import subprocess
import sys

import pytest

from specperf.run.builds import fixes
from specperf.run.builds.versions import installed_vllm

pytestmark = pytest.mark.cpu_tier

# The rejection sampler spreads each request's temperature (a float; 0 is greedy, made 1) and
# top_k (an int) over its draft tokens: requests of 2, 1 and 2 draft tokens.
EXPAND = """
import json, sys, torch
if sys.argv[1] == "fixed":
    from specperf.run.builds import fixes
    fixes.register()
import vllm._custom_ops  # noqa: F401 - vLLM's C++ ops, the CPU stand-ins call them
from vllm.platforms import current_platform
current_platform.register_triton_kernel_overrides()
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens
ends = torch.tensor([2, 3, 5], dtype=torch.int32)
torch.full((5,), float("nan"))  # freed: the output buffer may reuse its memory, never the right values
temperature = expand_batch_to_tokens(torch.tensor([0.8, 0.0, 0.5]), ends, 5, replace_from=0, replace_to=1)
top_k = expand_batch_to_tokens(torch.tensor([5, 0, 3], dtype=torch.int32), ends, 5)
print(json.dumps({"temperature": temperature.tolist(), "top_k": top_k.tolist()}))
"""
RIGHT = {"temperature": [0.8, 0.8, 1.0, 0.5, 0.5], "top_k": [5, 5, 0, 3, 3]}


def expanded(side: str) -> dict:
    done = subprocess.run([sys.executable, "-c", EXPAND, side], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"temperature": [round(t, 6) for t in found["temperature"]], "top_k": found["top_k"]}


def test_the_cpu_expand_bug_is_there_exactly_where_the_fix_is_wanted():
    needed = fixes.CPU_EXPAND in fixes.wanted(*installed_vllm())
    assert (expanded("unfixed") != RIGHT) == needed, f"{installed_vllm()}: fix wanted {needed}"


def test_the_cpu_expand_fix_spreads_each_requests_values():
    assert expanded("fixed") == RIGHT
