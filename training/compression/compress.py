"""Compress a model for CPU inference: int8 dynamic quantization of its Linear layers, or attention-head
pruning by importance (training/compression/prune.py).

    lmforge compress --model runs/demo/finetune/hf --output runs/demo/int8 --method int8
    lmforge compress --model runs/demo/finetune/hf --output runs/demo/pruned --method prune --shares 0.2 0.4 \
        --task-config runs/demo/labeled/vader/finetune.json      # one model per share: pruned/share-0.20, ...

`torch.ao.quantization.quantize_dynamic` turns every `nn.Linear` into an int8-weight Linear that
quantizes its activations on the fly (PyTorch's recipe for BERT on CPU), with one weight scale per
output channel (`--scheme per_channel`, the default; `per_tensor` is PyTorch's tutorial's), and every
`nn.Embedding` into int8 rows with a scale each (weight-only; `--no-int8-embeddings` keeps them fp32).
LayerNorms stay fp32. Measured on the transfer bench's fine-tuned MiniLM (VADER test, 2,302
sentences; fp32 74.9% accuracy, 86.7 MiB): per-tensor Linear only 73.5% and 55.9 MiB (the 30k x 384
embedding matrix is most of what is left); per-channel Linear 74.5%; per-channel with int8
embeddings 74.4% and 22.4 MiB. transformers has no file format for such a model, so the output holds the float model's
`config.json` and tokenizer, the quantized `state_dict` as `int8.pt` (read back with
`torch.load(weights_only=True)`), and `quantization.json` saying how it was made.
`training.models.model_formats.load_int8(DIR)` (and `lmforge evaluate --model DIR`) rebuilds it: the architecture from the config,
quantized the same way, then the saved weights. It is for inference only: fine-tuning, continued
pretraining or distilling from it is refused with a message (train the float model, then compress).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common.config import config_to_dict, opt, parse_config, require
from schemas.manifest import Manifest, describe_outputs, input_ref, write_manifest
from training.compression.prune import head_importance, heads_to_prune
from training.finetuning.finetune import FinetuneConfig, load_data, load_tokenizer
from training.models.model_formats import (
    INT8_WEIGHTS,
    PRUNE_FILE,
    PRUNED_WEIGHTS,
    QUANT_FILE,
    load_model,
    prune,
    quantize,
    refuse_quantized,
)
from training.models.model_kinds import KINDS, check_tokenizer, max_tokens

METHODS = ("int8", "prune")
SCHEMES = ("per_channel", "per_tensor")


@dataclass(kw_only=True)
class CompressConfig:
    model: str = opt(help="Hugging Face model directory to compress (any kind lmforge evaluate reads)", path=True)
    output: str = opt(help="directory to write the compressed model, quantization.json and manifest.json to", path=True)
    method: str = opt("int8", "int8: dynamic quantization of every Linear layer (weights int8, activations "
                              "quantized per batch), for CPU inference | prune: remove the least important "
                              "attention heads of a fine-tuned model (Michel et al. 2019)")
    shares: list[float] = opt([0.3], "prune: shares of all heads to remove, one model each (<output>/share-0.30, ...)")
    task_config: str = opt("", "prune: the `lmforge finetune --config` JSON of the model's task; head importance is "
                               "the task loss's gradient on its validation split", path=True)
    importance_examples: int = opt(512, "prune: validation examples the importance is measured on")
    scheme: str = opt("per_channel", "int8: one weight scale per output channel of each Linear (per_channel) or one per "
                                     "matrix (per_tensor)")
    int8_embeddings: bool = opt(True, "int8: embedding tables as int8 rows with a scale each (weight-only); most of a small "
                                      "model's file is its vocabulary")

    def __post_init__(self) -> None:
        require(self.method in METHODS, f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        require(self.method != "prune" or bool(self.task_config),
                "--method prune needs --task-config: head importance is measured on the task's validation data")
        require(all(0.0 <= s < 1.0 for s in self.shares), f"shares must be in [0, 1), got {self.shares}")
        require(self.scheme in SCHEMES, f"scheme must be one of {', '.join(SCHEMES)}, got {self.scheme!r}")


def copy_model_files(src: str | os.PathLike, dst: Path) -> None:
    """The config and tokenizer files of a model directory, not its float weights (the caller writes its own)."""
    for f in Path(src).iterdir():
        if f.is_file() and f.suffix not in (".safetensors", ".bin") and f.name != "manifest.json":
            shutil.copy2(f, dst / f.name)


def run(cfg: CompressConfig) -> Path:
    import torch


    t0 = time.time()
    refuse_quantized(cfg.model, "compressing it again")
    check_tokenizer(cfg.model)
    if cfg.method == "prune":
        return run_prune(cfg, t0)
    model, kind = load_model(cfg.model)
    q = quantize(model.eval(), cfg.scheme, cfg.int8_embeddings)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".compress.", dir=out))
    try:
        torch.save(q.state_dict(), tmp / INT8_WEIGHTS)
        copy_model_files(cfg.model, tmp)
        linear = sum(1 for m in model.modules() if isinstance(m, torch.nn.Linear))
        embeddings = sum(1 for m in model.modules() if isinstance(m, torch.nn.Embedding)) if cfg.int8_embeddings else 0
        (tmp / QUANT_FILE).write_text(json.dumps({"method": "int8 dynamic (torch.ao.quantization.quantize_dynamic)",
                                                  "modules": "torch.nn.Linear" + (", torch.nn.Embedding (weight-only)"
                                                                                  if embeddings else ""),
                                                  "scheme": cfg.scheme, "int8_embeddings": cfg.int8_embeddings,
                                                  "quantized_modules": linear, "quantized_embeddings": embeddings,
                                                  "dtype": "qint8", "source": str(cfg.model), "kind": kind,
                                                  "torch": torch.__version__}, indent=2) + "\n")
        written = []
        for f in sorted(tmp.iterdir()):
            os.replace(f, out / f.name)
            written.append(out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_manifest(out, Manifest(stage="compress", config=config_to_dict(cfg), inputs=[input_ref(cfg.model)],
                                 counts={"quantized_linear_modules": linear}, outputs=describe_outputs(out, written),
                                 wall_seconds=round(time.time() - t0, 2)))
    print(f"compress: {kind} {cfg.model} -> int8 ({linear} Linear layers) {out}", flush=True)
    return out


def importance_batches(model_dir: str, task_config: str, examples: int, batch_size: int = 32):
    """Labelled batches of the task's validation split, as the finetune stage encodes them."""
    from training.finetuning.dataset import cap
    from training.finetuning.encode import collate, encode

    spec = json.loads(Path(task_config).read_text())
    fcfg = FinetuneConfig(**{**spec, "model": model_dir, "output": str(Path(tempfile.gettempdir(), "lmforge-prune"))})
    data = load_data(fcfg)
    data.validation = cap(data.validation, examples)
    if len(data.validation) < 2:
        raise ValueError(f"{task_config}: fewer than 2 validation examples to measure head importance on")
    tok = load_tokenizer(model_dir, data.task)
    from transformers import AutoConfig

    length = min(fcfg.max_length, max_tokens(AutoConfig.from_pretrained(model_dir)) or fcfg.max_length)
    enc = encode(data, "validation", tok, length)
    n = len(enc.input_ids)
    return [collate(enc, list(range(i, min(i + batch_size, n))), tok.pad_token_id, data.task) for i in range(0, n, batch_size)]


def run_prune(cfg: CompressConfig, t0: float) -> Path:
    import torch


    batches = importance_batches(cfg.model, cfg.task_config, cfg.importance_examples)
    model, kind = load_model(cfg.model)
    if not KINDS[kind].scores_task:
        raise ValueError(f"{cfg.model} is a {kind}; head importance needs a fine-tuned classifier and its task")
    importance = head_importance(model, batches)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    written, total = [], sum(len(x) for x in importance)
    for share in cfg.shares:
        heads = heads_to_prune(importance, share)
        pruned, _ = load_model(cfg.model)
        prune(pruned, heads)
        d = out / f"share-{share:.2f}"
        tmp = Path(tempfile.mkdtemp(prefix=".prune.", dir=out))
        try:
            torch.save(pruned.state_dict(), tmp / PRUNED_WEIGHTS)
            copy_model_files(cfg.model, tmp)
            removed = sum(len(v) for v in heads.values())
            (tmp / PRUNE_FILE).write_text(json.dumps({
                "method": "attention-head pruning by importance (Michel et al. 2019), per-layer normalised",
                "share_requested": share, "heads_removed": removed, "heads_total": total,
                "pruned_heads": {str(k): v for k, v in heads.items()}, "importance": importance,
                "source": str(cfg.model), "task_config": str(cfg.task_config), "kind": kind}, indent=1) + "\n")
            shutil.rmtree(d, ignore_errors=True)
            os.replace(tmp, d)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        written += sorted(p for p in d.iterdir() if p.is_file())
        print(f"compress: pruned {removed} of {total} heads ({share:.0%} asked) -> {d}", flush=True)
    write_manifest(out, Manifest(stage="compress", config=config_to_dict(cfg), inputs=[input_ref(cfg.model)],
                                 counts={"models": len(cfg.shares), "heads_total": total},
                                 outputs=describe_outputs(out, written), extra={"importance": importance},
                                 wall_seconds=round(time.time() - t0, 2)))
    return out


def main(argv: list[str] | None = None) -> None:
    run(parse_config(CompressConfig, "lmforge compress", __doc__, argv))


if __name__ == "__main__":
    main()
