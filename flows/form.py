"""The Prefect UI's form of each flow, derived from the flow's parameter model (flows/params.py): the order of its
fields, the signature Prefect reads the form and its checks from, and the defaults a direct call leaves out."""
from __future__ import annotations

import inspect
from typing import Annotated, Any

from pydantic import BaseModel

from schemas.finetune import LABELED_FILE_OPTIONS

FORM_ORDER = ("run_name", "runs_dir", "crawl", "crawl_root", "snapshot", "shards", "tokenizer", "preset",
              "objective", "tokenizer_model", "model", "init_from", "nproc", "nnodes", "rdzv_endpoint", "hostfile",
              "cluster", "cluster_image", "cluster_pvc", "cluster_mount", "cluster_namespace", "cluster_gpus", "labeled",
              *LABELED_FILE_OPTIONS, "dedup_index", "languages", "replay_fraction", "index_wait", "decontaminate",
              "beam_args", "stage_timeout_minutes", "overrides", "credentials_block")
"""Where each field sits in the Prefect UI's form (what the run is, its inputs, the model, where it runs, the task,
the corpus options, the rest); only the order: a field's type, default, checks and help are its model's. A field not
named here follows, in its model's order."""


def flow_params(summary: str, model: type[BaseModel], order: tuple[str, ...] = FORM_ORDER):
    """Give a flow function `def f(**params)` its parameters from `model`: a keyword-only signature with each field's
    type, checks (bounds, pattern, length, choices) and default, and the docstring Prefect reads each field's help
    from (Google style "Args:"). Prefect builds the deployment's parameter schema (the UI's form, and what the
    server checks a new run against) and validates a call from the signature alone, so deriving it from the model
    states every option once; tests/unit/test_flow_schema.py checks each check reaches the schema."""
    rank = {name: i for i, name in enumerate(order)}
    fields = list(model.model_fields.items())
    fields.sort(key=lambda kv: rank.get(kv[0], len(rank)))  # stable: unranked fields keep the model's order

    def wrap(fn):
        fn.__signature__ = inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=f.get_default(call_default_factory=True),
                               annotation=Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation)
             for name, f in fields], return_annotation=inspect.signature(fn).return_annotation)
        fn.__doc__ = summary + "\n\nArgs:\n" + "\n".join(f"    {n}: {f.description}" for n, f in fields)
        return fn
    return wrap


def with_defaults(model: type[BaseModel], given: dict[str, Any]) -> dict[str, Any]:
    """A flow's parameters as its signature would bind them: the model's default for each field `given` leaves out
    (a direct call of the flow function, as the tests make, passes only what it changes)."""
    return {name: f.get_default(call_default_factory=True) for name, f in model.model_fields.items()} | given

