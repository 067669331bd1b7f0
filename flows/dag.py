"""The lmforge DAG as one Prefect flow: corpus -> tokenizer -> shards -> pretrain ->
(labeled -> finetune, distill) -> evaluate.

    lmforge run --name demo                          # no Prefect server needed
    PREFECT_API_URL=http://127.0.0.1:4200/api lmforge run --name demo   # shows in the UI
    lmforge run --name dapt --init-from DIR          # adopt DIR's tokenizer, continue pretraining its weights

The fine-tune task takes `labeled`: a known source (`lmforge labeled list`; the `labeled` task
prepares it first) or the user's own file or `finetune --config` JSON.

Every task launches one stage's entry point (`python -m lmforge.cli <stage> ...`) as a
subprocess and returns the stage directory; nothing is computed here. The evaluate task also
publishes eval/report.md as a Prefect markdown artifact.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from flows.presets import PRESETS
from lmforge.config import options_to_argv
from pipelines.labeled.registry import SOURCES


class DagParams(BaseModel):
    """Shown as a form in the Prefect UI."""

    run_name: str = Field("demo", description="runs/<run_name>/ receives one folder per stage")
    runs_dir: str = Field("runs", description="parent folder of all runs")
    crawl: list[str] = Field(["samples/crawl"], description="crawl inputs: files, directories or globs (WARC/WET/JSONL/Parquet)")
    labeled: str = Field("vader", description="the fine-tune task: a known labelled source prepared from its bundled "
                         "files (see `lmforge labeled list`), or a `lmforge finetune --config` JSON file naming the data "
                         "and columns, or one labelled data file (JSONL/CSV/Parquet with text, label and optional split)")
    preset: Literal["demo", "tiny"] = Field("demo", description="stage sizes: demo (bundled sample, <15 min) or tiny (tests)")
    nproc: int = Field(2, ge=1, description="pretraining processes (torchrun --nproc_per_node)")
    dedup_index: str = Field("", description="MinHash band index shared by recurring corpus refreshes: each run "
                             "drops what earlier runs kept and adds its own. Empty: a fresh runs/<run_name>/minhash_index "
                             "(this run's pages only; point a later refresh at it)")
    init_from: str = Field("", description="a Hugging Face model directory to start from: the tokenizer stage adopts its "
                           "tokenizer and pretraining continues from its weights (domain-adaptive pretraining). Empty: "
                           "train a tokenizer and a model from scratch")
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict, description="per-stage option overrides, e.g. {'pretrain': {'steps': 50}}")


def launch_stage(stage: str, opts: dict[str, Any], out: Path, argv: list[str] = ()) -> str:
    """Run `lmforge <stage> [argv] <opts as flags>` in a subprocess; its log goes to <run>/logs/<stage>.log
    and to our stdout."""
    cmd = [sys.executable, "-m", "lmforge.cli", stage, *argv, *options_to_argv(opts)]
    log_path = _run_dir(out) / "logs" / f"{stage}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    print(f"[{stage}] {' '.join(cmd[2:])}", flush=True)
    with open(log_path, "w", buffering=1) as log:  # line-buffered: tail -f works while a stage runs
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if not _noise(line):
                print(f"[{stage}] {line}", end="", flush=True)
        rc = proc.wait()
    if rc != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-40:])
        raise RuntimeError(f"stage {stage} failed (exit {rc}); full log: {log_path}\n{tail}")
    print(f"[{stage}] done in {time.time() - t0:.1f}s -> {out}", flush=True)
    return str(out)


def _run_dir(out: Path) -> Path:
    """runs/<name> for a stage directory runs/<name>/<stage> (or runs/<name>/labeled/<source>)."""
    return out.parent.parent if out.parent.name == "labeled" else out.parent


def _noise(line: str) -> bool:
    """Library chatter kept out of the flow log (it stays in logs/<stage>.log)."""
    return (line.startswith(("INFO:", "WARNING:apache_beam", "WARNING:root:", "I1", "W1"))
            or "[INFO]" in line or "apitools not found" in line or "Setting accelerator to CPU" in line
            or "Loading weights" in line or "Writing model shards" in line
            or "local_job_service: Worker: severity: WARN" in line
            or "semi_persistent_directory" in line or "Discarding unparseable args" in line)


@task(name="corpus")
def corpus_task(p: DagParams, run: Path, opts: dict) -> str:
    if p.dedup_index:
        index = Path(p.dedup_index)
    else:
        # This run's own index, rebuilt with its corpus: rerunning a run with other filters must
        # not find its own earlier pages "already published".
        index = run / "minhash_index"
        shutil.rmtree(index, ignore_errors=True)
    return launch_stage("corpus", {"input": p.crawl, "output": run / "corpus", "index": index, **opts}, run / "corpus")


@task(name="tokenizer")
def tokenizer_task(corpus: str, run: Path, opts: dict, init_from: str = "") -> str:
    if init_from:  # adopt the model's tokenizer; the training options do not apply
        return launch_stage("tokenizer", {"from_model": init_from, "output": run / "tokenizer"}, run / "tokenizer")
    return launch_stage("tokenizer", {"corpus": corpus, "output": run / "tokenizer", **opts}, run / "tokenizer")


@task(name="shards")
def shards_task(corpus: str, tokenizer: str, run: Path, opts: dict) -> str:
    return launch_stage("shards", {"corpus": corpus, "tokenizer": tokenizer, "output": run / "shards", **opts}, run / "shards")


@task(name="pretrain")
def pretrain_task(shards: str, tokenizer: str, run: Path, opts: dict) -> str:
    return launch_stage("pretrain", {"shards": shards, "tokenizer": tokenizer, "output": run / "pretrain", **opts}, run / "pretrain")


@task(name="labeled")
def labeled_task(name: str, run: Path) -> str:
    """A known source turned into files finetune reads (data.jsonl and the finetune.json that names them)."""
    out = run / "labeled" / name
    return launch_stage("labeled", {"output": out}, out, argv=["prepare", name])


@task(name="finetune")
def finetune_task(pretrain: str, labeled: str, run: Path, opts: dict) -> str:
    prepared = Path(labeled, "finetune.json")
    source = ({"config": prepared} if prepared.exists() else {"config": labeled} if labeled.endswith(".json")
              else {"data": [labeled]})
    return launch_stage("finetune", {"model": Path(pretrain) / "hf", **source, "output": run / "finetune", **opts},
                        run / "finetune")


@task(name="distill")
def distill_task(pretrain: str, shards: str, run: Path, opts: dict) -> str:
    return launch_stage("distill", {"teacher": Path(pretrain) / "hf", "shards": shards, "output": run / "distill", **opts}, run / "distill")


@task(name="evaluate")
def evaluate_task(run: Path, opts: dict, upstream: list[str]) -> str:
    out = launch_stage("evaluate", {"run": run, "output": run / "eval", **opts}, run / "eval")
    create_markdown_artifact(key="lmforge-eval-report", markdown=(Path(out) / "report.md").read_text(),
                             description=f"lmforge evaluation of {run}")
    return out


@flow(name="lmforge-dag", persist_result=True, log_prints=True)
def lmforge_dag(params: DagParams = DagParams()) -> dict[str, str]:
    """Crawl in, evaluated and distilled model out; every stage writes runs/<name>/<stage>/."""
    opts = PRESETS[params.preset]()
    for stage, extra in params.overrides.items():
        opts.setdefault(stage, {}).update(extra)
    run = Path(params.runs_dir, params.run_name).resolve()
    run.mkdir(parents=True, exist_ok=True)
    corpus = corpus_task(params, run, opts["corpus"])
    tokenizer = tokenizer_task(corpus, run, opts["tokenizer"], params.init_from)
    shards = shards_task(corpus, tokenizer, run, opts["shards"])
    start = {"init_from": params.init_from} if params.init_from else {}
    pretrain = pretrain_task(shards, tokenizer, run, {**opts["pretrain"], **start, "nproc": params.nproc})
    # finetune and distill only depend on pretrain; run them one after the other on 2 cores.
    labeled = labeled_task(params.labeled, run) if params.labeled in SOURCES else params.labeled
    finetune = finetune_task(pretrain, labeled, run, opts["finetune"])
    distill = distill_task(pretrain, shards, run, opts["distill"])
    evaluation = evaluate_task(run, opts["evaluate"], [finetune, distill])
    return {"corpus": corpus, "tokenizer": tokenizer, "shards": shards, "pretrain": pretrain, "labeled": labeled,
            "finetune": finetune, "distill": distill, "eval": evaluation}


def cli_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="lmforge run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="demo", help="run name: outputs go to <runs-dir>/<name>/ (default: demo)")
    ap.add_argument("--runs-dir", default="runs", help="parent folder of runs (default: runs)")
    ap.add_argument("--crawl", nargs="+", default=["samples/crawl"], help="crawl inputs (default: samples/crawl)")
    ap.add_argument("--labeled", default="vader", help="fine-tune task: a known source (lmforge labeled list), a finetune "
                    "--config JSON file or a labelled data file (default: vader)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="demo", help="stage sizes (default: demo)")
    ap.add_argument("--nproc", type=int, default=2, help="pretraining processes (default: 2)")
    ap.add_argument("--dedup-index", default="", help="band index shared by recurring refreshes: drop pages earlier runs "
                    "kept, add this run's (default: a fresh <runs-dir>/<name>/minhash_index)")
    ap.add_argument("--init-from", default="", help="start from this HF model directory: adopt its tokenizer and "
                    "continue pretraining its weights (default: train both from scratch)")
    a = ap.parse_args(argv)
    t0 = time.time()
    result = lmforge_dag(DagParams(run_name=a.name, runs_dir=a.runs_dir, crawl=a.crawl, labeled=a.labeled,
                                   preset=a.preset, nproc=a.nproc, dedup_index=a.dedup_index,
                                   init_from=a.init_from))
    print(f"lmforge run {a.name}: finished in {time.time() - t0:.0f}s; report: {result['eval']}/report.md")
    return 0
