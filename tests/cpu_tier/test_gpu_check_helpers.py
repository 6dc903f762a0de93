"""scripts/gpu_check.py's helpers against what they stand for: vLLM's own start-up memory rule, and
torch's matrix products (the CPU tier's environment has both; the GPU checks themselves need a GPU)."""

import math
from types import SimpleNamespace

import pytest
from test_gpu_check import gpu_check  # noqa: F401 (fixture)

pytestmark = pytest.mark.cpu_tier


def test_vllm_memory_rule_agrees_with_the_installed_vllm(gpu_check):
    from vllm.v1.worker import utils

    total = 81559 * 2**20
    for utilization in (0.9, 0.45):
        for free in (math.ceil(total * utilization) + delta for delta in (-1, 0, 1)):
            snapshot = SimpleNamespace(total_memory=total, free_memory=free, device_="cuda:0")
            try:
                utils.request_memory(snapshot, SimpleNamespace(gpu_memory_utilization=utilization))
                vllm_passes = True
            except ValueError:
                vllm_passes = False
            assert gpu_check.vllm_memory_rule(free, total, utilization)["passes"] == vllm_passes


def test_first_row_drift_compares_each_batchs_first_row_with_m_1(gpu_check):
    import torch

    x = torch.zeros(4, 3)
    x[0] = torch.tensor([1.0, 0.0, 0.0])
    weight = torch.tensor([[0.0, 2.0, 1.5, 0.0], [0.0] * 4, [0.0] * 4])  # first row's logits: 0, 2, 1.5, 0

    def batch_dependent(a, b):  # a kernel whose first row shifts towards logit 2 as the batch grows
        out = a @ b
        out[0, 2] += 0.2 * (a.shape[0] - 1)
        return out

    argmax, gap, rows = gpu_check.first_row_drift(x, weight, range(1, 5), matmul=batch_dependent)
    assert (argmax, gap) == (1, 0.5)
    assert [row["argmax"] for row in rows] == [1, 1, 1, 2]
    assert [row["max_abs_diff"] for row in rows] == pytest.approx([0.0, 0.2, 0.4, 0.6])
    _, _, exact = gpu_check.first_row_drift(x.double(), weight.double(), range(1, 5))
    assert gpu_check.drift_summary(argmax, exact)["verdict"] == "batch_invariant"
