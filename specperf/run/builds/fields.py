"""Which engine arguments and speculative-config fields the installed vLLM accepts, read from its source.

A profile's typo (`enforce_eagr`) should fail when the profile loads, not after checkpoint builds and
an engine start.  Importing vLLM takes 10 s and must stay inside the engine process, so the names
are read from vLLM's source files with `ast` (nothing of vLLM runs): the fields of the `EngineArgs`
and `SpeculativeConfig` dataclasses and the keyword parameters of `LLM.__init__`.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from functools import lru_cache
from pathlib import Path

from ...schedule import FIELD as SCHEDULE_FIELD
from ..engines.engine import PINNED_ENGINE_ARGS

# Set by the suite from the scenario (model, tokenizer, seed, TP, SD method): never from engine_args.
SET_BY_THE_SUITE = frozenset(
    {"model", "tokenizer", "tensor_parallel_size", "seed", "speculative_config", *PINNED_ENGINE_ARGS}
)
SPECULATIVE_BY_THE_SUITE = frozenset({"method"})


def _vllm_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _class_fields(path: Path, class_name: str) -> set[str]:
    """Annotated attributes of a class (a dataclass's fields); empty when the file or class is absent."""
    if not path.is_file():
        return set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    return set()


def _init_keywords(path: Path, class_name: str) -> set[str]:
    if not path.is_file():
        return set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args
                    return {a.arg for a in args.args + args.kwonlyargs} - {"self"}
    return set()


# Fields the suite knows from later vLLM releases: what their absence means, rather than a typo's guess.
OF_LATER_RELEASES = {SCHEDULE_FIELD: "dynamic SD needs a release whose SpeculativeConfig has it"}


@lru_cache(maxsize=1)
def engine_arg_names() -> frozenset[str] | None:
    """Keyword arguments `LLM(...)` accepts in the installed vLLM; None when that cannot be known."""
    root = _vllm_dir()
    if root is None:
        return None
    names = _class_fields(root / "engine" / "arg_utils.py", "EngineArgs") | _init_keywords(
        root / "entrypoints" / "llm.py", "LLM"
    )
    return frozenset(names) or None


@lru_cache(maxsize=1)
def speculative_field_names() -> frozenset[str] | None:
    """Fields of the installed vLLM's SpeculativeConfig; None when that cannot be known."""
    root = _vllm_dir()
    if root is None:
        return None
    names = _class_fields(root / "config" / "speculative.py", "SpeculativeConfig") or _class_fields(
        root / "config.py", "SpeculativeConfig"
    )
    return frozenset(names) or None


def problem_with(name: str, known: frozenset[str] | None, set_by_suite: frozenset[str]) -> str | None:
    """Why `name` cannot be given in a profile, or None when it can (or vLLM is not installed here)."""
    if name in set_by_suite:
        return "set by the suite itself; a profile cannot override it"
    if known is None or name in known:
        return None
    if name in OF_LATER_RELEASES:
        return f"not an argument of the installed vLLM: {OF_LATER_RELEASES[name]}"
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"not an argument of the installed vLLM{hint}"
