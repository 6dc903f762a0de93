"""Building a checkpoint folder once: recipes, the cache, the build lock, manifests.

A :class:`Recipe` builds into a temporary folder beside its final one, which is renamed into
place under a file lock, so concurrent processes never see a half-written checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from filelock import FileLock

from .. import paths

#: File written into every built folder: recipe name, version, parameters and file hashes.
MANIFEST_NAME = "specperf-checkpoint.json"
#: A build's temporary folder, `.<folder>.tmp-<start, Unix seconds>-<random>`.
_STARTED = re.compile(r"\..+\.tmp-(\d+)-")


class CheckpointError(Exception):
    """A builtin checkpoint is unknown or cannot be built; the message names it and the cause."""


cache_dir = paths.cache_dir


def verify(folder: str | os.PathLike[str]) -> list[str]:
    """Check a built folder against the file hashes in its manifest; return the problems
    (an empty list when every file is present and unchanged)."""
    folder = pathlib.Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{folder}: unreadable {MANIFEST_NAME}: {exc}"]
    problems = []
    for rel, digest in sorted(manifest.get("files", {}).items()):
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif _sha256(path) != digest:
            problems.append(f"{rel}: sha256 differs from the manifest")
    return problems


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How to build one checkpoint folder.

    ``version`` is bumped by hand whenever ``build`` changes what it writes; ``params`` are the
    recipe's tunables and ``requires`` the recipes whose built folders ``build`` reads: both are
    hashed into :attr:`recipe_version`, so changing either gives a new folder.
    """

    name: str
    version: int
    build: Callable[[pathlib.Path], None]
    description: str
    requires: tuple[Recipe, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()
    #: about how long a build takes on the CPU tier's 2-core VM, where it is long enough to matter
    #: (0: not stated); not hashed.  A run's time left counts it while the cache lacks the folder.
    build_s: float = 0.0

    @property
    def recipe_version(self) -> str:
        """``v<version>-<hash of params and required recipes' versions>``."""
        key = json.dumps(
            {
                "params": [[k, v] for k, v in self.params],
                "requires": {r.name: r.recipe_version for r in self.requires},
            },
            sort_keys=True,
            default=repr,
        )
        return f"v{self.version}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"

    def path(self) -> pathlib.Path:
        return cache_dir() / "checkpoints" / f"{self.name}-{self.recipe_version}"

    def build_s_left(self, now: float | None = None) -> float:
        """About how long building this checkpoint (and the recipes it requires) still takes: 0 once
        it is in the cache; a build under way (its temporary folder names its start) counts what
        is left of `build_s`."""
        final = self.path()
        if final.is_dir():
            return 0.0
        now = time.time() if now is None else now
        started = [
            float(m.group(1)) for t in final.parent.glob(f".{final.name}.tmp-*") if (m := _STARTED.match(t.name))
        ]
        own = max(0.0, self.build_s - (now - max(started))) if started else self.build_s
        return own + math.fsum(r.build_s_left(now) for r in self.requires)

    def __call__(self) -> str:
        return str(ensure(self))


def ensure(recipe: Recipe) -> pathlib.Path:
    """The recipe's folder in the cache, built first (with the recipes it requires) if absent."""
    final = recipe.path()
    if final.is_dir():
        return final
    for dep in recipe.requires:
        try:
            ensure(dep)
        except CheckpointError as exc:
            raise CheckpointError(f"{recipe.name}: {exc}") from exc
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"{recipe.name}: cannot create cache folder {final.parent}: {exc}") from exc
    with FileLock(final.parent / f".{final.name}.lock"):
        if final.is_dir():  # built by another process while we waited
            return final
        # Builders hold the lock, so any temp folder left now is from a dead one.
        for stale in final.parent.glob(f".{final.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-{time.time():.0f}-", dir=final.parent))
        try:
            os.chmod(tmp, 0o755)
            recipe.build(tmp)
            _write_manifest(tmp, recipe)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
        except CheckpointError:
            raise
        except ImportError as exc:
            raise CheckpointError(
                f"{recipe.name}: missing Python package {exc.name or exc} "
                "(building checkpoints needs torch, transformers, safetensors; "
                "smollm2 also gguf)"
            ) from exc
        except Exception as exc:
            raise CheckpointError(f"{recipe.name}: build failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_manifest(folder: pathlib.Path, recipe: Recipe) -> None:
    files = {p.relative_to(folder).as_posix(): _sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}
    manifest = {
        "name": recipe.name,
        "recipe_version": recipe.recipe_version,
        "description": recipe.description,
        "requires": [r.name for r in recipe.requires],
        "params": {k: v for k, v in recipe.params},
        "files": files,
    }
    write_json(folder / MANIFEST_NAME, manifest)


def write_json(path: pathlib.Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run torch on ``n`` threads: float results then do not depend on the caller's thread
    settings, and a build does not thrash cores that other work is using."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def save_tensors(folder: pathlib.Path, tensors: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    tensors = {k: v.detach().contiguous() for k, v in sorted(tensors.items())}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def load_tensors(folder: pathlib.Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))
