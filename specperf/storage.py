"""Result records on disk: one versioned JSON file per finished scenario, written the moment it exists.

Layout: reports/<run-id>/results/<scenario-id>.json.  Writes are atomic (temp file, then rename),
so a run killed midway keeps every finished scenario intact.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

from . import __version__

SCHEMA_VERSION = 1
SUITE_ROOT = Path(__file__).resolve().parent.parent


class ResultFileError(Exception):
    """A result or baseline file that cannot be used; the message names the file and the problem."""


def atomic_write_text(path: Path, text: str) -> None:
    """Temp file and rename, so a reader never sees half a file; readable like any new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ResultFileError(f"{path}: cannot read {what}: {err.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultFileError(f"{path}: corrupt {what} (not valid JSON: {err})") from None
    if not isinstance(data, dict):
        raise ResultFileError(f"{path}: corrupt {what} (expected a JSON object)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ResultFileError(f"{path}: {what} has schema version {version!r}; this suite reads version {SCHEMA_VERSION}")
    return data


def new_run_id(profile: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{profile}"


def result_path(run_dir: Path, scenario_id: str) -> Path:
    return Path(run_dir) / "results" / f"{scenario_id}.json"


def write_result(run_dir: Path, record: dict) -> Path:
    path = result_path(run_dir, record["scenario"]["id"])
    atomic_write_json(path, {"schema_version": SCHEMA_VERSION, **record})
    return path


def load_results(run_dir: Path) -> list[dict]:
    """Every result of a run directory, in scenario-id order."""
    folder = Path(run_dir) / "results"
    if not folder.is_dir():
        raise ResultFileError(f"{run_dir}: not a run directory (no results/ folder)")
    return [read_json(path, "result") for path in sorted(folder.glob("*.json"))]


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=SUITE_ROOT, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=SUITE_ROOT,
                           capture_output=True, text=True, timeout=10).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def suite_provenance() -> dict:
    return {
        "suite_version": __version__, "git_commit": git_commit(),
        "python": platform.python_version(), "platform": platform.platform(),
        "hostname": platform.node(),
    }


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
