"""`lmforge`: one subcommand per stage, and `run` for the whole DAG.

    lmforge run --name demo                     # the whole DAG on the bundled sample (Prefect flow)
    lmforge corpus --input samples/crawl --output runs/x/corpus
    lmforge tokenizer --corpus runs/x/corpus --output runs/x/tokenizer
    lmforge shards --corpus runs/x/corpus --tokenizer runs/x/tokenizer --output runs/x/shards
    lmforge pretrain --shards runs/x/shards --tokenizer runs/x/tokenizer --output runs/x/pretrain
    lmforge finetune --model runs/x/pretrain/hf --output runs/x/finetune
    lmforge distill --teacher runs/x/pretrain/hf --shards runs/x/shards --output runs/x/distill
    lmforge evaluate --run runs/x --output runs/x/eval

Every option has --help; `--config FILE` reads options from JSON. The Beam stages (corpus,
shards) pass Beam's own options on to it (e.g. --runner, --direct_num_workers); an option neither
lmforge nor Beam knows is an error naming the closest known one, before anything runs.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from common.cli import Failed, Parser, closest, parse_strict, reject_unknown
from common.config import add_config_args, config_from_args
from flows.stage_table import STAGES, stage_entry
from schemas.manifest import StageBusy

SUMMARIES = {
    "corpus": "Beam: crawl (WARC/WET/JSONL/Parquet) -> clean, deduplicated Parquet",
    "tokenizer": "train a tokenizer (HF tokenizers: WordPiece, BPE, byte-level BPE or Unigram) on the clean corpus",
    "shards": "Beam: encode, pack and mask into Arrow token shards",
    "pretrain": "DeepSpeed ZeRO-2 pretraining, 2 processes (torchrun): BERT on MLM shards, GPT-2 on causal, T5 on t5_span",
    "finetune": "fine-tune on labelled data (classification, pairs, regression, token tags) beside the controls",
    "distill": "DistilBERT-style student from the pretrained teacher",
    "compress": "int8 dynamic quantization of a model's Linear layers, for CPU inference",
    "evaluate": "MLM loss, accuracy, parameters, throughput -> eval/report.{json,md}",
    "contamination": "check a finished corpus against evaluation sets (their validation and test items) without cleaning it again",
    "labeled": "labelled data as a task folder finetune, the card and decontamination read: labeled list | prepare NAME | file PATH",
    "run": "a Prefect flow (no server needed): the whole DAG, training from shards (--flow train), or a refresh (--flow refresh)",
    "alerts": "a Prefect automation that POSTs to a webhook when a refresh fails (needs a Prefect server)",
    "doctor": "can this node train? torch/CUDA/NCCL facts, optimizers, NCCL all-reduce, a short GPU pretraining "
              "with resume -> runs/doctor/doctor.{json,md}",
    "bench": "benchmarks against named peers -> docs/BENCHMARKS.md (bench attention | corpus | data | extraction | gpu | langid | scale | tokenizer | train | transfer)",
}


def _quiet_logs(flow: bool = False) -> None:
    """A stage: lmforge's lines to stdout, library chatter to stderr. A flow (`run`, `alerts`): Prefect's
    own console handler formats the log; only the libraries' loggers are quietened."""
    from common.logs import NOISY, setup

    if flow:
        for name in NOISY:
            logging.getLogger(name).setLevel(logging.WARNING)
    else:
        setup(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Prefect's embedded server otherwise logs an ERROR every few minutes on an offline machine
    # ("Failed to send telemetry"); export PREFECT_SERVER_ANALYTICS_ENABLED=true to send it.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def _bench(rest: list[str]) -> int:
    benches = {"attention": "bench.attention", "corpus": "bench.corpus", "data": "bench.data",
               "extraction": "bench.extraction", "gpu": "bench.gpu",
               "langid": "bench.langid", "scale": "bench.scale", "tokenizer": "bench.tokenizer",
               "train": "bench.train", "transfer": "bench.transfer"}
    if not rest or rest[0] not in benches:
        print(f"usage: lmforge bench {{{','.join(benches)}}} [--help]")
        return 0 if rest and rest[0] in ("-h", "--help") else 2
    import importlib
    from pathlib import Path

    # the benchmarks live in the checkout (bench/), not in the installed package: they need its samples and docs
    checkout = Path(__file__).resolve().parents[1]
    if not (checkout / "bench" / "__init__.py").exists():
        print(f"lmforge bench: the benchmarks are in a source checkout's bench/ folder, and {checkout} has none; "
              "run it from a git clone installed with `make setup`", file=sys.stderr)
        return 2
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    return importlib.import_module(benches[rest[0]]).main(rest[1:])


def _labeled(rest: list[str]) -> int:
    from pipelines.labeled.registry import SOURCES, describe, prepare

    ap = Parser(prog="lmforge labeled", description=SUMMARIES["labeled"])
    sub = ap.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="the known sources, with what they are")
    p = sub.add_parser("prepare", help="convert one source into data.jsonl + finetune.json + licence + manifest")
    p.add_argument("name", choices=SOURCES)
    p.add_argument("--output", required=True, help="directory to write")
    p.add_argument("--source", default=None, help="where the source's files are (default: its usual place)")
    f = sub.add_parser("file", help="a labelled file of yours (JSONL, CSV/TSV, Parquet, a datasets folder, CoNLL): "
                       "checked, split where it has no split (seeded, stratified by label), written as a task folder")
    f.add_argument("path", help="the labelled file")
    f.add_argument("--output", required=True, help="directory to write")
    f.add_argument("--task", default="classification", choices=("classification", "regression", "tokens"),
                   help="what the label is (default: %(default)s)")
    for col, default in (("text", "text"), ("text-pair", ""), ("label", "label"), ("split", "split"), ("id", "id"),
                         ("tokens", "tokens"), ("tags", "tags")):
        f.add_argument(f"--{col}-column", default=default, help=f"column of the {col.replace('-', ' ')} "
                       f"(default: {default or 'none'})")
    f.add_argument("--seed", type=int, default=0, help="seed of the split made for a file without one (default: 0)")
    f.add_argument("--test-per-mille", type=int, default=100, help="test share of such a split (default: 100 = 10%%)")
    f.add_argument("--validation-per-mille", type=int, default=100, help="validation share (default: 100 = 10%%)")
    a = parse_strict(ap, rest)
    if a.action == "list":
        for name in SOURCES:
            print(f"{name:10s} {describe(name)}")
        return 0
    try:
        if a.action == "file":
            from training.tasks.dataset import Columns
            from training.tasks.prepare import prepare_file

            cols = Columns(a.text_column, a.text_pair_column or None, a.label_column, a.split_column, a.id_column,
                           a.tokens_column, a.tags_column)
            out = prepare_file(a.path, a.output, a.task, cols, a.seed, a.test_per_mille, a.validation_per_mille)
        else:
            out = prepare(a.name, a.output, a.source)
    except (FileNotFoundError, ValueError) as e:
        print(f"lmforge labeled: error: {e}", file=sys.stderr)
        return getattr(e, "exit_code", 2)
    print(f"labeled: wrote {out} (lmforge finetune --config {out}/finetune.json --model DIR --output DIR)")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = Parser(prog="lmforge", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (*STAGES, "labeled", "run", "alerts", "bench", "doctor"):
        sub.add_parser(name, help=SUMMARIES[name], add_help=False)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    command, rest = argv[0], argv[1:]
    if command not in SUMMARIES:
        guess = closest(command, SUMMARIES)
        parser.error(f"unknown command {command!r}" + (f"; did you mean {guess!r}?" if guess else "")
                     + f"; commands: {', '.join(SUMMARIES)}")
    _quiet_logs(flow=command in ("run", "alerts"))
    if command == "run":
        from flows.run_cli import cli_main

        return cli_main(rest)
    if command == "bench":
        return _bench(rest)
    if command == "alerts":
        from flows.automations import main as alerts

        return alerts(rest)
    if command == "labeled":
        return _labeled(rest)
    if command == "doctor":
        from training.doctor import main as doctor

        return doctor(rest)
    if command in ("pretrain", "finetune", "distill", "evaluate", "compress"):
        # DeepSpeed (imported by transformers) warns when it has to guess the accelerator; tell it
        import torch

        os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")
    cls, run_fn, doc, beam = stage_entry(command)
    sp = Parser(prog=f"lmforge {command}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(sp, cls)
    if command == "pretrain":
        sp.add_argument("--nproc", type=int, default=0, help="processes per node (torchrun --nproc_per_node; default 0: "
                        "one per GPU, or 2 on CPU)")
        sp.add_argument("--accelerator", choices=("auto", "cpu", "cuda"), default="auto",
                        help="cuda: one process per GPU over NCCL; cpu: gloo, the cores shared out as torch threads; "
                             "auto: cuda if torch sees a GPU (default: %(default)s)")
        sp.add_argument("--dry-run", action="store_true", help="print the launch plan (accelerator, processes, threads, "
                        "backend, torchrun command, DeepSpeed config) as JSON and exit")
        sp.add_argument("--gpus-per-node", type=int, default=None, help="with --dry-run: plan for a node with this many "
                        "GPUs (compute capability 8.0) instead of this machine; with --emit/--submit: the GPUs each "
                        "node's job asks for, trained on with --accelerator cuda, one process per GPU unless --nproc "
                        "(needed for cuda there: without it the job gets no GPU and trains on CPU)")
        sp.add_argument("--nnodes", type=int, default=1, help="nodes: run this same command on each of them; they meet "
                        "through a c10d rendezvous at --rdzv-endpoint and must share the file system holding --shards, "
                        "--tokenizer and --output (default: 1)")
        sp.add_argument("--rdzv-endpoint", default="", help="HOST:PORT every node reaches (node 0's), with --nnodes > 1")
        sp.add_argument("--rdzv-id", default="", help="job id, the same on every node (default: derived from --output)")
        sp.add_argument("--node-rank", type=int, default=-1, help="static multi-node launch instead of a rendezvous: this "
                        "node's rank 0..nnodes-1 (as Slurm's SLURM_NODEID or a Kubernetes indexed Job's index), with "
                        "--master-addr; with --hostfile, which host of it this node is")
        sp.add_argument("--master-addr", default="", help="node 0's address for --node-rank or --hostfile launches")
        sp.add_argument("--master-port", type=int, default=29500, help="node 0's port for those (default: %(default)s)")
        sp.add_argument("--emit", choices=("k8s", "pytorchjob", "slurm"), default=None, help="print a cluster launch "
                        "file for --nnodes N nodes instead of running: k8s (a headless Service and an indexed Job, one "
                        "pod per node), pytorchjob (a Kubeflow PyTorchJob: one Master, N-1 Workers) or slurm (an sbatch "
                        "script, srun per node); each node runs this pretraining with a static rank (training/cluster.py)")
        sp.add_argument("--submit", choices=("k8s", "pytorchjob", "slurm"), default=None, help="render that file, submit "
                        "it (kubectl apply, or sbatch) and follow the job until it ends: exit 0 when it succeeded, else "
                        "an error with its state and last log lines (training/cluster_submit.py)")
        sp.add_argument("--image", default="lmforge:0.1.0", help="k8s/pytorchjob: the container image "
                        "(infra/docker/Dockerfile)")
        sp.add_argument("--shared-pvc", default="lmforge-runs", help="k8s/pytorchjob: a ReadWriteMany claim mounted at "
                        "--mount in every pod, holding the shards, tokenizer and output")
        sp.add_argument("--mount", default="/shared", help="k8s/pytorchjob: where the claim is mounted in the pods; give "
                        "paths under it (default: %(default)s)")
        sp.add_argument("--pod-cpu", default="", help="k8s/pytorchjob: CPU requested per pod, e.g. 8 or 7500m")
        sp.add_argument("--pod-memory", default="", help="k8s/pytorchjob: memory requested and limited per pod, e.g. 32Gi")
        sp.add_argument("--cpus-per-task", type=int, default=0, help="slurm: CPUs for each node's lmforge pretrain "
                        "(its processes x torch threads), as #SBATCH and srun --cpus-per-task (default 0: all the "
                        "node's CPUs; the job is --exclusive)")
        sp.add_argument("--job-name", default="lmforge-pretrain", help="with --emit/--submit: the job's name")
        sp.add_argument("--nccl-env", action="append", default=[], metavar="KEY=VALUE", help="with --emit/--submit: "
                        "set in each node's environment, repeatable: NCCL_* (NCCL_SOCKET_IFNAME=eth0, NCCL_IB_HCA=mlx5, "
                        "NCCL_DEBUG=WARN), GLOO_SOCKET_IFNAME, TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCH_NCCL_BLOCKING_WAIT "
                        "or TORCH_DISTRIBUTED_DEBUG")
        sp.add_argument("--rdma-resource", default="", metavar="NAME", help="k8s/pytorchjob: an RDMA device resource "
                        "each pod asks one of (e.g. rdma/hca, nvidia.com/hostdev), with the IPC_LOCK capability, as "
                        "root: the namespace must allow the Pod Security level privileged (infra/README.md)")
        sp.add_argument("--namespace", default="", help="with --submit k8s/pytorchjob: the namespace (default: "
                        "kubectl's current)")
        sp.add_argument("--cluster-timeout", type=float, default=0, help="with --submit: cancel the job and fail after "
                        "this many seconds (default 0: wait until it ends)")
        sp.add_argument("--cluster-poll", type=float, default=15, help="with --submit: seconds between looks at the "
                        "job's state (default: %(default)s)")
        sp.add_argument("--hostfile", default="", help="a DeepSpeed hostfile ('HOST slots=N' per node): launch with the "
                        "DeepSpeed launcher instead of torchrun, on each node with its --node-rank (no ssh needed); "
                        "processes per node come from the slots")
    if command in ("distill", "finetune"):
        sp.add_argument("--nproc", type=int, default=1, help="data-parallel processes under torchrun (the launcher "
                        "pretraining uses; gradients summed over gloo on CPU, NCCL on CUDA); each batch is split "
                        "over them, so the recipe does not change with the count (default: %(default)s)")
    if beam:
        sp.add_argument("--beam-options", dest="_beam_options", metavar="FILE", default=None,
                        help="a JSON file of Beam pipeline options (infra/beam/dataflow.json, flink.json, spark.json, "
                             "direct.json): the runner and its settings; Beam flags given on the command line win")
        ns, beam_args = sp.parse_known_args(rest)
        # what lmforge does not know goes to Beam only if Beam knows it: Beam drops an unknown option
        # with a warning, so a misspelt stage option (--line-dedupe) would run without it
        from pipelines.beam_options import beam_flags

        reject_unknown(sp, beam_args, also_known=beam_flags(beam_args))
        if ns._beam_options:
            from pipelines.beam_options import beam_args_from_file

            try:
                beam_args = beam_args_from_file(ns._beam_options) + beam_args
            except ValueError as e:
                sp.error(str(e))
    else:
        ns, beam_args = parse_strict(sp, rest), []
    try:
        cfg = config_from_args(cls, ns)
    except ValueError as e:
        sp.error(str(e))
    try:
        if command == "pretrain":
            import hashlib

            from training.launch import Nodes

            if ns.emit or ns.submit:
                from common.config import config_to_dict
                from training.cluster import ClusterSpec, env_pairs, rdma_note, render

                spec = ClusterSpec(nnodes=ns.nnodes, nproc=ns.nproc, job=ns.job_name, image=ns.image,
                                   shared_pvc=ns.shared_pvc, mount=ns.mount, gpus_per_node=ns.gpus_per_node or 0,
                                   cpu=ns.pod_cpu, memory=ns.pod_memory, port=ns.master_port,
                                   accelerator=ns.accelerator, rdma=ns.rdma_resource, nccl_env=env_pairs(ns.nccl_env),
                                   cpus_per_task=ns.cpus_per_task)
                given = config_to_dict(cfg)  # the options that differ from the defaults, so the file reads well
                base = config_to_dict(cls(shards=cfg.shards, tokenizer=cfg.tokenizer, output=cfg.output))
                opts = {k: v for k, v in given.items() if k in ("shards", "tokenizer", "output") or base[k] != v}
                text = render(ns.emit or ns.submit, opts, spec)
                if spec.rdma and (ns.emit or ns.submit) != "slurm":  # the file's header says it too
                    print(f"lmforge pretrain: {rdma_note(spec)}", file=sys.stderr)
                if ns.emit:
                    print(text, end="")
                    return 0
                import signal

                from training.cluster_submit import run_on_cluster

                # a cancelled flow sends SIGTERM: exit through Python so the job is cancelled too
                signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
                try:
                    run_on_cluster(ns.submit, text, spec.job, ns.namespace, cfg.output, ns.cluster_timeout,
                                   ns.cluster_poll)
                except (RuntimeError, TimeoutError) as e:  # JobFailed and the timeout name the job and its log tail
                    print(f"lmforge pretrain: {type(e).__name__}: {e}", file=sys.stderr)
                    return 1
                print(f"pretrain: {ns.submit} job {spec.job} succeeded; wrote {cfg.output}")
                return 0
            job = ns.rdzv_id or "lmforge-" + hashlib.sha1(os.path.abspath(cfg.output).encode()).hexdigest()[:12]
            nodes = Nodes(ns.nnodes, ns.rdzv_endpoint, job, ns.node_rank, ns.master_addr, ns.master_port, ns.hostfile)
            if ns.dry_run:
                from training.accelerator import Machine
                from training.launch import plan_text

                machine = None if ns.gpus_per_node is None else Machine(Machine.here().cpu_count,
                                                                        ((8, 0),) * ns.gpus_per_node)
                print(plan_text("training.pretrain", cfg, ns.nproc, nodes, ns.accelerator, machine))
                return 0
            out = run_fn(cfg, nproc=ns.nproc, nodes=nodes, accelerator=ns.accelerator)
        elif command in ("distill", "finetune") and ns.nproc > 1:
            from training.launch import launch

            out = launch(f"training.{command}", cfg, cfg.output, nproc=ns.nproc)
        else:
            out = run_fn(cfg, beam_args) if beam else run_fn(cfg)
    except Failed as e:  # a worker's own error, said in one line by the launcher, the tracebacks in its log
        print(f"lmforge {command}: error: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, StageBusy) as e:  # bad input named by the stage: no traceback needed
        if os.environ.get("LMFORGE_TRACEBACK"):
            raise
        print(f"lmforge {command}: error: {type(e).__name__}: {e}  (LMFORGE_TRACEBACK=1 shows where)", file=sys.stderr)
        return 2
    print(f"{command}: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
