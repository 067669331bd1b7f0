"""Checkpoints that cannot run code: every `torch.load` of a resume is weights-only.

DeepSpeed saves its checkpoints with `torch.save` (pickles) and loads them with `torch.load(..., weights_only=False)`
(its engine, its ZeRO optimizers, `ds_to_universal`, the universal loader): unpickling a planted file runs whatever
the file names, and the digests of training/pretraining/checkpoint.py are no signature (whoever writes a run folder
can rewrite them too). While `weights_only_loads()` is in force, every `torch.load` in the process is weights-only,
whatever its caller asks: torch's restricted unpickler builds tensors, containers and numbers, and of classes only
the four DeepSpeed's own checkpoints hold (DEEPSPEED_GLOBALS, found by `torch.serialization.
get_unsafe_globals_in_checkpoint` over the ZeRO 0-3, bf16, LAMB and universal checkpoints that
tests/integration/test_pretrain_deepspeed.py writes). A file that names anything else stops the resume with
UnsafeCheckpoint, naming the file and the global, before the object is built.

`python -m training.pretraining.safe_load ds_to_universal ARGS` runs DeepSpeed's converter the same way (its worker
processes are forked from it, so they inherit the rule).
"""
from __future__ import annotations

import contextlib
import importlib
import pickle
import re
import sys
from collections.abc import Iterator
from typing import Any

import torch

DEEPSPEED_GLOBALS = ("deepspeed.runtime.zero.config:ZeroStageEnum",
                     "deepspeed.runtime.fp16.loss_scaler:LossScaler",
                     "deepspeed.runtime.fp16.loss_scaler:DynamicLossScaler",
                     "deepspeed.utils.tensor_fragment:fragment_address")
"""The classes a DeepSpeed checkpoint pickles besides tensors and containers: the ZeRO stage (an int Enum), the loss
scaler (fp16's dynamic one on a GPU) and each parameter's fragment address (a dataclass of two ints)."""


class UnsafeCheckpoint(RuntimeError):
    """A checkpoint file that names a global lmforge does not load: it could run code."""


def allowed_globals() -> list[Any]:
    out = []
    for spec in DEEPSPEED_GLOBALS:
        module, name = spec.split(":")
        out.append(getattr(importlib.import_module(module), name))
    return out


_WHY = (re.compile(r"Unsupported global: GLOBAL \S+"), re.compile(r"Trying to load unsupported GLOBAL [^\n]*?blocked"),
        re.compile(r"WeightsUnpickler error: [^\n]*"))
"""What names the refused object in torch's message, most precise first (the message is a paragraph of advice)."""


def _why(message: str) -> str:
    """torch's words for what a weights-only load refused."""
    message = re.sub(r"\x1b\[[0-9;]*m", "", message)
    return next((m.group(0)[:300] for pattern in _WHY if (m := pattern.search(message))), "")


@contextlib.contextmanager
def weights_only_loads() -> Iterator[None]:
    """Within it, every `torch.load` of this process loads weights-only (DEEPSPEED_GLOBALS allowed); one that would
    build anything else raises UnsafeCheckpoint naming the file."""
    original = torch.load

    def load(f, map_location=None, pickle_module=None, *, weights_only=None, **kwargs):  # noqa: ARG001
        if pickle_module is not None and pickle_module is not pickle:
            raise UnsafeCheckpoint(f"{f}: a load with its own pickle module ({pickle_module!r}) is refused")
        try:
            return original(f, map_location=map_location, weights_only=True, **kwargs)
        except pickle.UnpicklingError as e:
            why = _why(str(e)) or type(e).__name__
            raise UnsafeCheckpoint(f"{f}: not loaded, it holds more than weights ({why}); lmforge loads only "
                                   "tensors and DeepSpeed's own state from a checkpoint (docs/SECURITY.md)") from None

    with torch.serialization.safe_globals(allowed_globals()):
        torch.load = load
        try:
            yield
        finally:
            torch.load = original


def main(argv: list[str] | None = None) -> int:
    """`python -m training.pretraining.safe_load ds_to_universal ARGS`: DeepSpeed's converter under the rule."""
    import multiprocessing
    import runpy

    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "ds_to_universal":
        print("usage: python -m training.pretraining.safe_load ds_to_universal ARGS", file=sys.stderr)
        return 2
    if "fork" in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method("fork", force=True)  # its workers inherit the patched torch.load
    sys.argv = ["ds_to_universal", *argv[1:]]
    with weights_only_loads():
        try:
            runpy.run_module("deepspeed.checkpoint.ds_to_universal", run_name="__main__", alter_sys=True)
        except UnsafeCheckpoint as e:
            print(f"ds_to_universal: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
