"""The lmforge DAG as Prefect flows: corpus -> tokenizer -> shards -> pretrain -> (labeled -> finetune
-> int8, pruned; distill; the distilled student fine-tuned with the fine-tuned teacher's soft labels)
-> evaluate and the evaluation card.

    lmforge run --name demo                              # no Prefect server needed
    PREFECT_API_URL=http://127.0.0.1:4200/api lmforge run --name demo   # shows in the UI
    lmforge run --name dapt --init-from DIR              # adopt DIR's tokenizer, continue pretraining its weights
    lmforge run --flow train --name t2 --param shards=runs/demo/shards --param tokenizer=runs/demo/tokenizer
    lmforge run --flow refresh --param crawl_root=crawl  # the next crawl snapshot (flows/refresh.py)
    lmforge run --flow train --param cluster=k8s --param nnodes=4 --param cluster_image=REGISTRY/lmforge:0.1.0
                                                         # pretraining as a Kubernetes job (also pytorchjob, slurm)

Flows: `lmforge-dag` (everything), `lmforge-train` (from existing shards), `lmforge-refresh`
(flows/refresh.py). Their parameters are flat (flows/params.py), so a run's partial parameters
merge with its deployment's.

Every task launches one stage's entry point as a subprocess (flows/stages/runner.py) and returns the stage
directory; nothing is computed here. With `cluster` other than local, the pretrain stage's entry point
(`lmforge pretrain --submit KIND`) submits the job to the cluster and follows it to its end. A stage whose
options and inputs did not change since it last finished is skipped. Each task has a timeout; retries only where a rerun is safe (every stage writes
its manifest last, and pretraining resumes from its last checkpoint) and only a failure a second try can get past
(flows/stages/runner.py `worth_retrying`: a lost worker or node, the network, a lock another run held): a stage that named bad
input fails once, in one line. Fine-tuning and distillation
run independently: evaluate reports whatever finished, then the flow fails if either did.
"""
from __future__ import annotations

import json
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.runtime import flow_run

from common.config import options_to_argv
from flows import artifacts
from flows.credentials import use_credentials
from flows.form import flow_params
from flows.params import DagParams, TrainOnlyParams, TrainParams
from flows.stages.runner import StageFailed, StagesFailed, launch_stage, progress, retry_if_transient
from pipelines.labeled.registry import SOURCES
from schemas.finetune import LABELED_FILE_OPTIONS
from schemas.manifest import read_manifest
from schemas.objectives import objective
from training.finetuning.readers import TooFewRows
from training.launch.cluster import job_name
from training.models.model_kinds import KINDS


def flow_run_name() -> str:
    """`{run_name}-{snapshot}`, or `{run_name}-{UTC date and time}`, instead of Prefect's random names."""
    p = flow_run.parameters or {}
    stamp = p.get("snapshot") or time.strftime("%Y-%m-%dT%H%M", time.gmtime())
    return f"{p.get('run_name', 'run')}-{stamp}"


@task(name="corpus", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def corpus_task(crawl: list[str], run: Path, index: Path, own_index: bool, opts: dict, beam_args: list[str],
                index_wait: float, snapshot: str = "", upstream: list[str] | None = None) -> str:
    """`upstream`: stages the crawl lies in (an ablation's shared cleaning): their manifests, not the files, decide
    whether this stage is unchanged."""
    out = run / "corpus"
    # this run's own index is rebuilt with its corpus: rerunning with other filters must not find its
    # own earlier pages "already published"; a shared index is never deleted here
    before = (lambda: shutil.rmtree(index, ignore_errors=True)) if own_index else None
    o = {"input": crawl, "output": out, "index": index, "index_wait": index_wait, "snapshot": snapshot or None, **opts}
    return launch_stage("corpus", o, out, run / "logs", argv=beam_args, raw_inputs=[] if upstream else crawl,
                        upstream=upstream or [], before_run=before)[0]


@task(name="tokenizer", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def tokenizer_task(corpus: str, run: Path, opts: dict, adopt_from: str = "") -> str:
    out = run / "tokenizer"
    if adopt_from:  # the model's tokenizer; the training options do not apply
        return launch_stage("tokenizer", {"from_model": adopt_from, "output": out}, out, run / "logs",
                            raw_inputs=[adopt_from])[0]
    return launch_stage("tokenizer", {"corpus": corpus, "output": out, **opts}, out, run / "logs", upstream=[corpus])[0]


@task(name="shards", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def shards_task(corpus: str, tokenizer: str, run: Path, opts: dict, beam_args: list[str],
                replay: list[str] = ()) -> str:
    out = run / "shards"
    return launch_stage("shards", {"corpus": corpus, "tokenizer": tokenizer, "output": out, **opts}, out, run / "logs",
                        argv=beam_args, upstream=[corpus, tokenizer, *replay])[0]


@task(name="pretrain", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def pretrain_task(shards: str, tokenizer: str, run: Path, opts: dict, nproc: int, init_from: str = "",
                  nnodes: int = 1, rdzv_endpoint: str = "", hostfile: str = "", cluster: dict | None = None) -> str:
    """Pretraining here under torchrun (as one of `nnodes`, or node 0 of `hostfile`), or, with `cluster` (the
    `--submit` options of `lmforge pretrain`), as a cluster job the stage submits and follows to its end."""
    out = run / "pretrain"
    # a retry (or a rerun after a crash) continues from the last checkpoint, bit-identically
    resume = (out / "checkpoints" / "latest").exists() and not (out / "manifest.json").exists()
    o = {"shards": shards, "tokenizer": tokenizer, "output": out, **opts, "nproc": nproc,
         **({"init_from": init_from} if init_from else {}), **({"resume": True} if resume else {})}
    if cluster:
        o.update(nnodes=nnodes, **cluster)
        progress(f"[pretrain] a {cluster['submit']} job on {nnodes} nodes: {cluster['job_name']}")
    elif hostfile:
        from training.launch.torchrun import read_hostfile

        hosts = read_hostfile(hostfile)
        o.update(hostfile=hostfile, node_rank=0, master_addr=hosts[0][0])
        for rank, (host, _) in enumerate(hosts[1:], start=1):
            progress(f"[pretrain] node {rank} of {len(hosts)} ({host}), with the same file system, runs: "
                     + shlex.join(["lmforge", "pretrain", *options_to_argv({**o, "node_rank": rank})]))
    elif nnodes > 1:
        o.update(nnodes=nnodes, rdzv_endpoint=rdzv_endpoint, rdzv_id=f"lmforge-{run.name}")
        progress(f"[pretrain] {nnodes} nodes: this worker is one; on each other node, with the same file system, run: "
                 + shlex.join(["lmforge", "pretrain", *options_to_argv(o)]))
    return launch_stage("pretrain", o, out, run / "logs", upstream=[shards, tokenizer],
                        raw_inputs=[init_from] if init_from else [])[0]


@task(name="labeled", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def labeled_task(name: str, run: Path) -> str:
    """A known source turned into files finetune reads (data.jsonl and the finetune.json that names them)."""
    out = run / "labeled" / name
    return launch_stage("labeled", {"output": out}, out, run / "logs", argv=["prepare", name])[0]


@task(name="labeled-file", retries=0)
def labeled_file_task(path: str, run: Path, opts: dict) -> str:
    """A user's labelled file checked, split where it has no split, and written as a task folder
    (`lmforge labeled file`, training/finetuning/prepare.py), as a known source is: finetune, the card and the corpus
    stage's decontamination then read the same splits. Not retried: a file that fails its checks fails again."""
    out = run / "labeled" / Path(path).name.split(".")[0]
    return launch_stage("labeled", {"output": out, **opts}, out, run / "logs", argv=["file", path],
                        raw_inputs=[path], log_name="labeled")[0]


TOO_FEW_ROWS = TooFewRows.exit_code
"""`lmforge labeled file`'s exit status for a file too small to split."""
LABELED_FILE_KEYS = LABELED_FILE_OPTIONS
"""What the run says about a labelled file's columns: options of its labeled stage, not of finetune, which reads
the task folder's own columns."""


def from_user_file(labeled: str | None) -> bool:
    """Whether `labeled` is a task folder made from a user's file (its columns are data.jsonl's own)."""
    m = Path(labeled or "", "manifest.json")
    return bool(labeled) and m.exists() and "file" in (json.loads(m.read_text()).get("config") or {})


def _labeled_source(labeled: str) -> tuple[dict, bool]:
    """(finetune's data options, whether the data is a stage's output) for a labeled stage, a config or a file."""
    prepared = Path(labeled, "finetune.json")
    source = ({"config": prepared} if prepared.exists() else {"config": labeled} if labeled.endswith(".json")
              else {"data": [labeled]})
    return source, prepared.exists()


@task(name="finetune", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def finetune_task(pretrain: str, labeled: str, run: Path, opts: dict) -> str:
    out = run / "finetune"
    source, stage_input = _labeled_source(labeled)
    return launch_stage("finetune", {"model": Path(pretrain) / "hf", **source, "output": out, **opts}, out, run / "logs",
                        upstream=[pretrain, labeled] if stage_input else [pretrain],
                        raw_inputs=[] if stage_input else [labeled])[0]


@task(name="student-finetune", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def student_finetune_task(distill: str, finetune: str, labeled: str, run: Path, opts: dict) -> str:
    """The distilled student fine-tuned on the same data with task-level distillation from the fine-tuned teacher
    (`finetune --teacher`), so the card has the student's task score beside the teacher's."""
    out = run / "student-finetune"
    source, stage_input = _labeled_source(labeled)
    return launch_stage("finetune", {"model": Path(distill) / "hf", **source, "output": out,
                                     "teacher": Path(finetune) / "hf", **opts}, out, run / "logs",
                        upstream=[distill, finetune, *([labeled] if stage_input else [])],
                        raw_inputs=[] if stage_input else [labeled], log_name="student-finetune")[0]


@task(name="distill", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def distill_task(pretrain: str, shards: str, run: Path, opts: dict) -> str:
    out = run / "distill"
    return launch_stage("distill", {"teacher": Path(pretrain) / "hf", "shards": shards, "output": out, **opts}, out,
                        run / "logs", upstream=[pretrain, shards])[0]


@task(name="evaluate", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def evaluate_task(run: Path, opts: dict, shards: str, pretrain: str, finetune: str | None, distill: str | None,
                  previous: str = "") -> str:
    out = run / "eval"
    o = {"output": out, "shards": shards, "pretrain": pretrain, "finetune": finetune or "", "distill": distill or "",
         "skip": [s for s, d in (("finetune", finetune), ("distill", distill)) if not d],
         "previous": previous, **opts}
    return launch_stage("evaluate", o, out, run / "logs",
                        upstream=[d for d in (shards, pretrain, finetune, distill) if d],
                        raw_inputs=[previous] if previous else [])[0]


@task(name="compress", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def compress_task(stage: str, run: Path, name: str, opts: dict) -> str:
    """The fine-tuned model int8-quantized or head-pruned (training/compression/compress.py) into run/<name>."""
    out = run / name
    return launch_stage("compress", {"model": Path(stage) / "hf", "output": out, **opts}, out, run / "logs",
                        upstream=[stage], raw_inputs=[opts["task_config"]] if opts.get("task_config") else [],
                        log_name=f"compress-{name}")[0]


@task(name="card", retries=1, retry_delay_seconds=10, retry_condition_fn=retry_if_transient)
def card_task(run: Path, models: dict[str, str], shards: str, task_config: str, probe_corpus: str, opts: dict) -> str:
    """`lmforge evaluate --model ...`: every model's quality and cost together (training/evaluation/card.py)."""
    out = run / "card"
    o = {"output": out, "model": list(models.values()), "name": list(models), "shards": shards, **opts,
         **({"task_config": task_config} if task_config else {}), **({"probe_corpus": probe_corpus} if probe_corpus else {})}
    stages = sorted({str(Path(m).parent) if Path(m).name == "hf" or Path(m).name.startswith("share-") else m
                     for m in models.values()})
    return launch_stage("evaluate", o, out, run / "logs", upstream=[*stages, shards, *([probe_corpus] if probe_corpus else [])],
                        raw_inputs=[task_config] if task_config else [], log_name="card")[0]


TASK_KEYS = (*LABELED_FILE_OPTIONS, "test_per_mille", "validation_per_mille", "max_validation", "max_test")
"""The fine-tune options that say which rows are the task's test and validation splits."""


def task_config(labeled: str, finetune_opts: dict, run: Path, name: str = "card-task.json") -> str:
    """The fine-tune's data as a `finetune --config` JSON, <run>/<name> (what it read, with the run's column and split
    options), so the card, head pruning and few-shot prompting score the same test and validation splits."""
    prepared = Path(labeled, "finetune.json")
    spec = (json.loads(prepared.read_text()) if prepared.exists() else
            json.loads(Path(labeled).read_text()) if labeled.endswith(".json") else {"data": [labeled]})
    spec.update({k: v for k, v in finetune_opts.items() if k in TASK_KEYS})
    path = run / name
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec, indent=1, sort_keys=True) + "\n"
    if not path.exists() or path.read_text() != text:  # unchanged: keep its mtime, so the stages reading it stay cached
        path.write_text(text)
    return str(path)


def cluster_options(p: TrainParams, run: Path) -> dict[str, Any] | None:
    """`lmforge pretrain --submit` options for `p.cluster` (None: local torchrun)."""
    if p.cluster == "local":
        return None
    o: dict[str, Any] = {"submit": p.cluster, "job_name": job_name(f"lmforge-{run.name}"),
                         # the job is cancelled a minute before the task's own timeout, so it never outlives the task
                         "cluster_timeout": max(60.0, p.stage_timeout_minutes * 60 - 60)}
    if p.cluster_gpus:
        o.update(gpus_per_node=p.cluster_gpus, nproc=p.cluster_gpus)  # one process per GPU
    if p.cluster != "slurm":
        o.update(image=p.cluster_image, shared_pvc=p.cluster_pvc, mount=p.cluster_mount_dir(),
                 namespace=p.cluster_namespace or None)
    return o


def train_and_evaluate(p: TrainParams, run: Path, shards: str, tokenizer: str, init_from: str = "",
                       previous: str = "", corpus: str | None = None, labeled: str | None = None,
                       no_task: str = "") -> dict[str, str | None]:
    """pretrain -> (labeled -> finetune -> int8, pruned), distill (-> the student fine-tuned on the task) ->
    evaluate and the card, then the
    artifacts. Shared by every flow."""
    opts = p.stage_options()
    limit = {"timeout_seconds": p.stage_timeout_minutes * 60}
    pretrain = pretrain_task.with_options(**limit)(shards, tokenizer, run, opts["pretrain"], p.nproc, init_from,
                                                   p.nnodes, p.rdzv_endpoint, p.hostfile, cluster_options(p, run))
    failed: dict[str, BaseException] = {}

    def independent(t, *args) -> str | None:
        state = t.with_options(**limit)(*args, return_state=True)
        if state.is_completed():
            return state.result()
        error = state.result(raise_on_failure=False)
        failed[t.name] = error if isinstance(error, BaseException) else RuntimeError(f"{t.name} failed: {error}")
        return None

    if labeled is None and not no_task:  # not prepared before the corpus stage (lmforge-train has none)
        labeled, no_task = prepare_labeled(p, run)
    if from_user_file(labeled):
        opts["finetune"] = {k: v for k, v in opts["finetune"].items() if k not in LABELED_FILE_KEYS}
    finetune = independent(finetune_task, pretrain, labeled, run, opts["finetune"]) if labeled else None
    distill = independent(distill_task, pretrain, shards, run, opts["distill"])
    task = task_config(labeled, opts["finetune"], run) if finetune else ""
    # the student on the task: the teacher's recipe, its first init only, no controls (the teacher's run has them)
    student_opts = {**opts["finetune"], "init": ["pretrained"], "controls": False, "lr_grid": [],
                    **opts.get("student_finetune", {})}
    student_ft = (independent(student_finetune_task, distill, finetune, labeled, run, student_opts)
                  if finetune and distill and opts.get("student_finetune") is not None else None)
    int8 = independent(compress_task, finetune, run, "int8", {"method": "int8"}) if finetune else None
    no_pruning = head_pruning(shards) if finetune else ""
    if no_pruning:
        progress(f"[compress-pruned] not run: {no_pruning}")
    pruned = independent(compress_task, finetune, run, "pruned", {"method": "prune", **opts["compress"],
                                                                   "task_config": task}) if finetune and not no_pruning else None
    evaluation = evaluate_task.with_options(**limit)(run, opts["evaluate"], shards, pretrain, finetune, distill, previous)
    artifacts.publish_eval(p.run_name, Path(evaluation))
    card_opts = dict(opts["card"])
    probe = card_opts.pop("probe", False)
    if no_pruning:
        card_opts["not_run"] = [f"the pruned model: {no_pruning}"]
    if not finetune:
        card_opts["task_note"] = no_task or "the fine-tune did not finish (see the flow's failed stages)"
    models = {"teacher": f"{pretrain}/hf", **({"student": f"{distill}/hf"} if distill else {}),
              **({"fine-tuned": f"{finetune}/hf"} if finetune else {}),
              **({"student fine-tuned": f"{student_ft}/hf"} if student_ft else {}), **({"int8": int8} if int8 else {}),
              **({f"pruned {s:.0%}": f"{pruned}/share-{s:.2f}" for s in opts["compress"]["shares"]} if pruned else {})}
    card = independent(card_task, run, models, shards, task, corpus if probe and corpus else "", card_opts)
    if card:
        artifacts.publish_card(p.run_name, Path(card), models)
    artifacts.publish_lineage(p.run_name, Path(pretrain))
    result = {"tokenizer": tokenizer, "shards": shards, "pretrain": pretrain, "labeled": labeled,
              "finetune": finetune, "distill": distill, "student_finetune": student_ft, "int8": int8, "pruned": pruned, "eval": evaluation, "card": card}
    artifacts.publish_outputs(p.run_name, result)
    if failed:
        raise StagesFailed(list(failed.values()), f"evaluate reported what finished ({evaluation}/report.md)")
    return result


def head_pruning(shards: str) -> str:
    """Empty where the fine-tuned model's attention heads can be pruned (a BERT-style encoder's), else why not: the
    shards' objective says what was pretrained (training.models.model_kinds KINDS)."""
    try:
        kind = objective(read_manifest(shards)["extra"]["objective"]).model_kind
    except (FileNotFoundError, KeyError):  # shards that do not say: the compress stage decides, in one line
        return ""
    return "" if KINDS[kind].prunes_heads else (f"head pruning is for BERT-style encoders; a fine-tuned {kind} model "
                                                "is compressed to int8 only")


def prepare_labeled(p, run: Path) -> tuple[str | None, str]:
    """(the fine-tune task's data, why there is none): prepared before the corpus stage, which checks the crawl
    against its validation and test splits: a known source or a user's labelled file as a task folder under the
    run; a task folder or a finetune config as given; None with no task. A file that fails its checks fails the
    flow here, in one line, before any stage has spent time on the crawl; a file too small for a split (exit
    TooFewRows.exit_code) leaves the run without a task, the reason on the card."""
    if not p.labeled:
        return None, "the run was given no labelled data (`lmforge run --labeled FILE`)"
    limit = {"timeout_seconds": p.stage_timeout_minutes * 60}
    if p.labeled in SOURCES:
        return labeled_task.with_options(**limit)(p.labeled, run), ""
    if Path(p.labeled, "finetune.json").exists() or p.labeled.endswith(".json"):
        return p.labeled, ""
    opts = {k: v for k, v in p.stage_options()["finetune"].items() if k in LABELED_FILE_KEYS and v}
    state = labeled_file_task.with_options(**limit)(str(Path(p.labeled).resolve()), run, opts, return_state=True)
    if state.is_completed():
        return state.result(), ""
    error = state.result(raise_on_failure=False)
    if isinstance(error, StageFailed) and error.rc == TOO_FEW_ROWS:
        progress(f"[labeled] no fine-tune task: {error.reason}")
        return None, f"{p.labeled}: {error.reason}"
    raise error


def decontamination(p, labeled: str | None, opts: dict) -> dict:
    """The corpus stage's decontaminate options: the prepared task folder's validation and test splits
    (its finetune.json names the columns), merged under any the overrides give."""
    given = dict(opts.get("decontaminate") or {})
    if given.get("files") or not p.decontaminate or not labeled or not Path(labeled, "finetune.json").exists():
        return given
    return {**given, "files": [str(labeled)]}


def corpus_stage(p, run: Path, crawl: list[str], index: Path, own_index: bool, snapshot: str = "",
                 labeled: str | None = None) -> str:
    limit = {"timeout_seconds": p.stage_timeout_minutes * 60}
    opts = dict(p.stage_options()["corpus"])
    opts.setdefault("languages", p.languages)  # an override of the corpus stage's own option wins
    decont = decontamination(p, labeled, opts)
    if decont:
        opts["decontaminate"] = decont
    corpus = corpus_task.with_options(**limit)(crawl, run, index, own_index, opts, p.beam_args, p.index_wait, snapshot)
    artifacts.publish_corpus(p.run_name, Path(corpus))
    return corpus


def token_stages(p, run: Path, corpus: str, adopt_from: str = "", replay: list[str] = (),
                 replay_fraction: float = 0.0) -> tuple[str, str]:
    opts = p.stage_options()
    if replay and replay_fraction > 0:
        opts["shards"].update(replay=list(replay), replay_fraction=replay_fraction)
    limit = {"timeout_seconds": p.stage_timeout_minutes * 60}
    tokenizer = tokenizer_task.with_options(**limit)(corpus, run, opts["tokenizer"], adopt_from)
    shards = shards_task.with_options(**limit)(corpus, tokenizer, run, opts["shards"], p.beam_args, list(replay))
    return tokenizer, shards


@flow(name="lmforge-dag", persist_result=True, log_prints=True, flow_run_name=flow_run_name)
@flow_params("Crawl in, evaluated and distilled model out; every stage writes <runs_dir>/<run_name>/<stage>/.", DagParams)
def lmforge_dag(**params: Any) -> dict[str, str | None]:
    p = DagParams(**params)
    use_credentials(p.credentials_block)
    run = p.run_dir
    run.mkdir(parents=True, exist_ok=True)
    index = Path(p.dedup_index).resolve() if p.dedup_index else run / "minhash_index"
    labeled, no_task = prepare_labeled(p, run)
    corpus = corpus_stage(p, run, p.crawl, index, own_index=not p.dedup_index, labeled=labeled)
    tokenizer, shards = token_stages(p, run, corpus, adopt_from=p.init_from)
    return {"corpus": corpus, **train_and_evaluate(p, run, shards, tokenizer, p.init_from, corpus=corpus,
                                                   labeled=labeled, no_task=no_task)}


@flow(name="lmforge-train", persist_result=True, log_prints=True, flow_run_name=flow_run_name)
@flow_params("Training from existing shards: pretrain, fine-tune and distil, evaluate.", TrainOnlyParams)
def lmforge_train(**params: Any) -> dict[str, str | None]:
    p = TrainOnlyParams(**params)
    use_credentials(p.credentials_block)
    run = p.run_dir
    run.mkdir(parents=True, exist_ok=True)
    return train_and_evaluate(p, run, str(Path(p.shards).resolve()), str(Path(p.tokenizer).resolve()), p.init_from)
