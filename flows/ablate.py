"""Which data choice pays: a corpus ablation as one Prefect flow, judged on the models the arms train.

    lmforge ablate --config ablation.json            # arms, crawl, reference set, preset, token budget, seeds
    lmforge ablate --config ablation.json --dry-run  # the arms and what each changes, checked; nothing runs

Each arm is a set of corpus options over one crawl (flows.ablation_arms: `baseline`, `no-near-dedup`,
`no-quality-rules`, ... or your own). Comparable by construction:
- one tokenizer for every arm, trained on the corpus of `tokenizer_arm` (<name>/tokenizer);
- the same shards options for every arm, from the preset (flows/presets.py);
- the same token budget: every model trains the same number of optimizer steps of the same global batch, so
  the same number of tokens; an arm whose corpus is smaller repeats it more (its epochs are reported);
- the same reference set for every held-out loss: `reference` (a JSONL file of {"id", "url", "text"}, as the
  corpus stage reads) goes through the corpus stage with every rule off and the shards stage with the shared
  tokenizer (<name>/reference); every arm's corpus is decontaminated against it (its pages that share a
  12-word n-gram with a reference text are dropped), so no arm trained on what it is scored on.
Per arm: <name>/arms/<arm>/{corpus,shards}, per seed <name>/arms/<arm>/seed-<s>/{pretrain,eval}; every stage is an
ordinary lmforge stage with its manifest, skipped on a rerun when nothing it reads changed. The report
(<name>/report.json, report.md; flows.ablation_report) gives per arm the documents kept and dropped by reason,
tokens trained and epochs, the reference loss over seeds with its interval, and its difference to the baseline
paired over seeds. An arm whose corpus or training fails is reported as failed; the others still run.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow

from common.config import opt, require
from flows.ablation_arms import QUALITY_FAMILIES, Arm, changed, nest_options, resolve_arms
from flows.ablation_stats import steps_for_budget
from flows.dag import corpus_task, evaluate_task, pretrain_task, shards_task, tokenizer_task
from flows.presets import RUN_PRESETS
from schemas.manifest import read_manifest

REFERENCE_CORPUS = {**{f: {"enabled": False} for f in (*QUALITY_FAMILIES, "url_filter", "pii")},
                    "exact_dedup": False, "near_dedup": False, "line_dedup": False, "num_shards": 1}
"""The reference texts pass the corpus stage as given: no rule, no dedup (language id still sorts them)."""
REFERENCE_VALID_PER_MILLE = 500
"""The shards stage needs both splits; the reference loss is read on its valid half."""


@dataclass
class AblationConfig:
    crawl: list[str] = opt(help="the crawl every arm reads (WARC/WET/JSONL/Parquet files, folders or globs)", path=True)
    reference: str = opt(help="held-out reference texts, a JSONL file of id/url/text: every arm's loss is measured "
                              "on them and every arm's corpus is decontaminated against them", path=True)
    arms: list[str] = opt(["baseline", "no-near-dedup", "no-quality-rules"],
                          "arm presets (flows.ablation_arms.ARM_PRESETS); in --config also objects {name, corpus, "
                          "crawl}. One must be `baseline`")
    name: str = opt("ablation", "outputs under <runs_dir>/<name>/")
    runs_dir: str = opt("runs", "where the ablation's folder goes", path=True)
    preset: str = opt("tiny", f"the run preset every arm's stages take their options from ({', '.join(RUN_PRESETS)})")
    token_budget: int = opt(0, "tokens each arm's model trains on, the same for all (0: the preset's pretraining "
                               "steps x its global batch)")
    seeds: list[int] = opt([1, 2, 3], "pretraining seeds per arm; differences are paired over them")
    tokenizer_arm: str = opt("baseline", "the arm whose corpus trains the one tokenizer all arms share")
    nproc: int = opt(1, "pretraining processes per model")
    stage_timeout_minutes: float = opt(120.0, "a stage running longer fails (its arm is reported as failed)")

    def __post_init__(self) -> None:
        require(self.preset in RUN_PRESETS, f"preset must be one of {', '.join(RUN_PRESETS)}, got {self.preset!r}")
        require(bool(self.seeds) and len(set(self.seeds)) == len(self.seeds), f"seeds must be distinct, got {self.seeds}")
        require(self.token_budget >= 0, f"token_budget must be >= 0, got {self.token_budget}")
        require(self.nproc >= 1, f"nproc must be >= 1, got {self.nproc}")
        require(Path(self.reference).suffix == ".jsonl", f"reference {self.reference}: expected a .jsonl file of "
                                                         "id/url/text records")
        require(Path(self.reference).is_file(), f"reference {self.reference}: no such file")
        read_reference(self.reference)  # a bad line fails here, before anything runs
        self.resolved = resolve_arms(list(self.arms), list(self.crawl))  # raises, naming the arm, before anything runs
        require(self.tokenizer_arm in {a.name for a in self.resolved},
                f"tokenizer_arm {self.tokenizer_arm!r} is not one of the arms ({', '.join(a.name for a in self.resolved)})")


def plan_lines(cfg: AblationConfig) -> list[str]:
    """What `--dry-run` prints: each arm and what it changes against the baseline."""
    base = next(a for a in cfg.resolved if a.name == "baseline")
    out = [f"ablation {cfg.name}: {len(cfg.resolved)} arms x {len(cfg.seeds)} seeds at preset {cfg.preset}, "
           f"reference {cfg.reference}, tokenizer from {cfg.tokenizer_arm}"]
    for a in cfg.resolved:
        diff = changed(a, base)
        out.append(f"- {a.name}: " + ("the corpus defaults" if a is base else
                                      ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in diff.items()) or "no change"))
    return out


def read_reference(path: str) -> list[dict[str, str]]:
    """The reference texts, checked: a JSONL file of objects with a text string (ValueError naming the line)."""
    items = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = None
                if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
                    raise ValueError(f"reference {path}:line {n}: expected a JSON object with a text string")
                items.append({"id": str(rec.get("id", n)), "text": rec["text"]})
    require(bool(items), f"reference {path}: no texts")
    return items


def reference_items(cfg: AblationConfig, root: Path) -> str:
    """The reference texts as an evaluation set the corpus stage's decontamination reads (<root>/reference.jsonl:
    id, text and split "test" each); rewritten, atomically, only when they change, so the arms' corpus stages stay
    cached and a second ablation of the same name never reads half a file."""
    from schemas.manifest import atomic_write_bytes

    text = "".join(json.dumps({**r, "split": "test"}) + "\n" for r in read_reference(cfg.reference))
    path = root / "reference.jsonl"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        atomic_write_bytes(path, text.encode("utf-8"))
    return str(path.resolve())


def arm_corpus(cfg: AblationConfig, arm: Arm, root: Path, opts: dict, limit: dict) -> str:
    run = root / "arms" / arm.name
    o = {**opts["corpus"], **nest_options(arm.corpus), "decontaminate": {"files": [reference_items(cfg, root)]}}
    crawl = list(arm.crawl) or list(cfg.crawl)
    index = run / "minhash_index" if arm.resolved.get("near_dedup") else None  # the arm's own, rebuilt with it
    return corpus_task.with_options(**limit)(crawl, run, index, index is not None, o, [], 0.0)


def train_arm(cfg: AblationConfig, arm: Arm, corpus: str, tokenizer: str, reference: str, root: Path, opts: dict,
              limit: dict) -> dict[str, Any]:
    """The arm's shards, then per seed a model trained on the budget and scored on the reference shards."""
    run = root / "arms" / arm.name
    shards = shards_task.with_options(**limit)(corpus, tokenizer, run, opts["shards"], [])
    seq_len = read_manifest(Path(shards))["extra"]["seq_len"]
    per_step = cfg.nproc * int(opts["pretrain"].get("micro_batch_size", 8)) * seq_len
    steps, tokens = steps_for_budget(cfg.token_budget or int(opts["pretrain"]["steps"]) * per_step, per_step)
    seeds = {}
    for seed in cfg.seeds:
        seed_run = run / f"seed-{seed}"
        pretrain = pretrain_task.with_options(**limit)(shards, tokenizer, seed_run,
                                                       {**opts["pretrain"], "seed": seed, "steps": steps}, cfg.nproc)
        ev = evaluate_task.with_options(**limit)(seed_run, {**opts["evaluate"], "max_batches": 1000}, reference,
                                                 pretrain, None, None)
        seeds[seed] = {"pretrain": pretrain, "eval": ev}
    return {"shards": shards, "steps": steps, "positions_trained": tokens, "seeds": seeds}


@flow(name="lmforge-ablate", persist_result=True, log_prints=True)
def lmforge_ablate(config: dict[str, Any]) -> str:
    """Run an ablation (module docstring) from its options as `--config` gives them; returns the report's path."""
    from flows.ablation_report import write_report

    cfg = AblationConfig(**config)
    root = Path(cfg.runs_dir) / cfg.name
    root.mkdir(parents=True, exist_ok=True)
    opts = RUN_PRESETS[cfg.preset]()
    limit = {"timeout_seconds": cfg.stage_timeout_minutes * 60}
    for line in plan_lines(cfg):
        print(line, flush=True)
    results: dict[str, dict[str, Any]] = {}
    corpora = {}
    for arm in cfg.resolved:
        corpora[arm.name] = _attempt(results, arm.name, arm_corpus, cfg, arm, root, opts, limit)
    tok_corpus = corpora.get(cfg.tokenizer_arm)
    if not tok_corpus:
        raise RuntimeError(f"the tokenizer arm {cfg.tokenizer_arm!r} has no corpus: {results[cfg.tokenizer_arm]['error']}")
    tokenizer = tokenizer_task.with_options(**limit)(tok_corpus, root, opts["tokenizer"])
    ref_run = root / "reference"
    ref_corpus = corpus_task.with_options(**limit)([str(Path(cfg.reference).resolve())], ref_run, None, False,
                                                   REFERENCE_CORPUS, [], 0.0)
    reference = shards_task.with_options(**limit)(ref_corpus, tokenizer, ref_run,
                                                  {**opts["shards"], "valid_per_mille": REFERENCE_VALID_PER_MILLE}, [])
    for arm in cfg.resolved:
        if corpora.get(arm.name):
            results[arm.name] = _attempt(results, arm.name, train_arm, cfg, arm, corpora[arm.name], tokenizer,
                                         reference, root, opts, limit) or results[arm.name]
            results[arm.name]["corpus"] = corpora[arm.name]
    path = write_report(cfg, root, results, tokenizer, reference)
    print(f"ablation report: {path}", flush=True)
    return str(path)


def _attempt(results: dict, name: str, fn, *args) -> Any:
    """fn(*args), or None with the arm's failure recorded (the flow reports the other arms)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001  (a failed arm is a finding; the others still run)
        results[name] = {"error": f"{type(e).__name__}: {str(e)[-500:]}"}
        print(f"[ablate] arm {name} failed: {results[name]['error']}", flush=True)
        return None


def main(argv: list[str] | None = None) -> int:
    import argparse

    from common.cli import Parser
    from common.config import add_config_args, config_from_args

    ap = Parser(prog="lmforge ablate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap, AblationConfig)
    ap.add_argument("--dry-run", action="store_true", help="check the arms and print the plan; run nothing")
    ns = ap.parse_args(argv)
    dry = ns.__dict__.pop("dry_run")
    try:
        cfg = config_from_args(AblationConfig, ns)
    except ValueError as e:
        ap.error(str(e))
    if dry:
        print("\n".join(plan_lines(cfg)))
        return 0
    from flows.stages import StageFailed, StagesFailed

    given = json.loads(Path(ns._config_file).read_text()) if getattr(ns, "_config_file", None) else {}
    config = {**given, **{k: v for k, v in vars(ns).items() if v is not None and not k.startswith("_")}}
    try:
        print(f"ablate: wrote {lmforge_ablate(config)}")
    except (StageFailed, StagesFailed, RuntimeError) as e:
        print(f"lmforge ablate: {e}", file=sys.stderr)
        return 1
    return 0
