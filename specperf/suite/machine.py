"""The machine a suite run records with every result: the device, the facts conftest.py hooks add
(hookspecs.py), and with --serve-url the measured server's hardware key instead of this one's."""

from __future__ import annotations

import json

import pytest

from ..options import options


def machine(config) -> dict:
    """This machine as results record it, with the facts conftest.py hooks add (hookspecs.py)."""
    from ..run.hardware.device import describe_device

    device = describe_device()
    facts: dict = {}
    for part in reversed(config.hook.pytest_specperf_machine_facts(config=config)):  # pluggy: last first
        if not isinstance(part, dict):
            raise pytest.UsageError(f"pytest_specperf_machine_facts returned {type(part).__name__}, not a dict")
        facts |= part
    try:
        json.dumps(facts, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise pytest.UsageError(f"pytest_specperf_machine_facts: not JSON: {err}") from None
    if url := options(config).serve_url:  # what is measured is that server, not this machine
        from ..messages import shown_url
        from ..run.serving.remote import hardware_key

        facts = {"serve_url": shown_url(url), "client_hardware_key": device["hardware_key"]} | facts
        device = device | {"hardware_key": hardware_key(url)}
    return device | ({"facts": facts} if facts else {})
