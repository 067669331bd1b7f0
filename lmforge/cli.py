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
from pathlib import Path

from common.cli import Failed, Parser, closest, parse_strict, reject_unknown
from common.config import add_config_args, config_from_args
from flows.stages.table import STAGES, stage_entry
from schemas.finetune import LABELED_COLUMNS, TASKS
from schemas.manifest import StageBusy

SUMMARIES = {
    "corpus": "Beam: crawl (WARC/WET/JSONL/Parquet) -> clean, deduplicated Parquet",
    "tokenizer": "train a tokenizer (HF tokenizers: WordPiece, BPE, byte-level BPE or Unigram) on the clean corpus",
    "shards": "Beam: encode, pack and mask into Arrow token shards",
    "pretrain": "DeepSpeed ZeRO-2 pretraining, 2 processes (torchrun): BERT on MLM shards, a Llama-style decoder on causal, T5 on t5_span",
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
    "ablate": "a corpus ablation as one flow: arms of corpus options, one tokenizer, an equal token budget, a shared reference set, a report with intervals",
    "bench": "benchmarks against named peers -> docs/BENCHMARKS.md",
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
    # a flow run without a server starts Prefect's ephemeral one and gives it 20 s: on a busy 2-core machine (three
    # runs starting together in tests/integration/test_dag_user_data.py) that was not enough
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _bench_checkout() -> bool:
    """Whether this is a source checkout with bench/, put on sys.path if so: the benchmarks live there, not in the
    installed package, since they need its samples and docs."""
    checkout = Path(__file__).resolve().parents[1]
    if not (checkout / "bench" / "registry.py").exists():
        return False
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    return True


def _bench_summary() -> str:
    """The line of `lmforge --help` for bench, with the benchmarks' names (bench/registry.py) where there are any."""
    if not _bench_checkout():
        return SUMMARIES["bench"]
    from bench.registry import BENCHES

    return f"{SUMMARIES['bench']} (bench {' | '.join(b.name for b in BENCHES)})"


def _bench(rest: list[str]) -> int:
    """`lmforge bench <name> [options]`: the registry's module runs it; `--make`: what `make bench` runs."""
    if not _bench_checkout():
        print(f"lmforge bench: the benchmarks are in a source checkout's bench/ folder, and "
              f"{Path(__file__).resolve().parents[1]} has none; run it from a git clone installed with `make setup`",
              file=sys.stderr)
        return 2
    import importlib

    from bench.registry import BENCHES, bench, make_runs

    if rest[:1] == ["--make"]:
        return _bench_make(make_runs(), rest[1:])
    names = [b.name for b in BENCHES]
    if not rest or rest[0] not in names:
        print(f"usage: lmforge bench {{{','.join(names)}}} [--help]\n"
              "       lmforge bench --make [--dry-run]    what `make bench` runs, in order")
        wants_help = bool(rest) and rest[0] in ("-h", "--help")
        if wants_help:
            width = max(map(len, names))
            for b in BENCHES:
                runs = "" if b.make is None else f" (make bench{': ' + ' '.join(b.make) if b.make else ''})"
                print(f"  {b.name:{width}s}  {b.summary}{runs}")
        return 0 if wants_help else 2
    return importlib.import_module(bench(rest[0]).module).main(rest[1:])


def _bench_make(runs: list[tuple[str, ...]], rest: list[str]) -> int:
    """Each benchmark `make bench` runs, in order, each in a process of its own as the Makefile's lines ran them;
    the first that fails stops the rest, with its exit status."""
    import shlex
    import subprocess

    if rest not in ([], ["--dry-run"]):
        print(f"usage: lmforge bench --make [--dry-run]; not {shlex.join(rest)}", file=sys.stderr)
        return 2
    for argv in runs:
        print(f"$ lmforge bench {shlex.join(argv)}", flush=True)
        if rest:
            continue
        rc = subprocess.run([sys.executable, "-m", "lmforge.cli", "bench", *argv]).returncode
        if rc != 0:
            print(f"lmforge bench --make: `lmforge bench {shlex.join(argv)}` failed (exit {rc}); "
                  "the benchmarks after it did not run", file=sys.stderr)
            return rc
    return 0


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
    f.add_argument("--task", default="classification", choices=TASKS,
                   help="what the label is (default: %(default)s)")
    for c in LABELED_COLUMNS:
        f.add_argument(f"--{c.option.replace('_', '-')}", default=c.default,
                       help=f"column of the {c.key.replace('_', ' ')} (default: {c.default or 'none'})")
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
            from training.finetuning.dataset import Columns
            from training.finetuning.prepare import prepare_file

            cols = Columns.of(vars(a))
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
    wants_help = not argv or argv[0] in ("-h", "--help")
    for name in (*STAGES, "labeled", "run", "ablate", "alerts", "bench", "doctor"):
        summary = _bench_summary() if name == "bench" and wants_help else SUMMARIES[name]
        sub.add_parser(name, help=summary, add_help=False)
    if wants_help:
        parser.print_help()
        return 0
    command, rest = argv[0], argv[1:]
    if command not in SUMMARIES:
        guess = closest(command, SUMMARIES)
        parser.error(f"unknown command {command!r}" + (f"; did you mean {guess!r}?" if guess else "")
                     + f"; commands: {', '.join(SUMMARIES)}")
    _quiet_logs(flow=command in ("run", "ablate", "alerts"))
    if command == "run":
        from flows.run_cli import cli_main

        return cli_main(rest)
    if command == "bench":
        return _bench(rest)
    if command == "ablate":
        from flows.ablation.ablate import main as ablate

        return ablate(rest)
    if command == "alerts":
        from flows.deploy.automations import main as alerts

        return alerts(rest)
    if command == "labeled":
        return _labeled(rest)
    if command == "doctor":
        from training.doctor.node import main as doctor

        return doctor(rest)
    if command in ("pretrain", "finetune", "distill", "evaluate", "compress"):
        # DeepSpeed (imported by transformers) warns when it has to guess the accelerator; tell it (Machine asks torch
        # only where a GPU can be: `lmforge pretrain` only launches its workers)
        if "DS_ACCELERATOR" not in os.environ:
            from training.runtime.accelerator import Machine

            os.environ["DS_ACCELERATOR"] = "cuda" if Machine.here().gpus else "cpu"
        from common.cache import torch_extensions_dir

        os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(torch_extensions_dir()))  # this environment's own
    return _stage(command, rest)


def _stage(command: str, rest: list[str]) -> int:
    """`lmforge <stage> [options]`: parse and validate its config, run it, say where it wrote in one line."""
    from flows.stages.table import STAGE_TABLE

    cls, run_fn, doc = stage_entry(command)
    beam = STAGE_TABLE[command].beam
    sp = Parser(prog=f"lmforge {command}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(sp, cls)
    if command == "pretrain":
        from training.launch.command import add_launch_args

        add_launch_args(sp)
    if command in ("distill", "finetune"):
        sp.add_argument("--nproc", type=int, default=1, help="data-parallel processes under torchrun (the launcher "
                        "pretraining uses; gradients summed over gloo on CPU, NCCL on CUDA); each batch is split "
                        "over them, so the recipe does not change with the count (default: %(default)s)")
    ns, beam_args = _parse_beam(sp, rest) if beam else (parse_strict(sp, rest), [])
    try:
        cfg = config_from_args(cls, ns)
    except ValueError as e:
        sp.error(str(e))
    try:
        if command == "pretrain":
            from training.launch.command import LaunchOptions, pretrain_command

            out = pretrain_command(cfg, LaunchOptions.from_args(ns))
            if isinstance(out, int):  # a file emitted, a cluster job followed, a plan printed
                return out
        elif command in ("distill", "finetune") and ns.nproc > 1:
            from flows.stages.table import check_inputs
            from training.launch.torchrun import launch

            check_inputs(command, cfg)
            out = launch(STAGE_TABLE[command].module, cfg, cfg.output, nproc=ns.nproc)
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


def _parse_beam(sp: argparse.ArgumentParser, rest: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """A Beam stage's own options, and Beam's (`--beam-options FILE` first, the command line's winning)."""
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
    return ns, beam_args

if __name__ == "__main__":
    sys.exit(main())
