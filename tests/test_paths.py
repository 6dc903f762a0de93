"""Where the suite finds its files (specperf/paths.py): the checkout an editable install sits in,
$SPECPERF_ROOT, or, for a package installed normally, the checkout it is called from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from specperf import paths

CHECKOUT = Path(__file__).resolve().parent.parent


def test_an_editable_install_finds_its_own_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv(paths.ROOT_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)  # wherever it is called from
    assert paths.suite_root() == CHECKOUT
    assert paths.profile_dir() == CHECKOUT / "fixtures" / "scenarios"
    assert paths.baseline_dir() == CHECKOUT / "baselines" and paths.perf_tests() == CHECKOUT / "tests_perf"


def test_an_installed_package_finds_the_checkout_it_is_called_from(monkeypatch, tmp_path):
    monkeypatch.delenv(paths.ROOT_VARIABLE, raising=False)
    monkeypatch.setattr(paths, "PACKAGE_PARENT", tmp_path / "site-packages")
    monkeypatch.chdir(CHECKOUT / "docs")
    assert paths.suite_root() == CHECKOUT
    monkeypatch.chdir(tmp_path)
    assert paths.suite_root() == tmp_path / "site-packages"  # none: what is missing gets named there


def test_the_environment_overrides_every_place(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.ROOT_VARIABLE, str(tmp_path))
    monkeypatch.setenv(paths.DATASET_DIR_VARIABLE, str(tmp_path / "data"))
    monkeypatch.setenv(paths.CACHE_VARIABLE, str(tmp_path / "cache"))
    assert paths.profile_dir() == tmp_path / "fixtures" / "scenarios"
    assert paths.dataset_dir() == tmp_path / "data" and paths.cache_dir() == tmp_path / "cache"


def test_a_plain_pip_install_runs_the_suite_of_the_checkout(tmp_path):
    """`pip install .` (not editable): the installed copy, not the checkout's, collects the checkout's
    scenarios and finds its profiles and baselines."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(CHECKOUT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop(paths.ROOT_VARIABLE, None)
    # -P: the working directory (the checkout, with its own copy of the package) is not on the path
    where = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "import specperf.plugin, specperf.paths as p; print(specperf.plugin.__file__); print(p.profile_dir())",
        ],
        cwd=CHECKOUT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where == [str(target / "specperf" / "plugin.py"), str(CHECKOUT / "fixtures" / "scenarios")]
    listed = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "tests_perf",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "--profile",
            "cpu-smoke",
        ],
        cwd=CHECKOUT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    from specperf.profiles.scenarios import load_profile

    expected = len(load_profile("cpu-smoke").scenarios)
    assert sum("::test_scenario[" in line for line in listed.stdout.splitlines()) == expected
