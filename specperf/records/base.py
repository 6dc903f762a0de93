"""The base of every record, and the constants records share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ..methods import REFERENCE

SCHEMA_VERSION = 1
NO_SD = REFERENCE.name  # the method name of the no-SD reference scenarios

Number = float | int
# suite_version, git_commit, python, platform, hostname, vllm, vllm_distribution, torch; engine_env
Provenance = dict[str, str | None | dict[str, str]]


class Record(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, strict=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
