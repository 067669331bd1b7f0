"""Which data choice pays: a corpus ablation as one Prefect flow, judged on the models the arms train.

    lmforge ablate                                   # the demo: 3 arms of the bundled sample, tiny preset, 3 seeds
    lmforge ablate --config ablation.json            # arms, crawl, reference set, preset, token budget, seeds, tasks
    lmforge ablate --config ablation.json --dry-run  # the arms and what each changes, checked; nothing runs

and from the Prefect UI: the `lmforge-ablate/ablate` deployment (infra/prefect/prefect.yaml), whose form has every
option below typed (arm presets and tasks as choices, custom arms as objects, bounded numbers). Either way the
options become one `AblationConfig`, which resolves the arms once, when it is made (the form's flow makes it from
its parameters; `lmforge ablate` makes it from the command line and runs it as the same lmforge-ablate flow), and
the arms' subflows receive the plan made from it (`arm_plan`), not options to resolve again.

Each arm is a set of corpus options over one crawl (flows.ablation.arms: `baseline`, `no-near-dedup`,
`no-quality-rules`, ... or your own, optionally over a crawl of its own). Comparable by construction:
- one tokenizer for every arm, trained on the corpus of `tokenizer_arm` (<name>/tokenizer);
- the same shards options for every arm, from the preset (flows/presets.py);
- the same token budget: every model trains the same number of optimizer steps of the same global batch, so
  the same number of positions; an arm whose corpus is smaller repeats it more (its epochs are reported);
- the same reference set for every held-out loss: `reference` (a JSONL file of {"id", "url", "text"}) goes through
  the corpus stage with every rule off and the shards stage with the shared tokenizer (<name>/reference), and every
  model's masked-LM loss is read on all of its rows; every arm's corpus is decontaminated against it (its pages that
  share a 12-word n-gram with a reference text are dropped), so no arm trained on what it is scored on;
- the same downstream splits: each task (`tasks`, `lmforge labeled prepare` sources) is prepared once
  (<name>/labeled/<task>) and every model fine-tuned on it with its own seed; the baseline's fine-tunes also give
  the random-init twin and the majority and TF-IDF controls.
Stages no arm changes run once (the tokenizer, the reference shards, the tasks' data, and the cleaning that arms
differing only in deduplication share: flows/ablation/cleaning.py, `share_cleaning`); then each arm is its own
subflow run, `<name>-<arm>` (flows/ablation/arm.py), `parallel_arms` at a time: <name>/arms/<arm>/{corpus,shards},
per seed seed-<s>/{pretrain,eval,tasks/<task>/finetune}. Every stage is an ordinary lmforge stage with its manifest,
skipped on a rerun when nothing it reads changed, so a finished arm costs nothing the second time and an interrupted
ablation continues where it stopped. The report (<name>/report.md, report.html, report.json, report.png;
flows.ablation.report) gives per arm the documents kept and dropped by reason, tokens trained and epochs, the
reference loss and each task score over seeds with their intervals, and their differences to the baseline paired
over seeds, in words where an interval cannot tell; the flow run shows it as artifacts. An arm that fails (its corpus
ends empty, a stage errs) fails its own subflow run with the reason; the others still run and are reported, and
`lmforge ablate` exits 1 naming it.
"""
from __future__ import annotations

import copy
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import BaseModel, Field, create_model

from common.config import opt, require
from flows.ablation.arm import arm_task, cleaning_of, corpus_of
from flows.ablation.arms import ARM_PRESETS, QUALITY_FAMILIES, changed, nest_options, resolve_arms
from flows.ablation.cleaning import share_cleaning
from flows.dag import corpus_task, labeled_task, shards_task, task_config, tokenizer_task
from flows.data_root import check_option_paths, inside_root, refuse_code_folder
from flows.form import flow_params, with_defaults
from flows.params import DEMO_CRAWL, NAME_PATTERN, ParamError, check_values
from flows.presets import RUN_PRESETS, with_objective
from pipelines.labeled.registry import SOURCES
from schemas.objectives import OBJECTIVES
from training.models.model_kinds import predicts_next

REFERENCE_CORPUS = {**{f: {"enabled": False} for f in (*QUALITY_FAMILIES, "url_filter", "pii")},
                    "exact_dedup": False, "near_dedup": False, "line_dedup": False, "num_shards": 1}
"""The reference texts pass the corpus stage as given: no rule, no dedup (language id still sorts them)."""
REFERENCE_VALID_PER_MILLE = 500
"""The shards stage needs both splits; the reference loss is read on its valid half."""


DEMO_REFERENCE = "samples/reference/news-en.jsonl"
"""The demo's reference set: newspaper4k's gold article texts in English (samples/README.md). The bundled crawl
holds their pages, so every arm's decontamination has something to drop."""


@dataclass
class AblationConfig:
    crawl: list[str] = opt(list(DEMO_CRAWL), "the crawl every arm reads (WARC/WET/JSONL/Parquet files, folders or "
                                             "globs); the default is the bundled sample", path=True)
    reference: str = opt(DEMO_REFERENCE, "held-out reference texts, a JSONL file of id/url/text: every arm's loss is "
                                         "measured on them and every arm's corpus is decontaminated against them",
                         path=True)
    arms: list[str] = opt(["baseline", "no-near-dedup", "no-quality-rules"],
                          f"arm presets ({', '.join(ARM_PRESETS)}); in --config also objects {{name, corpus, crawl}}: "
                          "corpus options over the defaults, and a crawl of the arm's own. One must be `baseline`")
    name: str = opt("ablation", "outputs under runs_dir/name/ (letters, digits, '.', '_', '-')")
    runs_dir: str = opt("runs", "where the ablation's folder goes", path=True)
    preset: str = opt("tiny", f"the run preset every arm's stages take their options from ({', '.join(RUN_PRESETS)})",
                      choices=tuple(RUN_PRESETS))
    token_budget: int = opt(0, "tokens (positions) each arm's model trains on, the same for all (0: the preset's "
                               "pretraining steps x its global batch)")
    seeds: list[int] = opt([1, 2, 3], "seeds per arm (pretraining and fine-tuning); differences are paired over them")
    tasks: list[str] = opt(["vader"], "downstream tasks (`lmforge labeled prepare` sources, prepared once): "
                           "each arm's models are fine-tuned on the same splits; the baseline's also give the "
                           "random-init twin and the majority and TF-IDF controls", choices=tuple(SOURCES))
    tokenizer_arm: str = opt("baseline", "the arm whose corpus trains the one tokenizer all arms share")
    objective: str = opt("", "what every arm's model learns (schemas.objectives), with the preset's sizes: empty "
                             "(the preset's: mlm), mlm, whole_word or span a BERT; causal a Llama-style decoder, judged "
                             "as FineWeb and DCLM rank data, by held-out perplexity on the reference set and few-shot "
                             "accuracy on each task (beside its fine-tuned score); t5_span a T5",
                         choices=("", *OBJECTIVES))
    nproc: int = opt(1, "pretraining processes per model")
    share_cleaning: bool = opt(True, "arms that differ only in deduplication read one cleaning of the crawl, run "
                                     "once (flows/ablation/cleaning.py); off: every arm cleans the crawl itself")
    parallel_arms: int = opt(2, "arms run at once, each its own subflow run (2: on 2 cores one arm's start-ups and "
                                "waits overlap another's work; more only where cores allow)")
    stage_timeout_minutes: float = opt(120.0, "a stage running longer fails (its arm is reported as failed)")

    def __post_init__(self) -> None:
        import re

        require(bool(re.match(NAME_PATTERN, self.name)), f"name {self.name!r}: letters, digits, '.', '_', '-' only")
        require(self.preset in RUN_PRESETS, f"preset must be one of {', '.join(RUN_PRESETS)}, got {self.preset!r}")
        require(bool(self.seeds) and len(set(self.seeds)) == len(self.seeds), f"seeds must be distinct, got {self.seeds}")
        require(set(self.tasks) <= set(SOURCES) and len(set(self.tasks)) == len(self.tasks),
                f"tasks must be distinct labelled sources ({', '.join(SOURCES)}), got {self.tasks}")
        require(self.token_budget >= 0, f"token_budget must be >= 0, got {self.token_budget}")
        require(self.nproc >= 1 and self.parallel_arms >= 1, "nproc and parallel_arms must be >= 1")
        require(self.stage_timeout_minutes > 0, "stage_timeout_minutes must be > 0")
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
    out = [f"ablation {cfg.name}: {len(cfg.resolved)} arms x {len(cfg.seeds)} seeds at preset {cfg.preset}"
           f"{f' with objective {cfg.objective}' if cfg.objective else ''}, "
           f"reference {cfg.reference}, tokenizer from {cfg.tokenizer_arm}, tasks {', '.join(cfg.tasks) or 'none'}"]
    for a in cfg.resolved:
        diff = changed(a, base)
        out.append(f"- {a.name}: " + ("the corpus defaults" if a is base else
                                      ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in diff.items()) or "no change"))
    if cfg.share_cleaning:
        shared = share_cleaning({a.name: {"crawl": list(a.crawl or cfg.crawl), "corpus": a.resolved} for a in cfg.resolved})
        out += [f"- {', '.join(c['arms'])}: one cleaning of the crawl, shared (they differ only in deduplication)"
                for c in shared.values()]
    return out


def read_reference(path: str) -> list[dict[str, str]]:
    """The reference texts, checked: a JSONL file of objects with a text string (ValueError naming the line)."""
    from pipelines.io import read_records

    items = []
    for where, rec in read_records(Path(path)):
        if not isinstance(rec.get("text"), str):
            raise ValueError(f"reference {path}:{where}: expected a JSON object with a text string")
        items.append({"id": str(rec.get("id", where.split()[-1])), "text": rec["text"]})
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


def arm_plan(cfg: AblationConfig, root: Path, opts: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """What every arm's subflow reads (flows/ablation/arm.py): the shared recipe (the preset's stage options, or
    `opts`), and per arm its crawl and corpus options, decontaminated against the reference set. Plain JSON: Prefect
    stores a subflow's parameters."""
    opts = with_objective(copy.deepcopy(opts) if opts else RUN_PRESETS[cfg.preset](), cfg.objective)
    ref = reference_items(cfg, root)
    arms = {a.name: {"crawl": [c if "://" in c else str(Path(c).resolve()) for c in (a.crawl or cfg.crawl)],
                     "near_dedup": bool(a.resolved.get("near_dedup")),
                     "corpus": {**opts["corpus"], **nest_options(a.corpus), "decontaminate": {"files": [ref]}}}
            for a in cfg.resolved}
    cleanings = share_cleaning(arms) if cfg.share_cleaning else {}
    return {"root": str(root.resolve()), "opts": opts, "arms": arms, "cleanings": cleanings, "seeds": list(cfg.seeds),
            "nproc": cfg.nproc,
            "token_budget": cfg.token_budget, "limit": {"timeout_seconds": cfg.stage_timeout_minutes * 60}}


def shared_stages(cfg: AblationConfig, plan: dict[str, Any]) -> None:
    """The stages no arm changes, run once: the tokenizer (on the tokenizer arm's corpus), the reference shards
    (the reference texts through the corpus stage with every rule off, then that tokenizer) and the tasks' data."""
    root, limit, opts = Path(plan["root"]), plan["limit"], plan["opts"]
    for name in plan["cleanings"]:  # before the arms, which read them (never two runs of one stage at once)
        cleaning_of(plan, name)
    tokenizer = tokenizer_task.with_options(**limit)(corpus_of(plan, cfg.tokenizer_arm), root, opts["tokenizer"])
    ref_run = root / "reference"
    ref_corpus = corpus_task.with_options(**limit)([str(Path(cfg.reference).resolve())], ref_run, None, False,
                                                   REFERENCE_CORPUS, [], 0.0)
    reference = shards_task.with_options(**limit)(ref_corpus, tokenizer, ref_run,
                                                  {**opts["shards"], "valid_per_mille": REFERENCE_VALID_PER_MILLE}, [])
    labeled = {name: labeled_task.with_options(**limit)(name, root) for name in cfg.tasks}
    # a decoder is also prompted with each task (few-shot): the test split its fine-tunes score
    few_shot = [task_config(path, {**opts["finetune"], **(opts.get("finetune_per_task") or {}).get(name, {})},
                            root / "few-shot", f"{name}.json") for name, path in labeled.items()
                ] if cfg.objective and predicts_next(cfg.objective) else []
    plan.update(tokenizer=tokenizer, reference=reference, labeled=labeled, few_shot=few_shot)


def run_arms(cfg: AblationConfig, plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every arm as its own subflow run, `parallel_arms` at a time, in the order given."""
    from prefect.futures import as_completed

    pending, running, results = [a.name for a in cfg.resolved], {}, {}
    while pending or running:
        while pending and len(running) < cfg.parallel_arms:
            arm = pending.pop(0)
            running[arm_task.submit(cfg.name, arm, plan)] = arm
        done = next(as_completed(list(running)))
        results[running.pop(done)] = done.result()
    return {a.name: results[a.name] for a in cfg.resolved}


def run_ablation(cfg: AblationConfig, opts: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The whole ablation (module docstring), with the preset's stage options or `opts` (`lmforge bench ablate`'s);
    returns {"report": report.md, "failed": {arm: reason}}."""
    from flows.ablation.outputs import publish_report, write_outputs
    from flows.ablation.report import write_report

    root = Path(cfg.runs_dir) / cfg.name
    root.mkdir(parents=True, exist_ok=True)
    for line in plan_lines(cfg):
        print(line, flush=True)
    plan = arm_plan(cfg, root, opts)
    if opts is not None:
        plan["recipe"] = "the caller's stage options"
    shared_stages(cfg, plan)
    results = run_arms(cfg, plan)
    path = write_outputs(write_report(cfg, root, results, plan), root)
    publish_report(cfg.name, root)
    print(f"ablation report: {path}", flush=True)
    return {"report": str(path), "failed": {a: r["error"] for a, r in results.items() if "error" in r}}


def _params_model() -> type[BaseModel]:
    """AblationConfig as the flow's parameters (the Prefect form): each option's help as its description, the
    choices as drop-downs, the bounds the config checks; plus custom_arms, the arms that are not presets."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(AblationConfig)
    special = {"arms": list[Literal[tuple(ARM_PRESETS)]], "preset": Literal[tuple(RUN_PRESETS)],
               "objective": Literal[("", *OBJECTIVES)],
               "tasks": list[Literal[tuple(SOURCES)]]}
    bounds = {"name": {"pattern": NAME_PATTERN}, "token_budget": {"ge": 0}, "nproc": {"ge": 1, "le": 64},
              "parallel_arms": {"ge": 1, "le": 64}, "stage_timeout_minutes": {"gt": 0}, "seeds": {"min_length": 1},
              "crawl": {"min_length": 1}}
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(AblationConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        fields[f.name] = (special.get(f.name, hints[f.name]),
                          Field(default, description=f.metadata["help"], **bounds.get(f.name, {})))
        if f.name == "arms":
            fields["custom_arms"] = (list[CustomArm], Field([], description="arms that are not presets: a name, corpus "
                                     "options over the defaults (nested, e.g. {\"gopher_quality\": {\"enabled\": false}}, "
                                     "or flat) and optionally a crawl of the arm's own (a source mixture)"))
    return create_model("AblationParams", **fields)


class CustomArm(BaseModel):
    """An arm that is not a preset (flows.ablation.arms)."""

    name: str = Field(pattern=NAME_PATTERN, description="the arm's name (letters, digits, '.', '_', '-')")
    corpus: dict[str, Any] = Field({}, description="corpus options that differ from the defaults")
    crawl: list[str] = Field([], description="the arm's own crawl (empty: the ablation's)")


AblationParams = _params_model()


def check_form(params: dict[str, Any]) -> None:
    """What a run started from the UI may name: paths inside the data root (flows/data_root.py; `lmforge ablate`'s
    own are trusted), custom arms' names, no credential in any value. ParamError otherwise."""
    check_values(params)
    for field in ("crawl", "reference", "runs_dir"):
        for value in params[field] if isinstance(params[field], list) else [params[field]]:
            inside_root(value, field)
    inside_root(str(Path(params["runs_dir"], params["name"])), "name")
    refuse_code_folder(str(Path(params["runs_dir"], params["name"])), "name")
    for arm in params["custom_arms"]:  # Prefect's form checks the pattern; a direct call or `lmforge ablate` here
        name = arm.get("name", "") if isinstance(arm, dict) else ""
        if not re.match(NAME_PATTERN, str(name)):
            raise ParamError(f"custom_arms: arm name {name!r}: one folder's name (letters, digits, '.', '_', '-'; "
                             "not dots alone)")


def check_custom_arms(custom: list[dict[str, Any]]) -> None:
    """The paths a custom arm names (its crawl, its corpus options' files) inside the data root; run once the arms are
    resolved, so an unknown option is named, with the closest one, before the paths of the known ones are checked."""
    from pipelines.corpus.config import CorpusConfig

    for arm in custom:
        for value in arm["crawl"]:
            inside_root(value, f"custom_arms[{arm['name']}].crawl")
        check_option_paths(CorpusConfig, nest_options(arm["corpus"]), f"custom_arms[{arm['name']}].corpus")


def flow_options() -> dict[str, Any]:
    """The lmforge-ablate flow's options, for the form's flow and `lmforge ablate`'s alike (arms run as subflows, up
    to parallel_arms at once; their tasks in threads)."""
    return {"name": "lmforge-ablate", "persist_result": True, "log_prints": True,
            "task_runner": ThreadPoolTaskRunner(max_workers=64)}


@flow(**flow_options(), flow_run_name="ablate-{name}")
@flow_params("Which data choice pays: the same small model trained on each arm's corpus at an equal token budget, "
             "scored on one reference set and the same downstream splits; report.md/html/json under "
             "runs_dir/name/ with intervals over seeds.", AblationParams, order=())
def lmforge_ablate(**given: Any) -> dict[str, Any]:
    params = with_defaults(AblationParams, given)
    params["custom_arms"] = [c.model_dump() if isinstance(c, BaseModel) else dict(c) for c in params["custom_arms"]]
    check_form(params)
    custom = params.pop("custom_arms")
    try:  # the arms are resolved here, once (AblationConfig.resolved); the arms' subflows receive the plan made of them
        cfg = AblationConfig(**{**params, "arms": [*params["arms"], *custom]})
    except ValueError as e:
        raise ParamError(str(e)) from None
    check_custom_arms(custom)
    return run_ablation(cfg)


def run_resolved(cfg: AblationConfig) -> dict[str, Any]:
    """`lmforge ablate`'s run: the config it checked (its arms resolved once, when it was made) run as the same
    lmforge-ablate flow the deployment starts from its form, without taking it apart into the form's parameters and
    making it again."""
    @flow(**flow_options(), flow_run_name=f"ablate-{cfg.name}")
    def lmforge_ablate_cli() -> dict[str, Any]:
        return run_ablation(cfg)

    return lmforge_ablate_cli()


def main(argv: list[str] | None = None) -> int:
    import argparse

    from common.cli import Parser
    from common.config import add_config_args, config_from_args
    from flows.data_root import trust_paths

    ap = Parser(prog="lmforge ablate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    from common.config import config_to_dict
    from flows.stages.runner import StageFailed, StagesFailed

    own_crawl = [c for a in cfg.resolved for c in a.crawl]
    trust_paths([*cfg.crawl, cfg.reference, cfg.runs_dir, *own_crawl])
    try:
        check_values(config_to_dict(cfg))  # no credential in a value the run's records would keep
        out = run_resolved(cfg)
    except (StageFailed, StagesFailed, RuntimeError, ParamError) as e:
        print(f"lmforge ablate: {e}", file=sys.stderr)
        return 1
    print(f"ablate: wrote {out['report']}")
    for arm, reason in out["failed"].items():
        print(f"lmforge ablate: arm {arm} failed ({reason.splitlines()[0][:300]}); the report has the others",
              file=sys.stderr)
    return 1 if out["failed"] else 0
