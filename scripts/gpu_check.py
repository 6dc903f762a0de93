#!/usr/bin/env python3
"""Checks specperf's GPU code (specperf/run/gpus.py, telemetry.py, nvml.py) on a real GPU box.

Needs no vLLM and no network: python3, psutil and nvidia-ml-py (module pynvml), plus torch if it
is there, to put some load on the GPU while the telemetry sampler runs.

    python3 scripts/gpu_check.py [seconds]

Prints the device description (preflight plus hardware key) as JSON, a ~3 s telemetry summary,
the problems found in it, two requirement checks and the GPUs an xdist worker would get.  Exit
status 0 when NVML described at least one GPU, 1 otherwise.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specperf.run import device as hardware  # noqa: E402
from specperf.run import gpus, telemetry  # noqa: E402


def show(title: str, value) -> None:
    print(f"== {title}")
    print(json.dumps(value, indent=2, default=str), flush=True)


def load(seconds: float) -> str:
    """Matrix multiplications on the first visible GPU for `seconds`, or sleep without torch/CUDA."""
    try:
        import torch
    except ImportError:
        time.sleep(seconds)
        return "idle (torch is not installed)"
    if not torch.cuda.is_available():
        time.sleep(seconds)
        return "idle (torch sees no CUDA device)"
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end, products = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        products += 20
    tflops = products * 2 * 8192**3 / seconds / 1e12
    return f"torch {torch.__version__}: {products} bf16 8192^2 matmuls, ~{tflops:.0f} TFLOP/s"


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    try:
        import pynvml  # noqa: F401
    except ImportError:
        print(
            "nvidia-ml-py is not installed (no module pynvml): pip install nvidia-ml-py; "
            "gpus.preflight() gives None without it."
        )
    started = time.monotonic()
    device = hardware.describe_device()
    show(f"describe_device ({time.monotonic() - started:.2f} s)", device)
    if device["kind"] != "gpu":
        print("no GPU described: no pynvml, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides every GPU")
        return 1

    indices = [g["index"] for g in device["gpus"]]
    with telemetry.TelemetrySampler(indices, interval_s=0.1) as sampler:
        what = load(seconds)
    stop_started = time.monotonic()
    summary = sampler.summary()
    print(f"== load: {what}")
    show(f"telemetry of GPUs {indices} (summary read {time.monotonic() - stop_started:.3f} s after stop)", summary)
    preflight_pids = [p["pid"] for p in device["foreign_processes"]]
    show("telemetry_problems", telemetry.telemetry_problems(summary, preflight_pids))

    show("unmet_requirement(min_class='H100')", gpus.unmet_requirement(device, "H100"))
    show("unmet_requirement(count=4)", gpus.unmet_requirement(device, count=4))
    visible = gpus.visible_gpu_ids()
    show("visible_gpu_ids", visible)
    try:
        show("process_gpus(visible, 1, 'gw1', 2)", gpus.process_gpus(visible, 1, "gw1", 2))
    except ValueError as err:
        show("process_gpus(visible, 1, 'gw1', 2)", f"ValueError: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
