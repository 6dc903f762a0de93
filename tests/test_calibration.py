"""The CPU calibration counts the process's own CPU time, so that waiting for a busy core does not
pass for a slower machine (docs/methodology/main-job.md)."""

from __future__ import annotations

import time

from specperf.run.hardware import calibration


def test_time_spent_off_the_cpu_does_not_count(monkeypatch):
    monkeypatch.setattr(calibration, "REPEATS", 3)
    monkeypatch.setattr(calibration, "_workload", lambda: time.sleep(0.05))  # descheduled, as under load
    assert calibration.best_cpu_s() < 0.01


def test_every_core_is_timed_at_once_and_once_per_process():
    calibration.calibration_s.cache_clear()
    first = calibration.calibration_s()
    alone = calibration.best_cpu_s()
    assert first > 0 and calibration.calibration_s() == first
    assert 0.5 < first / alone < 2  # the same workload, in processes of its own
