"""Patching a vLLM module from a vLLM general plugin, once vLLM has imported it.

A plugin that imported vLLM modules itself would change vLLM's import order, which breaks its CPU
worker start; instead the patch runs right after vLLM's own import (or at once, if that happened
already).  Used by the step-timer plugin (vllm_trace/) and the CPU tier's fault plugin.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys


def after_import(name: str, patch) -> None:
    """patch(module) now if vLLM imported `name` already, else right after it does."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, patch))


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, patch):
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            self.patch(module)

        spec.loader.exec_module = exec_module
        return spec
