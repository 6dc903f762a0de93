"""Which pytest runs are the suite's, which process of one this is (an xdist worker or not), and the
run id that all of its processes write under."""

from __future__ import annotations

from pathlib import Path

import pytest

from .. import paths
from ..options import options
from .profile import chosen_profile

RUN_ID_KEY = pytest.StashKey[str]()


def is_suite_run(config) -> bool:
    """Whether this pytest run is the suite's: --profile or --resume given, or a path argument at or
    inside tests_perf/ (or above it, as `pytest .` in the checkout)."""
    if options(config).profile or options(config).resume:
        return True
    suite_tests = paths.perf_tests().resolve()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == suite_tests or suite_tests in path.parents or path in suite_tests.parents:
            return True
    return False


def worker_input(config) -> dict | None:
    """The pytest-xdist worker input of this process, or None in the controller or without xdist."""
    return getattr(config, "workerinput", None)


def run_id(config) -> str:
    """One run id per run: xdist workers take the controller's, so all write one run directory."""
    if RUN_ID_KEY not in config.stash:
        from ..storage import new_run_id

        worker = worker_input(config)
        if worker is not None and "specperf_run_id" in worker:
            config.stash[RUN_ID_KEY] = worker["specperf_run_id"]
        elif options(config).run_dir is not None:
            config.stash[RUN_ID_KEY] = options(config).run_dir.name
        else:
            shard = options(config).shard
            suffix = "-shard{}of{}".format(*shard.split("/")) if shard else ""
            config.stash[RUN_ID_KEY] = new_run_id(chosen_profile(config).name + suffix)
    return config.stash[RUN_ID_KEY]
