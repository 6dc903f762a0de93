"""Typed records of what the suite stores: results, verdicts, baselines and run files.

Every module that reads or writes these files uses these models, so a field has one name and one
type everywhere.  pydantic validates a file's shape when it is read (a string where a number
belongs, a missing scenario, a non-finite number), and `storage` turns a failure into one line
naming the file and the field.  Unknown fields are kept, so a newer file survives a round trip.
The JSON layout is schema version 1, unchanged from the untyped records.

Modules: ``base`` (Record and shared constants), ``scenario`` (what is run and stored), ``measured``
(what was measured), ``compared`` (verdicts, the baseline that judged, gates), ``files`` (the files
written: results, baselines, run.json, noise.json).
"""

from .base import NO_SD, SCHEMA_VERSION, Number, Provenance, Record
from .compared import BaselineRef, Gate, MetricVerdict, PairedSamples, Side, Verdict
from .files import Baseline, Figures, NoiseEntry, NoiseFile, RunFile, RunStats, ScenarioResult
from .measured import (
    STEP_BATCH,
    STEP_PARTS,
    VECTOR_METRICS,
    CallTiming,
    Counters,
    Device,
    Lossless,
    Memory,
    Metric,
    OutputCheck,
    RequestAcceptance,
    RequestTrace,
    Round,
    ShownOutput,
    StudyThroughput,
    Timings,
    Trace,
    Validity,
    WorkloadFacts,
    checked_metrics,
)
from .scenario import Method, Model, Sampling, Scenario

__all__ = [
    "Baseline",
    "BaselineRef",
    "Figures",
    "CallTiming",
    "Counters",
    "Device",
    "Gate",
    "PairedSamples",
    "Lossless",
    "OutputCheck",
    "Memory",
    "Method",
    "Metric",
    "MetricVerdict",
    "Model",
    "NO_SD",
    "NoiseEntry",
    "NoiseFile",
    "Number",
    "Provenance",
    "Record",
    "RequestAcceptance",
    "RequestTrace",
    "STEP_BATCH",
    "STEP_PARTS",
    "Round",
    "RunFile",
    "RunStats",
    "SCHEMA_VERSION",
    "Sampling",
    "Scenario",
    "ScenarioResult",
    "ShownOutput",
    "Side",
    "StudyThroughput",
    "Timings",
    "Trace",
    "VECTOR_METRICS",
    "Validity",
    "Verdict",
    "WorkloadFacts",
    "checked_metrics",
]
