"""`lmforge run`: start one of the flows from the command line, with no Prefect server needed.

    lmforge run --name demo                              # the whole DAG (flows/dag.py)
    lmforge run --flow train --param shards=runs/demo/shards --param tokenizer=runs/demo/tokenizer
    lmforge run --flow refresh --param crawl_root=crawl  # the next crawl snapshot (flows/refresh.py)
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common.cli import Parser, parse_strict
from common.config import read_json_object
from flows import dag
from flows.dag import lmforge_dag, lmforge_train
from flows.data_root import trust_paths
from flows.params import FLOW_PARAMS, PATH_PARAMS, check_params, trust_image
from flows.refresh import lmforge_refresh
from flows.stages import runner
from flows.stages.lines import shown
from flows.stages.runner import StageFailed, StagesFailed
from pipelines.io import expand_inputs
from pipelines.labeled.registry import SOURCES
from schemas.finetune import LABELED_COLUMNS, LABELED_FILE_OPTIONS, TASKS
from schemas.manifest import read_manifest
from schemas.objectives import OBJECTIVES


def missing_inputs(flow: str, params: dict[str, Any]) -> str | None:
    """What the flow's first stages would fail on, found before the flow starts: crawl inputs matching
    no file, a shards or tokenizer stage that has not finished, a labelled-data file that is not there
    or a config that is not JSON, an init_from folder that is not there."""
    p = FLOW_PARAMS[flow](**params)
    try:
        if flow == "dag":
            expand_inputs(p.crawl)
        if flow == "train":
            read_manifest(p.shards)
            read_manifest(p.tokenizer)
        if flow == "refresh" and not Path(p.crawl_root).is_dir():
            return f"crawl_root {p.crawl_root}: no such folder"
        if p.labeled and p.labeled not in SOURCES:
            if not Path(p.labeled).exists():
                return f"labeled {p.labeled}: neither a known source ({', '.join(SOURCES)}) nor a file or folder"
            if p.labeled.endswith(".json"):
                read_json_object(p.labeled, "labeled")
        if p.init_from and not Path(p.init_from).is_dir():
            return f"init_from {p.init_from}: no such folder"
    except (FileNotFoundError, ValueError) as e:
        return str(e)
    return None


def typed_paths(flow: str, params: dict[str, Any]) -> list[Any]:
    """The paths a command line names: its path parameters' values and the run folder they make (a symlink
    `runs/<name>` of the user's is theirs too)."""
    fields = FLOW_PARAMS[flow].model_fields
    runs_dir, name = (params.get(k, fields[k].default) for k in ("runs_dir", "run_name"))
    return [*(v for k, v in params.items() if k in PATH_PARAMS for v in (v if isinstance(v, list) else [v])),
            str(Path(str(runs_dir), str(name)))]


TRACEBACK_ENV = "LMFORGE_TRACEBACK"
YOUR_OWN_DATA = """Your own data (README.md, "Your own data"):

    lmforge run --name mine --crawl wiki.jsonl --labeled tweets.csv --text-column tweet --label-column sentiment

  --crawl: WARC/WET files, JSONL (one page a line: text; id and url if you have them) or Parquet.
  --labeled: JSONL, CSV/TSV or Parquet with a text and a label column (--text-column, --label-column; pairs:
  --text-pair-column; --task regression or tokens). A split column (train/validation/test) is optional: without
  one the file is split for you (10% test, 10% validation per label, seeded) and the split written down under
  runs/NAME/labeled/. Its validation and test items are removed from the crawl before pretraining, counted per
  split on the corpus report and the card. Without --labeled: no fine-tune task; without --crawl: the demo.
  A failed run prints a line per failed stage and the flow log's path; LMFORGE_TRACEBACK=1 shows the tracebacks."""


class _NoFailureRecords(logging.Filter):
    """Keeps Prefect's failure records (task and flow tracebacks, 'Finished in state Failed') off the console;
    the flow log file and the Prefect API still get them. `quiet`: every record under WARNING too (the stages' lines,
    Prefect's task-run lines), where `lmforge run` prints one line per stage instead (flows.stages.runner.progress)."""

    def __init__(self, quiet: bool = False):
        super().__init__()
        self.quiet = quiet

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info or record.levelno >= logging.ERROR or (self.quiet and record.levelno < logging.WARNING):
            return False
        msg = record.getMessage()
        return not (msg.startswith("Finished in state") and ("Failed" in msg or "Crashed" in msg))


@contextmanager
def failures_to_file(log_path: Path, quiet: bool = False) -> Iterator[None]:
    """Everything Prefect logs, tracebacks included, into `log_path`; failures off the console (unless
    LMFORGE_TRACEBACK=1), where `lmforge run` prints a line per failed stage instead. `quiet`: the console shows
    only the stages' progress lines (flows.stages.runner.progress) and warnings; the log file still gets every line."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    file = logging.FileHandler(log_path, encoding="utf-8")
    file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    traceback = os.environ.get(TRACEBACK_ENV) == "1"
    console_filter = _NoFailureRecords(quiet and not traceback)
    consoles = [] if traceback else [h for h in root.handlers if h.__class__.__name__ == "PrefectConsoleHandler"]
    root.addHandler(file)
    for h in consoles:
        h.addFilter(console_filter)
    if console_filter.quiet:
        runner.TERMINAL.append(sys.stdout)
    try:
        yield
    finally:
        if console_filter.quiet:
            runner.TERMINAL.remove(sys.stdout)
            logging.getLogger("prefect").setLevel(logging.WARNING)  # its lines at exit ("Stopping temporary server")
        for h in consoles:
            h.removeFilter(console_filter)
        root.removeHandler(file)
        file.close()


def failure_lines(error: BaseException, flow_log: Path) -> list[str]:
    """At most 3 lines: each failed stage with its reason and log (flows.stages.runner), then where the rest is."""
    stages = error.failures if isinstance(error, StagesFailed) else [error]
    lines = [f"lmforge run: {e}" if isinstance(e, StageFailed) else f"lmforge run: error: {type(e).__name__}: "
             f"{str(e).splitlines()[0] if str(e) else ''}" for e in stages]
    if len(lines) > 2:
        lines = [*lines[:1], f"lmforge run: and {len(lines) - 1} more stages failed: "
                 + "; ".join(str(e) for e in stages[1:])]
    return [*lines, f"lmforge run: the flow run ended Failed; flow log: {flow_log} ({TRACEBACK_ENV}=1 prints the "
                    "tracebacks here)"]


def cli_main(argv: list[str]) -> int:
    flows = {"dag": lmforge_dag, "train": lmforge_train, "refresh": lmforge_refresh}
    ap = Parser(prog="lmforge run", description=dag.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog=YOUR_OWN_DATA)
    ap.add_argument("--flow", choices=sorted(flows), default="dag", help="which flow (default: dag, the whole DAG)")
    ap.add_argument("--name", default=None, help="run name: outputs go to <runs-dir>/<name>/ (default: the flow's)")
    ap.add_argument("--runs-dir", default=None, help="parent folder of runs (default: runs)")
    ap.add_argument("--crawl", nargs="+", default=None, help="crawl inputs (dag; default: samples/crawl)")
    ap.add_argument("--labeled", default=None, help="fine-tune task: your labelled file (JSONL, CSV or Parquet with a "
                    "text and a label column; a split column is optional: without one it is split for you, seeded "
                    "and stratified), a known source (lmforge labeled list) or a finetune --config JSON. Its "
                    "validation and test items are removed from the crawl before pretraining. Default: vader for "
                    "the demo (the bundled crawl), else none (no fine-tune)")
    ap.add_argument("--task", default=None, choices=TASKS,
                    help="what --labeled's label is (default: classification)")
    for c in LABELED_COLUMNS:
        ap.add_argument(f"--{c.option.replace('_', '-')}", default=None,
                        help=f"--labeled's {c.key.replace('_', ' ')} column (default: {c.default or 'none'})")
    ap.add_argument("--languages", nargs="+", default=None, metavar="CODE",
                    help="languages the corpus keeps: ISO 639-1 codes (--languages fr de), or auto (default): every "
                         "language with at least 5%% of the pages that pass cleaning, or 1,000 of them")
    ap.add_argument("--preset", default=None, help="stage sizes: demo, full (the same sample, twice the training) or tiny "
                    "(default: demo)")
    ap.add_argument("--objective", default=None, choices=OBJECTIVES,
                    help="what the model learns, and so which model: mlm (default), whole_word or span train a BERT; "
                         "causal a Llama-style decoder (byte-level BPE tokenizer), fine-tuned, distilled and scored "
                         "as a decoder; t5_span a T5 (unigram tokenizer with sentinels), scored by span-corruption "
                         "loss")
    ap.add_argument("--nproc", type=int, default=None, help="pretraining processes (default: 2)")
    ap.add_argument("--dedup-index", default=None, help="band index shared by recurring refreshes (default: a fresh "
                    "<runs-dir>/<name>/minhash_index; refresh: state/minhash_index)")
    ap.add_argument("--init-from", default=None, help="start from this HF model directory: adopt its tokenizer and "
                    "continue pretraining its weights (default: train both from scratch)")
    ap.add_argument("--credentials-block", default=None, metavar="NAME",
                    help="a Prefect Secret block holding the environment variables the stages need (object-store "
                         "keys): credentials never go in a parameter, which the Prefect server stores and shows; "
                         "or export them (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...) before running")
    ap.add_argument("--verbose", action="store_true", help="print every line the stages and Prefect log (default: one "
                    "line per stage and the warnings; the flow log, runs/NAME/logs/flow.log, has every line either way)")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="any flow parameter (see flows/params.py); VALUE is JSON when it parses, else a string, "
                         "e.g. --param overrides='{\"pretrain\": {\"steps\": 50}}' --param tokenizer_model=bpe")
    a = parse_strict(ap, argv)
    kwargs: dict[str, Any] = {k: v for k, v in (("run_name", a.name), ("runs_dir", a.runs_dir), ("crawl", a.crawl),
                                                ("labeled", a.labeled), ("languages", a.languages), ("preset", a.preset), ("nproc", a.nproc),
                                                ("objective", a.objective),
                                                ("dedup_index", a.dedup_index), ("init_from", a.init_from),
                                                ("credentials_block", a.credentials_block),
                                                *((k, getattr(a, k)) for k in LABELED_FILE_OPTIONS))
                              if v is not None}
    for item in a.param:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--param {item!r}: expected KEY=VALUE")
        try:
            kwargs[key] = json.loads(value)
        except ValueError:
            kwargs[key] = value
    fn = flows[a.flow]
    # Paths typed here are the user's own: the data root guards a shared worker against a form's parameters
    trust_paths(typed_paths(a.flow, kwargs))
    trust_image(kwargs.get("cluster_image"))
    problem = check_params(a.flow, kwargs) or missing_inputs(a.flow, kwargs)  # before any task starts: one
    if problem:                                                               # line, not a flow's traceback
        ap.error(problem)
    t0 = time.time()
    flow_log = FLOW_PARAMS[a.flow](**kwargs).run_dir / "logs" / "flow.log"
    with failures_to_file(flow_log, quiet=not a.verbose):
        try:
            result = fn(**kwargs)
        except Exception as e:
            if os.environ.get(TRACEBACK_ENV) == "1":
                raise
            print("\n".join(failure_lines(e, flow_log)), file=sys.stderr)
            return 1
    found = [f"{what}: {shown(Path(result[key], name))}" for key, what, name in
             (("card", "card", "report.md"), ("eval", "eval report", "report.md")) if isinstance(result, dict) and result.get(key)]
    print(f"lmforge run ({a.flow}): finished in {time.time() - t0:.0f}s" + "".join(f"; {x}" for x in found)
          + f"; flow log: {shown(flow_log)}")
    return 0
