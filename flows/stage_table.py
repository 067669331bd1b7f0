"""The stages the CLI and the flows both know: name -> config class, run function, help text, Beam or not.

Entries are "module:attribute" strings imported on use, so `lmforge --help` and the flows' parameter checks
do not import Beam, torch or DeepSpeed.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# stage -> (module:config class, module:run function, module whose docstring is the --help text, Beam stage)
STAGE_TABLE = {
    "corpus": ("pipelines.corpus.config:CorpusConfig", "pipelines.corpus.stage:run", "pipelines.corpus.beam_corpus", True),
    "tokenizer": ("pipelines.tokenizer:TokenizerConfig", "pipelines.tokenizer:run", "pipelines.tokenizer", False),
    "shards": ("pipelines.shards.stage:ShardsConfig", "pipelines.shards.stage:run", "pipelines.shards.beam_shards", True),
    "pretrain": ("training.pretrain:PretrainConfig", "training.launch:launch_pretrain", "training.pretrain", False),
    "finetune": ("training.finetune:FinetuneConfig", "training.finetune:run", "training.finetune", False),
    "distill": ("training.distill:DistillConfig", "training.distill:run", "training.distill", False),
    "evaluate": ("training.evaluate:EvaluateConfig", "training.evaluate:run", "training.evaluate", False),
    "compress": ("training.compress:CompressConfig", "training.compress:run", "training.compress", False),
    "contamination": ("pipelines.corpus.contamination:ContaminationConfig", "pipelines.corpus.contamination:run",
                      "pipelines.corpus.contamination", False),
}


def load_ref(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    mod = importlib.import_module(module)
    return getattr(mod, attr) if attr else mod


def stage_entry(name: str) -> tuple[type, Callable[..., Any], str, bool]:
    """(config class, run function, --help text, passes unknown args to Beam) of stage `name`, imported now."""
    cfg_ref, run_ref, doc_ref, beam = STAGE_TABLE[name]
    return load_ref(cfg_ref), load_ref(run_ref), load_ref(doc_ref).__doc__ or "", beam


STAGES = tuple(STAGE_TABLE)
