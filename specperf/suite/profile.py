"""Which profile a run measures: --profile, a resumed run's, or the default; whether a resumed run may
go on; and whether every name the profile gives vLLM is one the installed vLLM knows."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..options import options
from ..profiles.scenarios import Profile, ProfileError, available_profiles, load_profile, traced
from ..records import RunFile
from ..run.hardware.device import has_nvidia_gpu

PROFILE_KEY = pytest.StashKey[Profile]()

PROFILE_CHANGES_KEY = pytest.StashKey[str | None]()


def default_profile() -> str:
    """h100-nightly on a machine with an NVIDIA GPU, cpu-smoke elsewhere."""
    return "h100-nightly" if has_nvidia_gpu() else "cpu-smoke"


def load_profile_or_fail(name_or_path: str) -> Profile:
    try:
        return load_profile(name_or_path)
    except ProfileError as err:
        raise pytest.UsageError(str(err)) from None


def chosen_profile(config) -> Profile:
    """The profile to run: --profile, else the resumed run's (by name, from fixtures/scenarios/; never
    a path read from the run directory), else the default; a resumed run's profile and --profile must agree."""
    if PROFILE_KEY not in config.stash:
        resume = options(config).resume
        run = resumed_run(Path(resume)) if resume else None
        if run is not None and not options(config).profile and run.profile not in available_profiles():
            raise pytest.UsageError(
                f"--resume {resume}: its profile {run.profile!r} is not one of "
                f"{', '.join(available_profiles())}; name its file with --profile PATH"
            )
        profile = load_profile_or_fail(options(config).profile or (run.profile if run else default_profile()))
        if options(config).sd_trace:
            profile = traced(profile)
        if run is not None and profile.name != run.profile:
            raise pytest.UsageError(
                f"--resume {resume}: that run measured profile {run.profile!r}, not {profile.name!r}"
            )
        check_vllm_names(profile)
        if run is not None:
            check_resumed_hardware(resume, run)
            config.stash[PROFILE_CHANGES_KEY] = profile_changes(run.scenario_hashes, profile)
        config.stash[PROFILE_KEY] = profile
    return config.stash[PROFILE_KEY]


def resumed_run(run_dir: Path) -> RunFile:
    """run.json of the run that --resume continues."""
    from ..storage import ResultFileError, read_record

    # everything the run writes lies in its folder and results/ (servers/, the report, run.json):
    # a link there may point anywhere
    folders = [run_dir, run_dir / "results"]
    for path in sorted(
        p for folder in folders if folder.is_dir() and not folder.is_symlink() for p in folder.iterdir()
    ):
        if path.is_symlink():
            raise pytest.UsageError(f"--resume: {path} is a symbolic link: refusing to write through it")
    try:
        return read_record(run_dir / "run.json", RunFile, "run file")
    except ResultFileError as err:
        raise pytest.UsageError(f"--resume: {err}") from None


def check_vllm_names(profile: Profile) -> None:
    """Every engine argument and method parameter of the profile is one the installed vLLM accepts
    (and not one the suite sets): else a usage error naming the file, the field and the nearest name.
    A method the installed vLLM cannot run is not checked: its scenarios are reported unsupported."""
    import tomllib

    from ..run.builds import methods as vllm_methods
    from ..run.builds.fields import (
        SET_BY_THE_SUITE,
        SPECULATIVE_BY_THE_SUITE,
        engine_arg_names,
        problem_with,
        speculative_field_names,
    )
    from ..run.builds.versions import installed_vllm

    data = tomllib.loads(profile.path.read_text(encoding="utf-8"))
    tables = [("profile.engine_args", data.get("profile", {}).get("engine_args", {}), "engine")]
    tables += [
        (f"cells[{i}].engine_args", cell.get("engine_args", {}), "engine")
        for i, cell in enumerate(data.get("cells", []))
    ]
    tables += [(f"methods.{label}", spec, "method") for label, spec in data.get("methods", {}).items()]
    tables += [
        (f"models.{name}.methods.{label}", spec, "method")
        for name, model in data.get("models", {}).items()
        for label, spec in model.get("methods", {}).items()
    ]
    installed = installed_vllm()
    for where, table, kind in tables:
        if (
            kind == "method"
            and installed
            and vllm_methods.unsupported_reason(table.get("method", ""), None, installed[1], importable=None)
        ):
            continue  # its scenarios are "unsupported" on this vLLM, whatever their fields
        for key in table:
            problem = (
                problem_with(key, engine_arg_names(), SET_BY_THE_SUITE)
                if kind == "engine"
                else None
                if key == "method"
                else problem_with(key, speculative_field_names(), SPECULATIVE_BY_THE_SUITE)
            )
            if problem:
                raise pytest.UsageError(f"{profile.path}: {where}.{key}: {problem}")


def check_resumed_hardware(resume: str, run: RunFile) -> None:
    from ..run.hardware.device import describe_device

    here = describe_device()["hardware_key"]
    if run.device.hardware_key != here:
        raise pytest.UsageError(
            f"--resume {resume}: that run was measured on {run.device.hardware_key}, this machine is {here}"
        )


def profile_changes(recorded: dict[str, str], profile: Profile) -> str | None:
    """What changed in the profile since the resumed run recorded its scenarios (None: nothing)."""
    current = {s.id: s.hash for s in profile.scenarios}
    if not recorded or recorded == current:
        return None
    parts = [
        f"{label}: {', '.join(sorted(ids))}"
        for label, ids in (
            ("changed", {i for i in current.keys() & recorded.keys() if current[i] != recorded[i]}),
            ("added", current.keys() - recorded.keys()),
            ("removed", recorded.keys() - current.keys()),
        )
        if ids
    ]
    return "the profile changed since this run began (changed scenarios are measured again); " + "; ".join(parts)
