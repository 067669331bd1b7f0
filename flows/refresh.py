"""A recurring corpus refresh that continues training (the `weekly-refresh` deployment).

    lmforge run --flow refresh --param crawl_root=crawl            # the oldest snapshot not yet indexed
    lmforge run --flow refresh --param crawl_root=crawl --param snapshot=CC-MAIN-2026-40

Each run:
1. takes a snapshot folder of `crawl_root` (the named one, or the oldest not yet in the band index);
2. runs the corpus stage on it against the shared band index (`dedup_index`, outside runs/), so
   pages an earlier snapshot kept are dropped as duplicates (`kept_generation` says which);
3. stops there, saying why, when the snapshot was already in the index or nothing new was kept;
4. otherwise adopts the previous snapshot's tokenizer, continues pretraining from its model on the
   new shards (with `replay_fraction` of the earlier snapshots' pages mixed in), fine-tunes, distils, and evaluates the new model next to the previous one on the
   same held-out tokens (did the refresh help, or did it forget?);
5. writes everything under `runs/<run_name>/<snapshot>/` (earlier snapshots' folders stay) and
   switches `runs/<run_name>/latest` to it atomically once it finished.
The first snapshot trains from scratch (or from `init_from`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prefect import flow, task

from flows import artifacts
from flows.credentials import use_credentials
from flows.dag import corpus_stage, flow_run_name, prepare_labeled, token_stages, train_and_evaluate
from flows.form import flow_params
from flows.params import RefreshParams
from pipelines.corpus.snapshots import indexed_snapshots, next_snapshot
from schemas.manifest import read_manifest

LATEST = "latest"


@task(name="snapshot")
def snapshot_task(crawl_root: str, index: str, named: str) -> tuple[str | None, str]:
    snap, why = next_snapshot(crawl_root, index, named)
    print(f"snapshot: {snap or 'none'} ({why})", flush=True)
    return snap, why


def previous_run(base: Path, snap: str) -> Path | None:
    """The newest finished snapshot run before this one (what `latest` points at), if any."""
    latest = base / LATEST
    if not latest.exists():
        return None
    target = latest.resolve()
    return None if target.name == snap else target


def switch_latest(base: Path, snap: str) -> None:
    """Point `<base>/latest` at `<base>/<snap>`: a new symlink renamed over the old one (atomic on POSIX)."""
    tmp = base / f".{LATEST}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(snap)
    os.replace(tmp, base / LATEST)


def _stop(p: RefreshParams, snap: str | None, why: str) -> dict[str, Any]:
    text = f"# refresh {p.run_name}: nothing new\n\n{why}\n\nThe later stages were skipped."
    print(text.replace("\n\n", " "), flush=True)
    artifacts.publish_note(p.run_name, "refresh", text)
    return {"snapshot": snap, "status": "nothing new", "why": why}


@flow(name="lmforge-refresh", persist_result=True, log_prints=True, flow_run_name=flow_run_name)
@flow_params("Refresh: the next crawl snapshot against the shared band index, then training continued from the "
             "previous snapshot's model.", RefreshParams)
def lmforge_refresh(**params: Any) -> dict[str, Any]:
    p = RefreshParams(**params)
    use_credentials(p.credentials_block)
    index = Path(p.dedup_index).resolve()
    snap, why = snapshot_task(p.crawl_root, str(index), p.snapshot)
    if snap is None:
        return _stop(p, None, why)
    base = p.run_dir
    run = base / snap
    done = indexed_snapshots(index)
    if snap in done and (run / "eval" / "manifest.json").exists():
        return _stop(p, snap, f"snapshot {snap} is already in the band index ({done[snap]}) and its refresh finished "
                              f"({run}).")
    run.mkdir(parents=True, exist_ok=True)
    prev = previous_run(base, snap)
    prev_model = str(prev / "pretrain" / "hf") if prev else ""
    start = prev_model or p.init_from
    crawl = [str(Path(p.crawl_root, snap).resolve())]
    labeled, no_task = prepare_labeled(p, run)
    corpus = corpus_stage(p, run, crawl, index, own_index=False, snapshot=snap, labeled=labeled)
    m = read_manifest(Path(corpus))
    if m["extra"]["index"]["wrote"] is None:  # the stage ran now and found this snapshot's pages indexed
        return _stop(p, snap, f"snapshot {snap} was already in the band index {index} (indexed by another run); "
                              f"the corpus stage changed nothing ({corpus}).")
    if m["counts"]["kept"] == 0:
        return _stop(p, snap, f"snapshot {snap}: the corpus stage kept no new document "
                              f"({m['counts']['duplicates']:,} duplicates of earlier snapshots, "
                              f"{sum(m['counts']['dropped'].values()):,} dropped, {m['counts']['quarantined']:,} quarantined).")
    # earlier snapshots' corpora, in index order, for the replay sample
    earlier = [str(base / s / "corpus") for s in indexed_snapshots(index)
               if s != snap and (base / s / "corpus" / "manifest.json").exists()]
    tokenizer, shards = token_stages(p, run, corpus, adopt_from=start, replay=earlier, replay_fraction=p.replay_fraction)
    result = train_and_evaluate(p, run, shards, tokenizer, init_from=start, previous=prev_model, corpus=corpus, labeled=labeled,
                                no_task=no_task)
    switch_latest(base, snap)
    summary = (f"# refresh {p.run_name}: {snap}\n\n{why}. Continued from "
               + (f"the previous snapshot's model `{prev_model}` (its tokenizer adopted)" if prev_model
                  else f"`{p.init_from}`" if p.init_from else "scratch (first snapshot)")
               + f"; `{base / LATEST}` now points at `{snap}`.\n")
    artifacts.publish_note(p.run_name, "refresh", summary)
    return {"snapshot": snap, "status": "refreshed", "previous": str(prev) if prev else None, "corpus": corpus, **result}
