"""Where the suite's files live, known in one place, each with an environment override.

The checkout holds the profiles (fixtures/scenarios/), the committed baselines (baselines/) and
the performance cases (tests_perf/).  It is `$SPECPERF_ROOT` when set; else the folder this package
sits in, when that is a checkout (an editable install, or a run from the source tree); else the
nearest checkout at or above the working directory, so that a package installed normally
(`pip install .`) runs the suite of the checkout it is called from.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_VARIABLE = "SPECPERF_ROOT"
DATASET_DIR_VARIABLE = "SPECPERF_DATASET_DIR"
CACHE_VARIABLE = "SPECPERF_CACHE"
PACKAGE_PARENT = Path(__file__).resolve().parent.parent


def is_checkout(folder: Path) -> bool:
    return (folder / "fixtures" / "scenarios").is_dir() and (folder / "tests_perf").is_dir()


def suite_root() -> Path:
    """The checkout (see the module's docstring); without one, the package's parent folder, so that
    whatever is looked for there is named missing in the error."""
    named = os.environ.get(ROOT_VARIABLE)
    if named:
        return Path(named).expanduser().resolve()
    if is_checkout(PACKAGE_PARENT):
        return PACKAGE_PARENT
    cwd = Path.cwd().resolve()
    return next((folder for folder in (cwd, *cwd.parents) if is_checkout(folder)), PACKAGE_PARENT)


def profile_dir() -> Path:
    return suite_root() / "fixtures" / "scenarios"


def baseline_dir() -> Path:
    """The committed baselines (--baseline-dir overrides)."""
    return suite_root() / "baselines"


def perf_tests() -> Path:
    """The performance cases, tests_perf/."""
    return suite_root() / "tests_perf"


DEFAULT_REPORTS_DIR = "reports"  # run directories, relative to the working directory (--reports-dir)


def dataset_dir() -> Path | None:
    """Where offline workload files are looked for by default: $SPECPERF_DATASET_DIR when set (a
    missing folder is then an error of the set-up, left for the caller to report), else a
    `shared/datasets` folder beside the checkout when there is one, else None (the hub)."""
    named = os.environ.get(DATASET_DIR_VARIABLE)
    if named:
        return Path(named)
    beside = suite_root().parent / "shared" / "datasets"
    return beside if beside.is_dir() else None


def cache_dir() -> Path:
    """Root of specperf's cache (the local checkpoints): $SPECPERF_CACHE, else ~/.cache/specperf."""
    named = os.environ.get(CACHE_VARIABLE)
    if named:
        return Path(named).expanduser().absolute()
    return (Path.home() / ".cache" / "specperf").absolute()
