"""`lmforge run`: start one of the flows from the command line, with no Prefect server needed.

    lmforge run --name demo                              # the whole DAG (flows/dag.py)
    lmforge run --flow train --param shards=runs/demo/shards --param tokenizer=runs/demo/tokenizer
    lmforge run --flow refresh --param crawl_root=crawl  # the next crawl snapshot (flows/refresh.py)
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any

from flows import dag
from flows.dag import lmforge_dag, lmforge_train
from flows.refresh import lmforge_refresh


def cli_main(argv: list[str]) -> int:
    flows = {"dag": lmforge_dag, "train": lmforge_train, "refresh": lmforge_refresh}
    ap = argparse.ArgumentParser(prog="lmforge run", description=dag.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flow", choices=sorted(flows), default="dag", help="which flow (default: dag, the whole DAG)")
    ap.add_argument("--name", default=None, help="run name: outputs go to <runs-dir>/<name>/ (default: the flow's)")
    ap.add_argument("--runs-dir", default=None, help="parent folder of runs (default: runs)")
    ap.add_argument("--crawl", nargs="+", default=None, help="crawl inputs (dag; default: samples/crawl)")
    ap.add_argument("--labeled", default=None, help="fine-tune task: a known source (lmforge labeled list), a finetune "
                    "--config JSON file or a labelled data file (default: vader)")
    ap.add_argument("--preset", default=None, help="stage sizes: demo or tiny (default: demo)")
    ap.add_argument("--nproc", type=int, default=None, help="pretraining processes (default: 2)")
    ap.add_argument("--dedup-index", default=None, help="band index shared by recurring refreshes (default: a fresh "
                    "<runs-dir>/<name>/minhash_index; refresh: state/minhash_index)")
    ap.add_argument("--init-from", default=None, help="start from this HF model directory: adopt its tokenizer and "
                    "continue pretraining its weights (default: train both from scratch)")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="any flow parameter (see flows/params.py); VALUE is JSON when it parses, else a string, "
                         "e.g. --param overrides='{\"pretrain\": {\"steps\": 50}}' --param mask_objective=span")
    a = ap.parse_args(argv)
    kwargs: dict[str, Any] = {k: v for k, v in (("run_name", a.name), ("runs_dir", a.runs_dir), ("crawl", a.crawl),
                                                ("labeled", a.labeled), ("preset", a.preset), ("nproc", a.nproc),
                                                ("dedup_index", a.dedup_index), ("init_from", a.init_from))
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
    t0 = time.time()
    result = fn(**kwargs)
    report = f"; report: {result['eval']}/report.md" if isinstance(result, dict) and result.get("eval") else ""
    print(f"lmforge run ({a.flow}): finished in {time.time() - t0:.0f}s{report}")
    return 0
