"""The stages the CLI and the flows both know: name -> config class, run function, help text, Beam or not.

Entries are "module:attribute" strings imported on use, so `lmforge --help` and the flows' parameter checks
do not import Beam, torch or DeepSpeed.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Stage:
    """One stage as the CLI and the flows know it; references are "module:attribute", imported on use."""

    config: str
    """its config class"""
    run: str
    """the function that runs it"""
    module: str
    """its entry module: the docstring is `lmforge <stage> --help`'s text, and `python -m` runs it (under torchrun)"""
    beam: bool = False
    """a Beam stage: options neither lmforge nor Beam knows are errors, Beam's own go to the pipeline"""
    check: str = ""
    """a function of the config that reads the inputs a user names (paths, their manifests) without torch or
    transformers: the CLI calls it first, so a wrong path is said in the time Python starts, not after 8 s of imports"""


STAGE_TABLE = {
    "corpus": Stage("pipelines.corpus.config:CorpusConfig", "pipelines.corpus.stage:run", "pipelines.corpus.beam_corpus",
                    beam=True),
    "tokenizer": Stage("pipelines.tokenizer:TokenizerConfig", "pipelines.tokenizer:run", "pipelines.tokenizer"),
    "shards": Stage("pipelines.shards.stage:ShardsConfig", "pipelines.shards.stage:run", "pipelines.shards.beam_shards",
                    beam=True),
    "pretrain": Stage("training.pretraining.config:PretrainConfig", "training.launch.torchrun:launch_pretrain",
                      "training.pretraining.pretrain"),
    "finetune": Stage("training.finetuning.finetune:FinetuneConfig", "training.finetuning.finetune:run",
                      "training.finetuning.finetune"),
    "distill": Stage("training.compression.distill_config:DistillConfig", "training.compression.distill:run",
                     "training.compression.distill", check="training.compression.distill_config:check_inputs"),
    "evaluate": Stage("training.evaluation.evaluate:EvaluateConfig", "training.evaluation.evaluate:run",
                      "training.evaluation.evaluate"),
    "compress": Stage("training.compression.compress:CompressConfig", "training.compression.compress:run",
                      "training.compression.compress"),
    "contamination": Stage("pipelines.corpus.contamination:ContaminationConfig", "pipelines.corpus.contamination:run",
                           "pipelines.corpus.contamination"),
}


def load_ref(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    mod = importlib.import_module(module)
    return getattr(mod, attr) if attr else mod


def stage_config(name: str) -> type:
    """The config class of stage `name`, imported now."""
    return load_ref(STAGE_TABLE[name].config)


def module_doc(module: str) -> str:
    """A module's docstring read from its source, without running it: `lmforge pretrain` only launches its
    workers, and importing the worker module (transformers with it) cost ~4 s of each pretraining stage's start."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise ModuleNotFoundError(f"no module {module}")
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8")), clean=False) or ""


def stage_entry(name: str) -> tuple[type, Callable[..., Any], str]:
    """(config class, run function, --help text) of stage `name`: the class imported now, the run function's module
    when it is called (after the stage's `check`, if it has one), the text read."""
    stage = STAGE_TABLE[name]

    def run(*args: Any) -> Any:
        if stage.check:
            load_ref(stage.check)(args[0])
        return load_ref(stage.run)(*args)

    return load_ref(stage.config), run, module_doc(stage.module)


def check_inputs(name: str, cfg: Any) -> None:
    """Stage `name`'s own input check (Stage.check), if it has one."""
    if STAGE_TABLE[name].check:
        load_ref(STAGE_TABLE[name].check)(cfg)


STAGES = tuple(STAGE_TABLE)
