"""Fine-tune the pretrained model on binary sentiment (VADER's human-scored sentences).

Run alone:
    lmforge finetune --model runs/demo/pretrain/hf --data samples/labeled/vader --output runs/demo/finetune

Single process, plain torch AdamW: the task is small (about 18k sentences) and fits one CPU
process; DeepSpeed adds nothing here. Writes hf/ (BertForSequenceClassification, safetensors),
metrics.json (held-out accuracy next to the majority-class baseline) and the manifest.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from lmforge.config import config_to_dict, opt, parse_config, require
from schemas.manifest import Manifest, atomic_write_json, describe_outputs, input_ref, write_manifest
from training.sentiment import VADER_SETS, load_examples, majority_baseline, split_examples


@dataclass(kw_only=True)
class FinetuneConfig:
    model: str = opt(help="HF model directory to start from (e.g. runs/<run>/pretrain/hf)")
    data: str = opt("samples/labeled/vader", "directory with VADER <set>_GroundTruth.txt files")
    output: str = opt(help="stage directory to write hf/, metrics.json and manifest.json to")
    sets: list[str] = opt(list(VADER_SETS), "VADER sets to use")
    neutral_band: float = opt(0.5, "leave out sentences with |score| below this (neither positive nor negative)")
    test_per_mille: int = opt(200, "sentences per 1,000 held out for testing, chosen by a hash of their id")
    max_train: int = opt(0, "train on at most this many sentences (0 = all)")
    epochs: int = opt(2, "passes over the training sentences")
    batch_size: int = opt(32, "sentences per step")
    max_length: int = opt(64, "tokens per sentence after truncation")
    lr: float = opt(1e-4, "AdamW learning rate (linear decay, no warm-up)")
    seed: int = opt(0, "shuffling and classifier-head initialisation")
    threads: int = opt(2, "torch CPU threads")

    def __post_init__(self) -> None:
        require(set(self.sets) <= set(VADER_SETS), f"sets must be among {VADER_SETS}, got {self.sets}")
        require(0 < self.test_per_mille < 1000, "test_per_mille must be in (0, 1000)")
        require(self.epochs >= 1 and self.batch_size >= 1 and self.max_length >= 8, "epochs, batch_size, max_length too small")


def _batches(examples, tok, batch_size, max_length):
    import torch

    for i in range(0, len(examples), batch_size):
        chunk = examples[i : i + batch_size]
        enc = tok([e.text for e in chunk], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        yield enc, torch.tensor([e.label for e in chunk])


def accuracy(model, tok, examples, batch_size: int, max_length: int) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for enc, labels in _batches(examples, tok, batch_size * 4, max_length):
            correct += int((model(**enc).logits.argmax(-1) == labels).sum())
    return correct / max(1, len(examples))


def run(cfg: FinetuneConfig) -> Path:
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    t0 = time.time()
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)

    examples, counts = load_examples(cfg.data, cfg.sets, cfg.neutral_band)
    train, test = split_examples(examples, cfg.test_per_mille)
    random.Random(cfg.seed).shuffle(train)
    if cfg.max_train:
        train = train[: cfg.max_train]
    majority, baseline = majority_baseline(train, test)

    tok = AutoTokenizer.from_pretrained(cfg.model)
    model = AutoModelForSequenceClassification.from_pretrained(cfg.model, num_labels=2)
    opt_ = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    steps = cfg.epochs * ((len(train) + cfg.batch_size - 1) // cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt_, lambda s: max(0.0, 1.0 - s / steps))
    curve = []
    bar = tqdm(total=steps, desc="finetune", unit="step", mininterval=5)
    for epoch in range(cfg.epochs):
        random.Random(cfg.seed + epoch).shuffle(train)
        model.train()
        for enc, labels in _batches(train, tok, cfg.batch_size, cfg.max_length):
            loss = model(**enc, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt_.step()
            sched.step()
            opt_.zero_grad(set_to_none=True)
            curve.append(round(float(loss), 4))
            bar.update(1)
            bar.set_postfix(loss=f"{float(loss):.3f}", refresh=False)
    bar.close()
    acc = accuracy(model, tok, test, cfg.batch_size, cfg.max_length)
    train_acc = accuracy(model, tok, train[:2000], cfg.batch_size, cfg.max_length)

    hf = out / "hf"
    model.save_pretrained(hf, safe_serialization=True)
    tok.save_pretrained(hf)
    metrics = {
        "accuracy": round(acc, 4), "majority_baseline": round(baseline, 4), "majority_label": majority,
        "train_accuracy_first_2000": round(train_acc, 4),
        "train_examples": len(train), "test_examples": len(test),
        "test_positive_share": round(sum(e.label for e in test) / max(1, len(test)), 4),
        "steps": steps, "first_loss_mean10": _mean(curve[:10]), "last_loss_mean10": _mean(curve[-10:]),
        "loss_curve_every_10": curve[::10], "wall_seconds": round(time.time() - t0, 1),
    }
    atomic_write_json(out / "metrics.json", metrics)
    write_manifest(out, Manifest(
        stage="finetune", config=config_to_dict(cfg), inputs=[input_ref(Path(cfg.model).parent), input_ref(cfg.data)],
        counts={**dict(counts), "train": len(train), "test": len(test)},
        outputs=describe_outputs(out, [p for p in hf.iterdir() if p.is_file()] + [out / "metrics.json"]),
        extra={k: metrics[k] for k in ("accuracy", "majority_baseline", "train_accuracy_first_2000")},
        wall_seconds=metrics["wall_seconds"]))
    print(f"finetune: accuracy {acc:.3f} vs majority baseline {baseline:.3f} on {len(test)} held-out sentences", flush=True)
    return out


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def main(argv: list[str] | None = None) -> None:
    run(parse_config(FinetuneConfig, "lmforge finetune", __doc__, argv))


if __name__ == "__main__":
    main()
