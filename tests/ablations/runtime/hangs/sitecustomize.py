"""Plants a hang in a real `ablate` process, for tests/ablations/runtime/test_stop_bound.py: put this folder on
PYTHONPATH and name the hang in ABLATE_PLANT_HANG. Python imports `sitecustomize` at start-up, so every process of a
command (a sweep's workers too) gets it; the hang is patched into the module once that module has been imported.

- `step:N`: the Nth training step waits forever on a lock (a step that never ends);
- `compile`: with train.compile, compiling waits forever on a compile worker's result that never comes (what
  Inductor does when a signal to the process group killed its workers);
- `decode:N`: the Nth beam search (the check before step 1 decodes once; the first validation is the second) waits
  forever.
"""

from __future__ import annotations

import concurrent.futures
import importlib.abc
import importlib.util
import os
import sys
import threading

HANG = os.environ.get("ABLATE_PLANT_HANG", "")
ONLY_IN = os.environ.get("ABLATE_PLANT_HANG_IN", "")  # only in a run whose folder's path holds this (a row's trial)
TARGET = "ablate.lightning_modules.module"


def _forever(*_args, **_kwargs):
    sys.stderr.write(f"planted hang ({HANG}) reached\n")
    sys.stderr.flush()
    threading.Event().wait()


def _patch(module) -> None:
    kind, _, n = HANG.partition(":")
    count = [0]
    if kind == "step":
        step = module.TranslationModule.training_step

        def training_step(self, batch, batch_idx):
            if self.global_step + 1 >= int(n) and ONLY_IN in str(self.trainer.default_root_dir):
                _forever()
            return step(self, batch, batch_idx)

        module.TranslationModule.training_step = training_step
    elif kind == "compile":

        def compile_for_training(*_args, **_kwargs):
            sys.stderr.write("planted hang (compile) reached\n")
            sys.stderr.flush()
            concurrent.futures.Future().result()  # a dead worker's result: waited for with no timeout

        module.compile_for_training = compile_for_training
    elif kind == "decode":
        for name in ("beam_search", "static_beam_search", "greedy_search"):
            original = getattr(module, name)

            def search(*args, _original=original, **kwargs):
                count[0] += 1
                if count[0] >= int(n):
                    _forever()
                return _original(*args, **kwargs)

            setattr(module, name, search)


class _AfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if HANG:
    sys.meta_path.insert(0, _AfterImport())
