"""Typed records of what the suite stores: results, verdicts, baselines and run files.

Every module that reads or writes these files uses these models, so a field has one name and one
type everywhere.  pydantic validates a file's shape when it is read (a string where a number
belongs, a missing scenario, a non-finite number), and `storage` turns a failure into one line
naming the file and the field.  Unknown fields are kept, so a newer file survives a round trip.
The JSON layout is schema version 1, unchanged from the untyped records.

Modules: ``base`` (Record and shared constants), ``measured`` (a scenario and what was measured),
``files`` (verdicts, baselines, gates and the files written).
"""

from .base import Record, SCHEMA_VERSION, NO_SD, Number, Provenance
from .measured import (ModelInfo, MethodInfo, ScenarioInfo, Counters, CallTiming, Round, StudyThroughput,
    Metric, Validity, Lossless, ShownOutput, WorkloadFacts, Memory, Timings, RequestTrace, Trace, Device,
    VECTOR_METRICS, checked_metrics)
from .files import (MetricVerdict, Verdict, BaselineRef, Side, Gate, PairedSamples, ScenarioResult, Baseline, RunStats,
    RunFile, NoiseEntry, NoiseFile)

__all__ = [
    "Baseline",
    "BaselineRef",
    "CallTiming",
    "Counters",
    "Device",
    "Gate",
    "PairedSamples",
    "Lossless",
    "Memory",
    "MethodInfo",
    "Metric",
    "MetricVerdict",
    "ModelInfo",
    "NO_SD",
    "NoiseEntry",
    "NoiseFile",
    "Number",
    "Provenance",
    "Record",
    "RequestTrace",
    "Round",
    "RunFile",
    "RunStats",
    "SCHEMA_VERSION",
    "ScenarioInfo",
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
