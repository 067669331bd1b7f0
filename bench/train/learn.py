"""Learning per token: lmforge's pretraining against the Hugging Face Trainer, held-out loss at equal tokens.

    lmforge bench learn [--objectives mlm causal] [--presets tiny demo] [--steps 300] [--seeds 1 2 3]
    lmforge bench learn --presets tiny --steps 40 --seeds 1 --work /tmp/bl --no-report      # a quick trial

The same model config (training.models.model presets), tokenizer, rows, token budget, optimizer and schedule for
both, on this machine's CPU, one process each:
1. data: the bundled crawl through `lmforge corpus`, `tokenizer` and `shards` with the demo's settings (bench.train.throughput's
   build_data: 128 tokens a row, MLM masks), once under <work>/data, and the same corpus packed as causal shards
   (`shards --mask-objective causal`, <work>/data/shards-causal);
2. for every objective, preset and seed:
   - lmforge: `launch_pretrain` for --steps steps of --micro-batch-size rows, seeded --seed. MLM: DeepSpeed,
     SparseMLM (the loss head on masked positions only), K=10 precomputed mask variants, one chosen per epoch.
     causal: the preset's decoder (LlamaForCausalLM of the same width, depth and heads; GPT2LMHeadModel for a gpt2
     preset; the figures of 2026-11-28 and before are GPT-2's: the `any` presets built it then);
   - HF Trainer (`bench.train.hf_trainer`): the same HF model on the same rows' unmasked ids, the same steps, batch, peak
     rate, AdamW betas, epsilon, weight decay, clipping, 6% linear warm-up and linear decay, seeded --seed. MLM rows
     are masked afresh every batch by `DataCollatorForLanguageModeling(mlm_probability=0.15)`; causal rows go
     through the causal collator (`mlm=False`);
3. each trained model scored the same way (training.evaluation.card.lm_quality): MLM, the mean cross-entropy of the
   shards' held-out rows' masked tokens (mask variant 0: the same tokens for every model); causal, the mean
   next-token cross-entropy of the held-out rows;
4. per objective and preset: each system's mean over seeds with its range, lmforge's minus the Trainer's, and the
   verdict the issue asks for: lmforge's mean within the Trainer's range over seeds, or below it.

5. with `--transfer`, each lmforge MLM model fine-tuned on VADER beside its random-init twin (bench/train/learn_transfer.py):
   whether that budget's pretraining pays, next to how far its loss is under the unigram control.

Each finished run is kept in <work>/results.json under its settings and the digest of the code it depends on
(`learn_code_id`); a later invocation skips those, and the report keeps the cases of every budget run so far
(<work>/report.json; `--render-only` writes the section from it). A case run again with other seeds or systems keeps
those measured before under the same code (`--seeds 4 5 6` adds three seeds to a case of three).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import mean
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from bench.kit.steps import ROOT, Steps, run_command
from bench.train import learn_transfer
from common.config import opt
from common.stats import difference_interval, interval
from flows.stages.runner import StageFailed
from schemas.objectives import objective as registered

TITLE = "Learning per token: lmforge against the HF Trainer"
SYSTEMS = ("lmforge", "lmforge_bernoulli", "hf_trainer", "hf_trainer_k_masks", "hf_trainer_fixed_count")
LMFORGE_SHARDS = {"lmforge": None, "lmforge_bernoulli": ("shards-bernoulli", ["--mask-count", "bernoulli"])}
"""lmforge's runs: on the bench's shards, and (mlm) on the same rows masked with `--mask-count bernoulli` (each token at
15%, as the Trainer's collator draws), scored on the same held-out tokens: (the shards' folder, the shards options)."""
HF_MODULES = {"hf_trainer": ["bench.train.hf_trainer"], "hf_trainer_k_masks": ["bench.train.learn_masks"],
              "hf_trainer_fixed_count": ["bench.train.learn_masks", "--fixed-count"]}
"""The Trainer's runs: plain (fresh masks each batch); with lmforge's precomputed masks; with fresh masks of
lmforge's fixed count (ablations, bench/train/learn_masks.py: whether the masks explain a gap between the two, and which
of their differences)."""
OBJECTIVES = {"mlm": ("shards", "masked_lm", "held-out masked-token loss", True),
              "causal": ("shards-causal", "causal_lm", "held-out next-token loss", False)}
"""objective: (its shards under the data directory, the model kind scored, what the loss is, whether `--transfer`
fine-tunes its models: the fine-tune stage's classifiers are BERT-style encoders)."""


@dataclass
class LearnBenchConfig:
    work: str = opt("runs/bench-learn", "runs, logs and results.json")
    data: str = opt("", "corpus, tokenizer and shards, built once (default: <work>/data)")
    objectives: list[str] = opt(list(OBJECTIVES), "pretraining objectives: mlm (BERT) and causal (GPT-2)")
    presets: list[str] = opt(["tiny", "demo"], "model presets (bench.train.throughput's: tiny, demo, mini = bert_mini)")
    seeds: list[int] = opt([1, 2, 3], "seeds; each seeds both systems' initialisation, data order and masks")
    steps: int = opt(300, "optimizer steps for each run (equal tokens: steps x rows x 128)")
    micro_batch_size: int = opt(16, "rows per step, both systems (one process each)")
    lr: float = opt(1e-3, "peak learning rate, both systems (lmforge's default)")
    systems: list[str] = opt(["lmforge", "hf_trainer"], "what trains: lmforge, hf_trainer, and the ablations "
                                                        "hf_trainer_k_masks (the Trainer on lmforge's precomputed "
                                                        "masks), hf_trainer_fixed_count (fresh masks of lmforge's "
                                                        "fixed count) and lmforge_bernoulli (lmforge on shards masked "
                                                        "with --mask-count bernoulli)")
    transfer: bool = opt(False, "also fine-tune each lmforge MLM model on VADER beside its random-init twin, paired by "
                                "seed, with the majority and TF-IDF controls (bench/train/learn_transfer.py; ~1 minute a "
                                "model for the demo preset)")

    def __post_init__(self) -> None:
        from bench.train.throughput import OBJECTIVE, PRESETS

        sizes = [p for p in PRESETS if p not in OBJECTIVE]  # the objective is learn's own option, not the preset's
        bad = [p for p in self.presets if p not in sizes]
        if bad:
            raise ValueError(f"unknown presets {bad}; choose from {sizes} (--objectives causal trains the decoder)")
        if bad := [x for x in self.systems if x not in SYSTEMS]:
            raise ValueError(f"unknown systems {bad}; choose from {list(SYSTEMS)}")
        if bad := [o for o in self.objectives if o not in OBJECTIVES]:
            raise ValueError(f"unknown objectives {bad}; choose from {list(OBJECTIVES)}")
        if self.steps < 2 or self.micro_batch_size < 1 or not self.seeds:
            raise ValueError("--steps must be >= 2, --micro-batch-size >= 1, and give at least one seed")


def has_masks(objective: str) -> bool:
    """The objective's rows carry precomputed masks (schemas.objectives): mlm does, causal does not."""
    return registered(objective).stores_variants


def held_out_loss(model_dir: Path, shards: Path, objective: str) -> tuple[float, int]:
    """(the objective's mean cross-entropy on the shards' valid rows, mask variant 0; the tokens it averages)."""
    import torch

    from training.evaluation.card import lm_quality

    torch.manual_seed(0)
    q = lm_quality(str(model_dir), OBJECTIVES[objective][1], str(shards))
    return q["value"], q["tokens"]


def run_lmforge(cfg: LearnBenchConfig, data: dict[str, Path], preset: str, seed: int, objective: str,
                system: str = "lmforge") -> dict[str, Any]:
    import contextlib

    from bench.train.throughput import DROPOUT, PRESETS
    from training.launch.torchrun import launch_pretrain
    from training.pretraining.pretrain import PretrainConfig

    name, shards = run_name(objective, preset, seed, cfg.steps), data[OBJECTIVES[objective][0]]
    train_shards = data[LMFORGE_SHARDS[system][0]] if LMFORGE_SHARDS[system] else shards
    out = Path(cfg.work, system, name)
    shutil.rmtree(out, ignore_errors=True)
    pc = PretrainConfig(shards=str(train_shards), tokenizer=str(data["tokenizer"]), output=str(out),
                        model=PRESETS[preset], dropout=DROPOUT.get(preset, -1.0), steps=cfg.steps, lr=cfg.lr,
                        micro_batch_size=cfg.micro_batch_size, seed=seed, eval_batches=0, tensorboard=False)
    log = Path(cfg.work, "logs", f"{system}-{name}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            launch_pretrain(pc, nproc=1, accelerator="cpu")
    except RuntimeError as e:
        raise SystemExit(f"bench learn: {system} {objective} {preset} seed {seed} failed; log {log}\n{e}") from None
    metrics = json.loads((out / "metrics.json").read_text())
    loss, tokens = held_out_loss(out / "hf", shards, objective)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    return {"held_out_loss": loss, "held_out_tokens": tokens, "train_rows": cfg.steps * metrics["global_batch"],
            "seconds": time.time() - t0, "last_train_loss": metrics.get("last_loss")}


def run_hf(cfg: LearnBenchConfig, data: dict[str, Path], preset: str, seed: int, objective: str,
           system: str = "hf_trainer") -> dict[str, Any]:
    from bench.train.throughput import DROPOUT, PRESETS

    name, shards = run_name(objective, preset, seed, cfg.steps), data[OBJECTIVES[objective][0]]
    out = Path(cfg.work, system, name)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    args = ["-m", *HF_MODULES[system], "--shards", str(shards), "--tokenizer", str(data["tokenizer"]),
            "--model", PRESETS[preset], "--micro-batch-size", str(cfg.micro_batch_size), "--warmup", "1",
            "--steps", str(cfg.steps - 1), "--lr", str(cfg.lr), "--seed", str(seed), "--dropout",
            str(DROPOUT.get(preset, -1.0)), "--save", str(out / "hf"), "--out", str(out / "run.json")]
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    t0 = time.time()
    try:
        run_command(f"{system}-{name}", [sys.executable, *args], Path(cfg.work, "logs", f"{system}-{name}.log"), env=env)
    except StageFailed as e:
        raise SystemExit(f"bench learn: HF Trainer {objective} {preset} seed {seed}: {e}") from None
    loss, tokens = held_out_loss(out / "hf", shards, objective)
    return {"held_out_loss": loss, "held_out_tokens": tokens, "train_rows": cfg.steps * cfg.micro_batch_size,
            "seconds": time.time() - t0}


def run_name(objective: str, preset: str, seed: int, steps: int) -> str:
    """The run's folder under <work>/lmforge and <work>/hf_trainer (its model in hf/, for a fine-tune to start from)."""
    return f"{objective}-{preset}-{steps}-s{seed}"


def learn_code_id() -> str:
    """The code a learning run depends on: the libraries, pretraining (training/pretraining, models, runtime, launch),
    the scorer (training/evaluation/card.py) and the Trainer's peer. Narrower than bench.train.throughput's code_id, so an edit
    to the fine-tune or the card's prose does not measure every run again."""
    from bench.train.throughput import code_digest

    files = [f for d in ("pretraining", "models", "runtime", "launch") for f in (ROOT / "training" / d).rglob("*.py")]
    return code_digest([*files, ROOT / "training" / "evaluation" / "card.py", ROOT / "bench" / "train" / "hf_trainer.py"])


def transfer(cfg: LearnBenchConfig, data: dict[str, Path], preset: str, seed: int, objective: str,
             steps: Steps) -> dict[str, Any]:
    """The lmforge model of (preset, seed) fine-tuned beside its twin (bench/train/learn_transfer.py); a model whose folder
    is gone (a cached run) is trained again first: the run is deterministic, so it is the model that was scored."""
    model = Path(cfg.work, "lmforge", run_name(objective, preset, seed, cfg.steps), "hf")
    if not (model / "config.json").exists():
        print(f"bench learn: lmforge {objective} {preset} seed {seed} again, for its model ...", flush=True)
        run_lmforge(cfg, data, preset, seed, objective)
    print(f"bench learn: fine-tuning lmforge {objective} {preset} seed {seed} on {learn_transfer.TASK} ...", flush=True)
    return learn_transfer.finetune_pair(Path(cfg.work), steps, model, run_name(objective, preset, seed, cfg.steps),
                                        seed)


def summarise(runs: dict[str, dict[str, float]]) -> dict[str, Any]:
    """{system: {seed: loss}} -> each system's mean and range over seeds, lmforge minus the Trainer (with Welch's 95%
    interval: the two systems' seeds share nothing), and the verdict: lmforge's mean at or under the Trainer's highest
    seed (within its spread, or below it)."""
    out: dict[str, Any] = {}
    for system, by_seed in runs.items():
        vals = list(by_seed.values())
        out[system] = {"mean": mean(vals), "low": min(vals), "high": max(vals), "seeds": len(vals)}
    for system in [s for s in LMFORGE_SHARDS if s in out and "hf_trainer" in out]:
        d = difference_interval(list(runs[system].values()), list(runs["hf_trainer"].values()))
        v = {"difference": d["mean"], "interval": [d["ci_low"], d["ci_high"]],
             "within_or_below": out[system]["mean"] <= out["hf_trainer"]["high"]}
        if system == "lmforge":
            out |= v  # lmforge's verdict sits on the case, a variant's on its own summary
        else:
            out[system] |= v
    return out


LMFORGE_LABELS = {"lmforge": "lmforge", "lmforge_bernoulli": "lmforge with `--mask-count bernoulli`"}


def verdict_line(case: str, s: dict[str, Any], system: str = "lmforge") -> str:
    lm, hf = s[system], s["hf_trainer"]
    v = s if system == "lmforge" else lm  # lmforge's verdict sits on the case; a variant's on its own summary
    low, high = v.get("interval") or (None, None)
    ci = f" (95% interval {low:+.3f} to {high:+.3f}, Welch's t over seeds)" if low is not None else ""
    where = ("below the Trainer's mean" if v["difference"] < 0 else
             "within the Trainer's spread over seeds" if v["within_or_below"] else "above the Trainer's highest seed")
    return (f"{case}: {LMFORGE_LABELS[system]} {lm['mean']:.3f} ({lm['low']:.3f}-{lm['high']:.3f}) against the "
            f"Trainer's {hf['mean']:.3f} ({hf['low']:.3f}-{hf['high']:.3f}) over {hf['seeds']} seeds: "
            f"{v['difference']:+.3f} nats{ci}, {where}. Goal (issue 52: within the Trainer's spread, or below): "
            f"**{'MET' if v['within_or_below'] else 'NOT MET'}**.")


def case_order(item: tuple[str, dict[str, Any]]) -> tuple[int, int, int]:
    """Objectives as OBJECTIVES lists them, presets as bench.train.throughput's PRESETS, then budgets, smallest first."""
    from bench.train.throughput import PRESETS

    c = item[1]
    return (list(OBJECTIVES).index(c["objective"]), list(PRESETS).index(c["preset"]) if c["preset"] in PRESETS else 99,
            int(c.get("steps") or 0))


MASKS_ABLATIONS = {"hf_trainer_k_masks": "on lmforge's precomputed masks",
                   "hf_trainer_fixed_count": "on fresh masks of lmforge's fixed count"}


def masks_line(case: str, s: dict[str, Any], system: str = "hf_trainer_k_masks") -> str:
    """A masks ablation's reading: where the Trainer with those masks lands between the two systems."""
    k, hf, lm = s[system], s["hf_trainer"], s["lmforge"]
    return (f"{case}, masks ablation: the Trainer {MASKS_ABLATIONS[system]} (bench/train/learn_masks.py) "
            f"{k['mean']:.3f} ({k['low']:.3f}-{k['high']:.3f}): {k['mean'] - hf['mean']:+.3f} nats against the plain "
            f"Trainer, {k['mean'] - lm['mean']:+.3f} against lmforge.")


def count_line(case: str, c: dict[str, Any]) -> str:
    """What the mask count costs: lmforge on `--mask-count bernoulli` shards minus lmforge on the default fixed count,
    paired by seed (the same initialisation and row order; only the masks differ), with its 95% interval."""
    fixed, bern = c["runs"]["lmforge"], c["runs"]["lmforge_bernoulli"]
    diffs = {seed: bern[seed]["held_out_loss"] - fixed[seed]["held_out_loss"] for seed in sorted(set(fixed) & set(bern))}
    d = interval(list(diffs.values()))
    ci = f" (95% interval {d['ci_low']:+.4f} to {d['ci_high']:+.4f})" if d["ci_low"] is not None else ""
    per = ", ".join(f"{seed}: {v:+.4f}" for seed, v in diffs.items())
    return (f"{case}, mask count: lmforge on `--mask-count bernoulli` shards minus lmforge on the default fixed count, "
            f"paired by seed: {d['mean']:+.4f} nats{ci}; per seed {per}.")


def render(report: dict[str, Any]) -> str:
    st = report["settings"]
    times = [c.get("measured_utc") or report.get("measured_utc", "?") for c in report["cases"].values()] or ["?"]
    lines = [f"Each run: the case's optimizer steps of {st['micro_batch_size']} rows of 128 tokens (the same rows, one "
             "process, this machine's CPU), peak rate "
             f"{st['lr']:g}, AdamW (0.9, 0.98), epsilon 1e-6, weight decay 0.01, clipping 1.0, 6% linear warm-up then linear "
             "decay. mlm: scored on the shards' held-out rows' masked tokens (mask variant 0, the same tokens for every "
             "model); lmforge as `lmforge pretrain` runs it (SparseMLM, 10 precomputed mask variants), the HF Trainer "
             "on BertForMaskedLM of the same config, masks drawn afresh each batch by DataCollatorForLanguageModeling. "
             "causal: the preset's decoder (LlamaForCausalLM since 2026-11-29, GPT2LMHeadModel before), scored on the "
             "held-out rows' next-token cross-entropy; the "
             "Trainer with the causal collator (mlm=False). s per run: start-up, training and scoring, at times with "
             "other work on the machine; not a speed figure (bench train's section is). "
             f"Code {', '.join(sorted({c.get('code_id', st['code_id']) for c in report['cases'].values()}))} "
             f"(learn_code_id: pretraining, the scorer and the Trainer's peer); {report['machine']}; cases measured "
             f"{min(times)} to {max(times)}.", "",
             "| objective | preset | steps | system | held-out loss (nats), mean (lowest-highest) | under the unigram "
             "control | per seed | s per run |", "|---|---|---:|---|---:|---:|---|---:|"]
    unigram = report.get("unigram_control") or {}
    # each case's summary from its runs, so a case kept from an earlier invocation reads as a new one would
    report = {**report, "cases": {k: {**c, "summary": summarise({s: {seed: v["held_out_loss"] for seed, v in r.items()}
                                                                 for s, r in c["runs"].items()})}
                                  for k, c in sorted(report["cases"].items(), key=case_order)}}
    for c in report["cases"].values():
        for system in SYSTEMS:
            if system not in c["summary"]:
                continue
            s, runs = c["summary"][system], c["runs"][system]
            per = ", ".join(f"{k}: {v['held_out_loss']:.3f}" for k, v in sorted(runs.items()))
            secs = mean(v["seconds"] for v in runs.values())
            control = (unigram.get(c["objective"]) or {}).get("value")
            under = f"{control - s['mean']:.3f}" if control is not None else "-"
            lines.append(f"| {c['objective']} | {c['preset']} | {c.get('steps', st['steps'])} | {system} | {s['mean']:.3f} "
                         f"({s['low']:.3f}-{s['high']:.3f}) | {under} | {per} | {secs:.0f} |")
    lines.append("")
    for objective, u in unigram.items():
        lines.append(f"The unigram control ({objective}): the train split's token frequencies alone score {u['value']:.3f} "
                     f"nats on the same {u['tokens']:,} held-out tokens. A model at that loss has learnt which tokens are "
                     "common and nothing of their context (training/evaluation/lm_controls.py).")
    lines.append("")
    lines += [verdict_line(case, c["summary"], system) for case, c in report["cases"].items() for system in LMFORGE_LABELS
              if "difference" in (c["summary"] if system == "lmforge" else c["summary"].get(system, {}))]
    lines += [masks_line(case, c["summary"], system) for case, c in report["cases"].items()
              for system in ("hf_trainer_k_masks", "hf_trainer_fixed_count")
              if {system, "hf_trainer", "lmforge"} <= set(c["summary"])]
    lines += [count_line(case, c) for case, c in report["cases"].items()
              if {"lmforge", "lmforge_bernoulli"} <= set(c["runs"])]
    lines += learn_transfer.render(report)
    return "\n".join(lines) + "\n"


def objective_shards(data: dict[str, Path], steps: Steps, objective: str, folder: str = "",
                     options: list[str] | None = None) -> Path:
    """The bench corpus packed for another objective, or with other shards options: bench.train.throughput's shards step
    (build_data), `--mask-objective`."""
    from bench.train.throughput import TrainBenchConfig, shards_argv

    out = data["shards"].parent / (folder or OBJECTIVES[objective][0])
    steps.run(out.name, out, [*shards_argv(TrainBenchConfig(), data, out), "--mask-objective", objective,
                              *(options or [])])
    return out


def parse(argv: list[str] | None) -> tuple[LearnBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench learn", __doc__, LearnBenchConfig)
    ap.add_argument("--no-report", action="store_true", help="do not write docs/BENCHMARKS.md")
    ap.add_argument("--out", default=str(ROOT / "docs" / "BENCHMARKS.md"), help="the benchmarks file (default: %(default)s)")
    ap.add_argument("--render-only", action="store_true", help="run nothing: write the section again from "
                    "<work>/report.json (the last finished run), adding the unigram controls if it has none")
    return parse_bench(ap, LearnBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    from bench.kit.report import cpu_model
    from bench.train.throughput import TrainBenchConfig, build_data

    cfg, a = parse(argv)
    if a.render_only:
        return render_only(cfg, Path(a.out))
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    t0 = time.time()
    steps = Steps("learn", Path(cfg.work, "logs"))
    data = build_data(TrainBenchConfig(work=cfg.work, data=cfg.data), steps)
    for objective in cfg.objectives:  # mlm's are build_data's
        if OBJECTIVES[objective][0] not in data:
            data[OBJECTIVES[objective][0]] = objective_shards(data, steps, objective)
    for system in cfg.systems:  # an lmforge variant's own shards: the bench's MLM rows, masked otherwise
        if LMFORGE_SHARDS.get(system) and (masked := [o for o in cfg.objectives if has_masks(o)]):
            folder, options = LMFORGE_SHARDS[system]
            data[folder] = objective_shards(data, steps, masked[0], folder, options)
    code = learn_code_id()
    masks_code = hashlib.sha256((ROOT / "bench" / "train" / "learn_masks.py").read_bytes()).hexdigest()[:8]
    masking_code = hashlib.sha256((ROOT / "pipelines" / "shards" / "masking.py").read_bytes()).hexdigest()[:8]
    results_path = Path(cfg.work, "results.json")
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    report_path = Path(cfg.work, "report.json")
    earlier = json.loads(report_path.read_text()).get("cases", {}) if report_path.exists() else {}
    cases: dict[str, Any] = {}
    for objective in cfg.objectives:
        for preset in cfg.presets:
            runs: dict[str, dict[str, Any]] = {s: {} for s in cfg.systems
                                               if not (LMFORGE_SHARDS.get(s) and not has_masks(objective))}
            transfers: dict[str, Any] = {}
            for seed in cfg.seeds:
                for system in cfg.systems:
                    if LMFORGE_SHARDS.get(system) and not has_masks(objective):
                        continue  # a masks variant: causal rows have no masks
                    extra = (f"+{masks_code}" if system.startswith("hf_trainer_") else
                             f"+{masking_code}" if LMFORGE_SHARDS.get(system) else "")
                    key = (f"{system}|{objective}|{preset}|seed={seed}|steps={cfg.steps}|batch={cfg.micro_batch_size}|"
                           f"lr={cfg.lr}|code={code}{extra}")
                    if key not in results:
                        print(f"bench learn: {system} {objective} {preset} seed {seed}, {cfg.steps} steps ...", flush=True)
                        results[key] = (run_lmforge(cfg, data, preset, seed, objective, system)
                                        if system in LMFORGE_SHARDS else
                                        run_hf(cfg, data, preset, seed, objective, system))
                        results_path.write_text(json.dumps(results, indent=1) + "\n")
                    runs[system][str(seed)] = results[key]
                if cfg.transfer and OBJECTIVES[objective][3]:
                    key = f"transfer|{objective}|{preset}|seed={seed}|steps={cfg.steps}|batch={cfg.micro_batch_size}|" \
                          f"lr={cfg.lr}|code={code}"
                    if key not in results:
                        results[key] = transfer(cfg, data, preset, seed, objective, steps)
                        results_path.write_text(json.dumps(results, indent=1) + "\n")
                    transfers[str(seed)] = results[key]
            name = f"{objective} {preset}, {cfg.steps} steps"
            runs, transfers = merged(earlier.get(name), code, runs, transfers)
            summary = summarise({s: {k: v["held_out_loss"] for k, v in r.items()} for s, r in runs.items()})
            cases[name] = {
                "objective": objective, "preset": preset, "steps": cfg.steps, "code_id": code, "runs": runs,
                "summary": summary, "measured_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                **({"transfer": transfers} if transfers else {})}
    # a case of another budget (steps) from an earlier invocation stays in the report, with its own code and time
    cases = {**{k: v for k, v in earlier.items() if "steps" in v and k not in cases}, **cases}
    report = {"cases": cases, "settings": {**asdict(cfg), "code_id": code},
              "unigram_control": unigram_controls({**{OBJECTIVES[o][0]: data["shards"].parent / OBJECTIVES[o][0]
                                                      for o in OBJECTIVES}, **data},
                                                   sorted({c["objective"] for c in cases.values()})),
              "machine": f"{cpu_model()}, {os.cpu_count()} cores", "wall_seconds": time.time() - t0,
              "measured_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    report_path.write_text(json.dumps(report, indent=1) + "\n")
    text = render(report)
    print(text)
    if not a.no_report:
        from bench.kit.report import write_section

        write_section(Path(a.out), TITLE, text, report, measured=report["measured_utc"])
    return 0


def merged(earlier: dict[str, Any] | None, code: str, runs: dict[str, dict[str, Any]],
           transfers: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """This invocation's runs of a case with the earlier report's runs of it under the same code: systems and seeds
    measured before stay (seeds 4-6 added later join seeds 1-3; an ablation not rerun keeps its rows), this
    invocation's win where both have a seed. A case of other code is replaced whole."""
    if not earlier or earlier.get("code_id") != code:
        return runs, transfers
    out = {s: dict(r) for s, r in earlier.get("runs", {}).items()}
    for system, by_seed in runs.items():
        out[system] = {**out.get(system, {}), **by_seed}
    return out, {**earlier.get("transfer", {}), **transfers}


def unigram_controls(data: dict[str, Path], objectives: list[str]) -> dict[str, dict[str, Any]]:
    """Per objective, what the train split's token frequencies alone score on the held-out tokens the models are
    scored on (training.evaluation.lm_controls)."""
    from training.evaluation.lm_controls import unigram_loss
    from training.models.model_kinds import KINDS

    return {o: unigram_loss(data[OBJECTIVES[o][0]], KINDS[OBJECTIVES[o][1]].shift_labels) for o in objectives}


def render_only(cfg: LearnBenchConfig, out: Path) -> int:
    from bench.kit.report import write_section

    path = Path(cfg.work, "report.json")
    if not path.exists():
        raise SystemExit(f"lmforge bench learn: no finished run under {cfg.work} ({path} is missing); run it first")
    report = json.loads(path.read_text())
    missing = sorted({c["objective"] for c in report["cases"].values()} - set(report.get("unigram_control") or {}))
    if missing:
        data = Path(report["settings"].get("data") or Path(cfg.work, "data"))
        report["unigram_control"] = {**(report.get("unigram_control") or {}), **unigram_controls(
            {OBJECTIVES[o][0]: data / OBJECTIVES[o][0] for o in missing}, missing)}
        path.write_text(json.dumps(report, indent=1) + "\n")
    text = render(report)
    print(text)
    write_section(out, TITLE, text, report, measured=report["measured_utc"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
