"""One arm of a corpus ablation (flows/ablation/ablate.py) as its own Prefect subflow run, `<ablation>-<arm>`.

Its stages, each an ordinary lmforge stage with its manifest under <root>/arms/<arm>/ (skipped on a rerun when
nothing it reads changed, so a finished arm costs nothing the second time):
  corpus   the arm's corpus options over its crawl, decontaminated against the reference set; an arm that differs
           from others only in deduplication reads the cleaning they share instead (<root>/cleaned/<first arm>,
           flows/ablation/cleaning.py) and deduplicates it its own way
  shards   the shared tokenizer, the preset's shards options
  per seed (seed-<s>/): pretrain (the steps that make the ablation's token budget), eval (the language-model loss
           on the reference shards, all of their rows; a decoder's also its few-shot accuracy on each task's test
           split), and per downstream task tasks/<task>/finetune: the model
           fine-tuned with that seed on the task's shared splits. The baseline's fine-tunes also train the random-init
           twin (init scratch) and score the majority and TF-IDF controls: they do not depend on the arm.
An arm that fails (an empty corpus, a stage that errs) ends its subflow run Failed with the reason; `arm_task`
hands that to the ablation as the arm's error, so the other arms still run and the report lists it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.context import FlowRunContext

from flows.ablation.cleaning import after_cleaning, data_dir, merged_counts
from flows.ablation.stats import steps_for_budget
from flows.dag import corpus_task, evaluate_task, finetune_task, pretrain_task, shards_task
from schemas.manifest import read_manifest


def cleaning_of(plan: dict[str, Any], name: str) -> str:
    """A cleaning several arms share (flows/ablation/cleaning.py), run once, or skipped when finished."""
    c = plan["cleanings"][name]
    return corpus_task.with_options(**plan["limit"])(c["crawl"], Path(plan["root"], "cleaned", name), None, False,
                                                     c["corpus"], [], 0.0)


def corpus_of(plan: dict[str, Any], arm: str) -> str:
    """The arm's corpus stage (run, or skipped when finished): the arm's options over its crawl, or, where it shares
    a cleaning with other arms, its own deduplication over that cleaning's documents."""
    a = plan["arms"][arm]
    run = Path(plan["root"], "arms", arm)
    index = run / "minhash_index" if a["near_dedup"] else None  # the arm's own, rebuilt with its corpus
    run_corpus = corpus_task.with_options(**plan["limit"])
    if not a.get("cleaned"):
        return run_corpus(a["crawl"], run, index, index is not None, a["corpus"], [], 0.0)
    cleaned = cleaning_of(plan, a["cleaned"])
    require_documents(arm, cleaned)
    return run_corpus([data_dir(cleaned)], run, index, index is not None, after_cleaning(a["corpus"]), [], 0.0,
                      upstream=[cleaned])


def corpus_counts(corpus: str, cleaned: str | None = None) -> dict[str, Any]:
    """The arm's corpus counts; with a shared cleaning, the cleaning's and the arm's together."""
    counts = read_manifest(Path(corpus))["counts"]
    if not cleaned:
        return counts
    return merged_counts(read_manifest(Path(cleaned))["counts"], counts, f"{corpus} over {cleaned}")


def finetune_options(plan: dict[str, Any], arm: str, seed: int, task: str) -> dict[str, Any]:
    """The preset's fine-tune options for one seed and task (with the recipe's per-task overrides,
    opts["finetune_per_task"][task], the same for every arm); the baseline's also train the random-init twin and
    score the controls (the same architecture, tokenizer and splits for every arm, so once is enough)."""
    base = arm == "baseline"
    per_task = (plan["opts"].get("finetune_per_task") or {}).get(task, {})
    return {**plan["opts"]["finetune"], **per_task, "seeds": [seed], "init": ["pretrained", "scratch"] if base else ["pretrained"],
            "controls": base}


def cleaned_dir(plan: dict[str, Any], arm: str) -> str | None:
    """The shared cleaning the arm's corpus reads (its corpus stage folder), if any."""
    name = plan["arms"][arm].get("cleaned")
    return str(Path(plan["root"], "cleaned", name, "corpus")) if name else None


def require_documents(arm: str, corpus: str, cleaned: str | None = None) -> None:
    """An arm whose corpus kept nothing fails here, saying what dropped its documents (not later, in shards)."""
    counts = corpus_counts(corpus, cleaned)
    if not counts.get("kept"):
        top = sorted((counts.get("dropped") or {}).items(), key=lambda kv: -kv[1])[:3]
        raise RuntimeError(f"arm {arm}: its corpus kept no document of {counts.get('in', 0)} ("
                           + (", ".join(f"{k} {v}" for k, v in top) or "nothing read") + f"; {corpus})")


@flow(name="lmforge-ablation-arm", persist_result=True, log_prints=True, flow_run_name="{ablation}-{arm}")
def ablation_arm(ablation: str, arm: str, plan: dict[str, Any]) -> dict[str, Any]:
    """One arm's corpus, shards and per-seed models (pretrained on the ablation's token budget, scored on the
    reference set, fine-tuned on each task); returns the stage directories the report reads."""
    limit, opts = plan["limit"], plan["opts"]
    run = Path(plan["root"], "arms", arm)
    corpus, cleaned = corpus_of(plan, arm), cleaned_dir(plan, arm)
    require_documents(arm, corpus, cleaned)
    shards = shards_task.with_options(**limit)(corpus, plan["tokenizer"], run, opts["shards"], [])
    seq_len = read_manifest(Path(shards))["extra"]["seq_len"]
    per_step = plan["nproc"] * int(opts["pretrain"].get("micro_batch_size", 8)) * seq_len
    steps, positions = steps_for_budget(plan["token_budget"] or int(opts["pretrain"]["steps"]) * per_step, per_step)
    seeds: dict[str, dict[str, Any]] = {}
    for seed in plan["seeds"]:
        seed_run = run / f"seed-{seed}"
        pretrain = pretrain_task.with_options(**limit)(shards, plan["tokenizer"], seed_run,
                                                       {**opts["pretrain"], "seed": seed, "steps": steps}, plan["nproc"])
        ev = evaluate_task.with_options(**limit)(seed_run, {**opts["evaluate"], "max_batches": 0, "split": "all",
                                                            "few_shot": plan.get("few_shot", [])},
                                                 plan["reference"], pretrain, None, None)
        tasks = {name: finetune_task.with_options(**limit)(pretrain, labeled, seed_run / "tasks" / name,
                                                            finetune_options(plan, arm, seed, name))
                 for name, labeled in plan["labeled"].items()}
        seeds[str(seed)] = {"pretrain": pretrain, "eval": ev, "tasks": tasks}
        print(f"[{arm}] seed {seed}: pretrained {steps} steps, scored, fine-tuned on {', '.join(tasks) or 'no task'}",
              flush=True)
    me = FlowRunContext.get().flow_run
    return {"corpus": corpus, "cleaned": cleaned, "shards": shards, "steps": steps, "positions_trained": positions, "seeds": seeds,
            "flow_run": {"name": me.name, "id": str(me.id)}}


@task(name="arm", retries=0)
def arm_task(ablation: str, arm: str, plan: dict[str, Any]) -> dict[str, Any]:
    """The arm's subflow run; its failure comes back as {"error": reason} (the ablation reports the other arms)."""
    state = ablation_arm(ablation, arm, plan, return_state=True)
    if state.is_completed():
        return state.result()
    reason = re.sub(r"^Flow run encountered an exception: (\w+(Error|Failed): )?", "", state.message or state.name)
    print(f"[ablate] arm {arm} failed: {reason}", flush=True)
    return {"error": reason[-800:], "flow_run": {"name": f"{ablation}-{arm}", "id": str(state.state_details.flow_run_id)}}
