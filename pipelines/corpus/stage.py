"""Driver for the corpus stage: prepare the directory, run the Beam pipeline, reconcile, manifest."""
from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from pathlib import Path

from common.config import config_to_dict
from common.redact import redact_args
from pipelines.beam_options import check_worker_paths, expand_runner_alias, runner_name
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.dedup import MINHASH_SCHEME, detection_probability, lsh_params
from pipelines.corpus.index import commit, index_lock, open_index, snapshot_fingerprint
from pipelines.corpus.report import warnings, write_report
from pipelines.corpus.staging import STAGING, staging_dir
from pipelines.corpus.steps import decontaminate
from pipelines.corpus.steps.language import language_verdicts
from pipelines.corpus.steps.url_filter import url_filter_provenance, url_lists
from pipelines.io import expand_inputs, parquet_rows
from schemas import storage
from schemas.manifest import MANIFEST_NAME, InputRef, Manifest, describe_outputs, stage_lock, write_manifest

SUBDIRS = ("data", "dropped", "duplicates", "quarantine", "matches")  # matches/: what a step matched on a page it kept


IN_MEMORY_UP_TO_BYTES = 16 << 20
"""Input bytes (files as stored, compressed or not) up to which the corpus stage runs in_memory by default:
below that the worker processes take longer to start than they save (see auto_mode)."""


def direct_workers() -> int:
    """Worker processes for multi_processing: every core this process may use (at least 2)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, cores)


def auto_mode(input_bytes: int) -> str:
    """The DirectRunner mode the corpus stage picks when not told: `in_memory` (one process) for inputs up
    to IN_MEMORY_UP_TO_BYTES, else `multi_processing` with a worker per core (direct_workers). Measured
    on 2 cores, whole `lmforge corpus` runs: the demo crawl (11 MB of WARC.gz, 2,518 records) 10.8 s
    in_memory against 11.4 s with 2 workers (starting them about cancels their gain); 20,000 real
    documents (40 MB of JSONL.gz, 131 MB of text; bench corpus's end-to-end input) 42.9 s against 27.2 s."""
    return "in_memory" if input_bytes <= IN_MEMORY_UP_TO_BYTES else "multi_processing"


def default_beam_args(beam_args: list[str], mode: str = "multi_processing") -> list[str]:
    """DirectRunner defaults unless the caller chose otherwise: `mode` with a worker per core
    (multi_processing, direct_workers) or 1 (in_memory).

    History of the multi-process mode. On 2026-11-23 (Beam 2.77) multi_processing with 2 workers lost
    records inside the near-dedup joins at 100k documents in repeated runs (the semi-join kept 8,641
    of 17,929 candidate nodes' hashes; in_memory kept all), and multi_threading lost records after
    GroupByKey. After the machine's environment was rebuilt (the same Beam) it did not happen again:
    the same 100k input in multi_processing with 2 workers reconciled and wrote the bytes of in_memory
    in every run since (6 of 6 by 2026-11-25, bench scale --modes), and no cause was found in lmforge
    (every shuffle key is str, bytes, int or a tuple of those under a deterministic coder; no DoFn
    keeps state between bundles; no residual roots). A DirectRunner loss with more than one worker
    that does exist in Beam 2.77 (deferred work of splittable DoFns dropped;
    tests/integration/test_direct_runner.py) touches no step of these pipelines. The corpus stage's
    paired counters (check_shuffles, check_dedup_tallies) and its reconciliation check every run
    and refuse to write a manifest on any loss, so the stage uses every core for inputs large enough
    to gain from it (auto_mode); `--direct_running_mode=in_memory` is one option away.
    """
    args = expand_runner_alias(beam_args)  # --runner=DaskRunner -> its module path
    if not any(a.startswith("--direct_running_mode") for a in args):
        args.append(f"--direct_running_mode={mode}")
    if not any(a.startswith("--direct_num_workers") for a in args):
        args.append("--direct_num_workers=" + ("1" if "--direct_running_mode=in_memory" in args else str(direct_workers())))
    if "multi_threading" in " ".join(args):
        raise ValueError("direct_running_mode=multi_threading lost records after GroupByKey on this machine; "
                         "use in_memory or multi_processing")
    return args


def prepare_dir(out: str) -> None:
    """Remove the manifest first (the directory stops looking complete), then stale outputs."""
    storage.make_dirs(out)
    storage.remove(storage.join(out, MANIFEST_NAME))
    for sub in (*SUBDIRS, "report", STAGING):
        storage.remove_tree(storage.join(out, sub))
    for f in ("_tally.jsonl", "report.json", "report.html"):
        storage.remove(storage.join(out, f))


def _tally(out: str) -> dict[str, int]:
    path = storage.join(out, "_tally.jsonl")
    return {r["id"]: r["n"] for r in map(json.loads, storage.read_text(path).splitlines())} if storage.is_file(path) else {}


def collect_counts(out: str) -> dict:
    """Counts from what was written, so the manifest describes the files, not the intentions."""
    tally = _tally(out)
    kept_by_lang = Counter()
    for f in storage.files_under(storage.join(out, "data"), "*/*.parquet"):
        kept_by_lang[storage.name(storage.parent(f))] += parquet_rows(f)
    dropped, dropped_by_lang = Counter(), Counter()
    for f in storage.files_under(storage.join(out, "dropped"), "*.parquet"):
        t = storage.parquet_file(f).read(columns=["reason", "language"]).to_pydict()
        dropped.update(t["reason"])
        dropped_by_lang.update(zip(t["language"], t["reason"]))
    dups, dups_by_gen = Counter(), Counter()
    for f in storage.files_under(storage.join(out, "duplicates"), "*.parquet"):
        t = storage.parquet_file(f).read()
        dups.update(t.column("kind").to_pylist())
        if "kept_generation" in t.column_names:  # which index generation holds the copy kept (None: this run)
            dups_by_gen.update("this run" if g is None else f"gen-{g:05d}" for g in t.column("kept_generation").to_pylist())
    quarantined = Counter()
    for f in storage.files_under(storage.join(out, "quarantine"), "*.jsonl"):
        quarantined.update(json.loads(line)["reason"] for line in storage.read_text(f).splitlines())
    counts = {
        "in": tally.get("in", 0),
        "kept": sum(kept_by_lang.values()),
        "kept_by_language": dict(sorted(kept_by_lang.items())),
        "dropped": dict(sorted(dropped.items())),
        "dropped_by_language": _nested(dropped_by_lang),
        "cleaned_by_language": {k.split(":", 1)[1]: v for k, v in sorted(tally.items()) if k.startswith("cleaned_language:")},
        "duplicates": sum(dups.values()),
        "duplicates_by_kind": dict(sorted(dups.items())),
        "duplicates_by_generation": dict(sorted(dups_by_gen.items())),
        "quarantined": sum(quarantined.values()),
        "quarantined_by_reason": dict(sorted(quarantined.items())),
        "noted": {k.split(":", 1)[1]: v for k, v in sorted(tally.items()) if k.startswith("noted:")},
        "skipped_non_document_records": {k.split(":", 1)[1]: v for k, v in sorted(tally.items()) if k.startswith("skipped_record_type:")},
    }
    return counts


def _nested(pairs: Counter) -> dict[str, dict[str, int]]:
    """{(language, reason): n} -> {language: {reason: n}}, languages by their total, largest first ("none": no text)."""
    out: dict[str, dict[str, int]] = {}
    for (lang, reason), n in sorted(pairs.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        out.setdefault(lang or "none", {})[reason] = n
    return dict(sorted(out.items(), key=lambda kv: -sum(kv[1].values())))


def languages_line(cfg: CorpusConfig, counts: dict) -> str:
    """`languages kept: fr 190, de 150 (auto: ...); left out: ...`: what the stage kept and, with auto, what it did not."""
    kept = ", ".join(f"{k} {v:,}" for k, v in sorted(counts["kept_by_language"].items(), key=lambda kv: -kv[1])) or "none"
    if not cfg.language_id:
        return f"languages: not identified (--no-language-id): kept {kept}"
    if not cfg.auto_languages:
        return f"languages kept: {kept} (--languages {' '.join(cfg.languages)})"
    cleaned = counts["cleaned_by_language"]
    out = [k for k, why in language_verdicts(cleaned, cfg.auto_language_share, cfg.auto_language_documents).items() if why]
    left = ", ".join(f"{k} {cleaned[k]:,}" for k in sorted(out, key=lambda k: -cleaned[k])[:8])
    return (f"languages kept: {kept} (auto: >= {cfg.auto_language_share:.0%} or >= {cfg.auto_language_documents:,} of the "
            f"documents that passed cleaning)" + (f"; left out: {left}{' ...' if len(out) > 8 else ''}" if out else ""))


def contamination_details(out: str) -> list[tuple[str, str]]:
    """(action, detail JSON) of every page the decontamination step flagged: dropped rows with its
    reason, and matches/ rows of its kind (mark mode)."""
    found = []
    for f in storage.files_under(storage.join(out, "dropped"), "*.parquet"):
        t = storage.parquet_file(f).read(columns=["reason", "detail"]).to_pydict()
        found += [("dropped", d) for r, d in zip(t["reason"], t["detail"]) if r == decontaminate.REASON and d]
    for f in storage.files_under(storage.join(out, "matches"), "*.jsonl"):
        rows = map(json.loads, storage.read_text(f).splitlines())
        found += [("kept", r["detail"]) for r in rows if r["kind"] == decontaminate.REASON]
    return found


def reconcile(counts: dict) -> None:
    accounted = counts["kept"] + sum(counts["dropped"].values()) + counts["duplicates"] + counts["quarantined"]
    if accounted != counts["in"]:
        raise RuntimeError(f"corpus counts do not reconcile: in={counts['in']} but kept+dropped+duplicates+"
                           f"quarantined={accounted}; records were lost or double-counted: {counts}")


def check_dedup_tallies(tally: dict[str, int]) -> None:
    """Every node of a candidate edge carries its shingle hashes through three joins; a node
    that arrives without them means a shuffle lost records, and near-duplicates would be kept
    silently. Document counts cannot show that (the documents themselves were not lost)."""
    by_join = {k.partition(":")[2] or "a join": n for k, n in tally.items() if k.startswith("dedup_nodes_missing_hashes") and n}
    if by_join:
        missing = ", ".join(f"{n} at {j}" for j, n in sorted(by_join.items()))
        raise RuntimeError(f"near-dedup: candidate nodes reached a join without their shingle hashes ({missing}); "
                           "a shuffle lost records, so the duplicates found would be incomplete. Run with "
                           "--direct_running_mode=in_memory (multi_processing lost records here on 2026-11-23).")


def check_shuffles(metrics: dict[str, int]) -> None:
    """Counters on both sides of the dedup path's shuffles must agree (beam_dedup.SHUFFLE_CHECKS)."""
    from pipelines.corpus.beam_dedup import SHUFFLE_CHECKS

    bad = [f"{a}={metrics.get(a, 0)} but {b}={metrics.get(b, 0)}" for a, b in SHUFFLE_CHECKS if metrics.get(a, 0) != metrics.get(b, 0)]
    if bad:
        raise RuntimeError("near-dedup: records were lost inside a shuffle (" + "; ".join(bad) + "); the duplicates "
                           "found would be incomplete, so no manifest is written. Run with --direct_running_mode=in_memory "
                           "(multi_processing lost records here on 2026-11-23).")


def run(cfg: CorpusConfig, beam_args: list[str] | None = None) -> str | Path:
    """The corpus stage, holding its output directory's lock and, with --index, the index's lock from
    planning to commit (a second run on either waits up to --index-wait or fails naming the holder).
    Input, output and index may be local or on object storage (schemas/storage.py); the Beam
    arguments' store options (--s3_endpoint_url, ...) apply to the driver too."""
    storage.configure(beam_args)
    t0 = time.time()
    # The inputs are checked before the output folder is made (the lock makes it): an input matching no
    # file, an index that is a file, an unreadable URL list or evaluation set each fail in one line.
    files = expand_inputs(cfg.input)
    if cfg.index and not storage.is_remote(cfg.index) and Path(cfg.index).exists() and not Path(cfg.index).is_dir():
        raise ValueError(f"--index {cfg.index}: a file, not a band index folder")
    check_worker_paths(beam_args or [], [*files, cfg.output, *([cfg.index] if cfg.index else []), *cfg.decontaminate.files])
    if cfg.url_filter.enabled and "url_filter" not in cfg.applied_steps:  # the UT1 hashes: once here, not per worker
        url_lists(cfg.url_filter)
    decont = decontaminate.summary(cfg.decontaminate)
    with contextlib.ExitStack() as held:
        held.enter_context(stage_lock(cfg.output, what=f"corpus -> {cfg.output}"))
        if cfg.index:
            held.enter_context(index_lock(cfg.index, cfg.index_wait, what=f"corpus -> {cfg.output}"))
        return _run(cfg, beam_args, files, decont, t0)


def _run(cfg: CorpusConfig, beam_args: list[str] | None, files: list[str], decont: dict | None, t0: float) -> str | Path:
    out = str(cfg.output)
    if decont:
        print(f"corpus: decontaminating against {sum(decont['items'].values()):,} evaluation items of "
              f"{', '.join(decont['items'])} ({decont['n_grams']}-grams; {sum(decont['too_short'].values()):,} items "
              f"too short to check), mode {decont['mode']}", flush=True)
    prepare_dir(out)
    args = _direct_args(beam_args or [], files)
    bands, rows = lsh_params(cfg.jaccard_threshold, cfg.num_perm)
    plan = open_index(cfg.index, index_params(cfg, bands, rows), snapshot_fingerprint(files, _kept_config(cfg))) if cfg.index else None
    if plan is not None:
        action = f"writes {plan.write}" if plan.write else "snapshot already indexed: index left unchanged"
        print(f"corpus: band index {plan.root}: dedup against {len(plan.read)} generation(s); {action}", flush=True)
    print(f"corpus: {len(files)} input files -> {out} (beam args: {' '.join(redact_args(args))})", flush=True)
    result_metrics = _pipeline(cfg, plan, files, args)
    counts = _checked_counts(out, decont, result_metrics)
    warned = warnings(counts)
    print(f"corpus: {languages_line(cfg, counts)}", flush=True)
    for line in warned if counts["kept"] else ():  # a corpus that kept nothing fails below, its reasons in that line
        print(f"corpus: warning: {line}", flush=True)
    report_files = write_report(out, counts)
    if plan is not None:  # after reconcile: an index never holds a run whose counts did not add up
        commit(plan, {"documents": counts["kept"], "inputs": len(files), "snapshot": cfg.snapshot or None})
    written = ([f for sub in SUBDIRS for f in storage.files_under(storage.join(out, sub))]
               + [storage.join(out, "_tally.jsonl"), *report_files])
    manifest = Manifest(
        stage="corpus",
        config=config_to_dict(cfg),
        inputs=[InputRef(f) for f in files],
        counts=counts,
        outputs=describe_outputs(out, [f for f in written if storage.is_file(f)]),
        extra={
            "lsh": {"bands": bands, "rows": rows,
                    "detection_probability": {str(s): round(detection_probability(s, bands, rows), 4) for s in (0.5, 0.7, 0.8, 0.9)}},
            "near_dedup_clusters": {"rounds": cfg.cc_rounds,
                                    "unconverged_nodes": _tally(out).get("cc_unconverged_nodes", 0),
                                    "chain_members_kept": _tally(out).get("near_chain_kept", 0),
                                    "representative": "indexed first, then best quality (language score, words), then smallest id"},
            "languages": {"asked": cfg.languages if cfg.language_id else None, "line": languages_line(cfg, counts),
                          **({"share": cfg.auto_language_share, "documents": cfg.auto_language_documents,
                              "verdicts": language_verdicts(counts["cleaned_by_language"], cfg.auto_language_share,
                                                            cfg.auto_language_documents)} if cfg.auto_languages else {})},
            "warnings": warned,
            "url_filter": url_filter_provenance(cfg.url_filter),
            "decontamination": decont,
            "index": None if plan is None else {"path": str(plan.root), "read": plan.read, "wrote": plan.write,
                                                "fingerprint": plan.fingerprint},
            "beam_metrics": dict(sorted(result_metrics.items())),
            "beam_args": redact_args(args),
            "versions": _versions(),
        },
        wall_seconds=round(time.time() - t0, 2),
    )
    write_manifest(out, manifest)
    why = nothing_kept(out, counts)
    if why:  # the manifest and report are written: they say the rest
        raise ValueError(why)
    return out if storage.is_remote(out) else Path(out)


def nothing_kept(out: str, counts: dict) -> str | None:
    """Why a corpus that kept none of its documents fails, in one line: its reasons with their counts, the commonest
    first, and the first record of the commonest with its file and position. None when it kept some, had no input, or
    lost documents only as duplicates of an indexed generation (a refresh with nothing new)."""
    if not counts["in"] or counts["kept"] or counts["duplicates"]:
        return None
    reasons = Counter({("quarantined", k): v for k, v in counts["quarantined_by_reason"].items()})
    reasons.update({("dropped", k): v for k, v in counts["dropped"].items()})
    top = ", ".join(f"{kind} {reason} {n:,}" for (kind, reason), n in reasons.most_common(4))
    (kind, reason), _ = reasons.most_common(1)[0]
    first = _first_record(out, kind, reason)
    return f"kept none of its {counts['in']:,} documents ({top}){first} (report.html beside the manifest lists them)"


def _first_record(out: str, kind: str, reason: str) -> str:
    """`; the first: FILE, position N: DETAIL` for the first record left out as (kind, reason); "" if none is found."""
    if kind == "quarantined":  # the workers wrote their parts in any order: the first by file and position
        rows = (json.loads(line) for f in storage.files_under(storage.join(out, "quarantine"), "*.jsonl")
                for line in storage.read_text(f).splitlines())
        r = min((r for r in rows if r["reason"] == reason), key=lambda r: (r["source"], r["offset"] or 0), default=None)
        return f"; the first: {r['source']}, position {r['offset']}: {r.get('detail') or reason}" if r else ""
    rows = (r for f in storage.files_under(storage.join(out, "dropped"), "*.parquet")
            for r in storage.parquet_file(f).read(columns=["id", "source", "reason", "detail"]).to_pylist())
    r = min((r for r in rows if r["reason"] == reason), key=lambda r: (r["source"] or "", r["id"]), default=None)
    return f"; the first: {r['source']} (id {r['id']}): {r.get('detail') or reason}" if r else ""


def _direct_args(given: list[str], files: list[str]) -> list[str]:
    """Beam's arguments: the DirectRunner mode the input's size picks (`auto_mode`) unless `given` chose."""
    chosen = runner_name(given) != "DirectRunner" or any(a.startswith("--direct_running_mode") for a in given)
    size = None if chosen else sum(storage.size(f) for f in files)
    mode = auto_mode(size) if size is not None else None
    if mode:
        print(f"corpus: {size / (1 << 20):,.1f} MB of input -> DirectRunner {mode}"
              + (f" with {direct_workers()} workers" if mode == "multi_processing" else "")
              + f" (in_memory up to {IN_MEMORY_UP_TO_BYTES >> 20} MB; --direct_running_mode=... chooses)", flush=True)
    return default_beam_args(given, mode or "in_memory")


def _pipeline(cfg: CorpusConfig, plan, files: list[str], args: list[str]) -> dict[str, int]:
    """Run the Beam pipeline; its counters summed over steps (empty where the runner reports none)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.corpus.beam_corpus import CorpusPipeline

    try:
        with beam.Pipeline(options=PipelineOptions(args)) as p:
            _ = p | "Files" >> beam.Create(files) | "Corpus" >> CorpusPipeline(cfg, plan)
    finally:  # the texts and hashes the pipeline staged (staging.py); a killed run's go with prepare_dir
        storage.remove_tree(staging_dir(str(cfg.output)))
    metrics: dict[str, int] = {}
    try:
        for c in p.result.metrics().query()["counters"]:  # type: ignore[attr-defined] - one per (step, name)
            n = c.committed if c.committed is not None else c.attempted
            metrics[c.key.metric.name] = metrics.get(c.key.metric.name, 0) + n
    except Exception:  # noqa: BLE001 - metrics are a cross-check; the files are the record of truth
        pass
    return metrics


def _checked_counts(out: str, decont: dict | None, result_metrics: dict[str, int]) -> dict:
    """The counts the output's files hold, reconciled, cross-checked against Beam's counters and the dedup tallies."""
    counts = collect_counts(out)
    reconcile(counts)
    if decont:
        counts["contamination"] = decontaminate.contamination(decont, contamination_details(out))
    try:
        if result_metrics:  # runners that report no metrics skip this cross-check
            check_shuffles(result_metrics)
        check_dedup_tallies(_tally(out))
    except RuntimeError:
        print("corpus: dedup counters: " + json.dumps({k: v for k, v in sorted(result_metrics.items()) if k.startswith("dedup")}),
              flush=True)
        raise
    return counts


def _kept_config(cfg: CorpusConfig) -> dict:
    """The config that decides what is kept: a snapshot's fingerprint ignores where it is written, and
    holds the evaluation sets by their content, not by the folder they were prepared in."""
    kept = {k: v for k, v in config_to_dict(cfg).items() if k not in ("input", "output", "index", "index_wait", "snapshot")}
    kept["decontaminate"] = decontaminate.fingerprint(cfg.decontaminate)
    return kept


def index_params(cfg: CorpusConfig, bands: int, rows: int) -> dict:
    """What must match for band keys and shingle hashes to compare across runs."""
    import datasketch

    return {"minhash_scheme": MINHASH_SCHEME, "datasketch": datasketch.__version__, "num_perm": cfg.num_perm,
            "bands": bands, "rows": rows, "shingle_words": cfg.shingle_words, "shingle_chars": cfg.shingle_chars,
            "char_shingle_languages": sorted(cfg.char_shingle_languages)}


def _versions() -> dict[str, str]:
    import apache_beam
    import datasketch
    import resiliparse

    return {"apache_beam": apache_beam.__version__, "datasketch": datasketch.__version__,
            "resiliparse": getattr(resiliparse, "__version__", "?"), "minhash_scheme": MINHASH_SCHEME}
