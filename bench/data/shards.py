"""Data path: tokenize + pack + write shards against HF `datasets`, the training loader against
`DataCollatorForLanguageModeling`, the loader's share of a demo training step, and bytes per
token on disk.

    lmforge bench data [--corpus runs/demo/corpus] [--tokenizer runs/demo/tokenizer] [--copies 10]

Same text, same tokenizer, one run. lmforge is the shards stage as a user runs it
(`pipelines.shards.stage.run`: Beam DirectRunner, multi_processing, the stage's default
workers), which also draws K mask variants per row. The peer is the HF `run_mlm.py` recipe:
`Dataset.from_parquet` -> `map(tokenize, batched=True)` with the tokenizer as a transformers
fast tokenizer -> `map(group_texts, batched=True)` -> `save_to_disk`, with num_proc equal to
the stage's workers and with num_proc=1, each run in a fresh cache directory (what a user
sees the first time). Two sizes: the corpus as it is, and its texts replicated `--copies`
times under distinct ids, so Beam's fixed start-up cost does not decide the result.

The loader side reads the 1x outputs: lmforge's `RankLoader` (variant epoch % K) over the
memory-mapped shards, against the collator on the fly over the peer's packed rows, in a torch
DataLoader (num_workers=0) and over a plain list; one process, one torch thread, as one rank
of the demo (OMP_NUM_THREADS=1). The training step is the demo model as pretraining runs it
(SparseMLM forward + backward + gradient clipping + torch AdamW step), with one thread and with
every core. Bytes per token come from the outputs of both sizes. `shards_report` turns the
measurements into the docs/BENCHMARKS.md section; the raw numbers also go to
docs/benchmarks/data-tokenize-pack-shard-and-load.json. About 5-10 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.data.shards_report import render
from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import write_section
from common.config import opt
from schemas.manifest import MANIFEST_NAME, Manifest, describe_outputs, read_manifest, write_manifest

MASK_COLUMNS = ("mask_positions", "mask_tokens")


# ---- pure helpers ------------------------------------------------------------------------------

def replicate(table: pa.Table, copies: int) -> pa.Table:
    """`copies` copies of a corpus table; copy 0 keeps the ids, copy r > 0 gets `<id>~r`, so
    every id stays distinct and the shards stage hashes the copies to different shards."""
    ids = table.column("id").to_pylist()
    col, field = table.schema.get_field_index("id"), table.schema.field("id")  # keeps `not null`, so the parts concat
    parts = [table] + [table.set_column(col, field, pa.array([f"{i}~{r}" for i in ids], field.type))
                       for r in range(1, copies)]
    return pa.concat_tables(parts)


def group_texts(examples: dict[str, list[list[int]]], block: int) -> dict[str, list[list[int]]]:
    """HF transformers' examples/pytorch/language-modeling/run_mlm.py `group_texts`, verbatim in
    effect: concatenate a map batch and cut it into blocks, dropping the batch's remainder."""
    concatenated = {k: list(chain(*examples[k])) for k in examples}
    total = len(concatenated[next(iter(examples))]) // block * block
    return {k: [t[i:i + block] for i in range(0, total, block)] for k, t in concatenated.items()}


def tokenize_batch(examples: dict[str, list[str]], tokenizer) -> dict[str, list]:
    """run_mlm.py's `tokenize_function` (line_by_line=False): [CLS] text [SEP] per document."""
    return tokenizer(examples["text"], return_special_tokens_mask=True)


def stage_workers(beam_args: list[str]) -> int:
    """--direct_num_workers=N from the stage's Beam arguments."""
    for a in beam_args:
        if a.startswith("--direct_num_workers="):
            return int(a.split("=", 1)[1])
    raise ValueError(f"no --direct_num_workers in {beam_args}")


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def column_bytes_per_token(table: pa.Table, tokens: int) -> dict[str, float]:
    """Arrow buffer bytes of each column per real token (offsets and validity included)."""
    return {name: table.column(name).nbytes / tokens for name in table.column_names}


# ---- tokenize + pack + write -----------------------------------------------------------------

def write_replicated_corpus(src: Path, dst: Path, copies: int) -> Path:
    """dst/data/<lang>/<file> with every text `copies` times, and a corpus manifest over them."""
    from pipelines.tokenizer import corpus_files

    written = []
    for f in corpus_files(src):
        rel = f.relative_to(src)
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(replicate(pq.read_table(f), copies), dst / rel)
        written.append(rel)
    base = read_manifest(src)
    write_manifest(dst, Manifest(stage="corpus", config={**base.get("config", {}), "bench_copies": copies},
                                 outputs=describe_outputs(dst, written), extra={"replicated_from": str(src)}))
    return dst


def time_shards_stage(corpus: Path, tokenizer: Path, out: Path, seq_len: int, num_shards: int) -> dict[str, Any]:
    """The shards stage, timed end to end (Beam start, workers, manifest with sha256s), with the
    DirectRunner mode it picks for this input (`stage.auto_mode`)."""
    from pipelines.shards.stage import ShardsConfig, auto_mode, corpus_documents, run

    t0 = time.perf_counter()
    run(ShardsConfig(corpus=str(corpus), tokenizer=str(tokenizer), output=str(out), seq_len=seq_len, num_shards=num_shards))
    seconds = time.perf_counter() - t0
    tokens, rows = shard_tokens(out)
    return {"seconds": seconds, "tokens": tokens, "rows": rows, "tokens_per_s": tokens / seconds, "bytes": dir_bytes(out),
            "mode": auto_mode(corpus_documents(corpus))}


def shard_tokens(shards_dir: Path) -> tuple[int, int]:
    """(real tokens, rows) over every split, from the shards themselves (sum of `length`)."""
    import pyarrow.compute as pc

    from training.pretraining.data import ShardSet

    shards = ShardSet.open(shards_dir)
    tables = [shards.read(split) for split in shards.splits if shards.splits[split]]
    return sum(int(pc.sum(t.column("length")).as_py() or 0) for t in tables), sum(t.num_rows for t in tables)


def run_datasets(files: list[Path], tokenizer: Path, out: Path, cache: Path, num_proc: int, block: int) -> dict[str, Any]:
    """The run_mlm.py recipe into a fresh cache directory, timed step by step."""
    import pyarrow.compute as pc
    from datasets import Dataset
    from transformers import AutoTokenizer

    steps = {}
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    ds = Dataset.from_parquet([str(f) for f in files], columns=["text"], cache_dir=str(cache))
    steps["from_parquet"] = time.perf_counter() - t0
    t = time.perf_counter()
    tokenized = ds.map(tokenize_batch, batched=True, num_proc=num_proc, remove_columns=["text"], fn_kwargs={"tokenizer": tok})
    steps["map_tokenize"] = time.perf_counter() - t
    t = time.perf_counter()
    grouped = tokenized.map(group_texts, batched=True, num_proc=num_proc, fn_kwargs={"block": block})
    steps["map_group_texts"] = time.perf_counter() - t
    t = time.perf_counter()
    grouped.save_to_disk(str(out))
    steps["save_to_disk"] = time.perf_counter() - t
    seconds = time.perf_counter() - t0
    tokens = grouped.num_rows * block  # group_texts keeps whole blocks only: every token is real
    before = int(pc.sum(pc.list_value_length(tokenized.data.column("input_ids"))).as_py())
    return {"seconds": seconds, "steps": steps, "tokens": tokens, "tokens_before_grouping": before,
            "rows": grouped.num_rows, "tokens_per_s": tokens / seconds, "bytes": dir_bytes(out)}


def bench_write(corpus: Path, tokenizer: Path, work: Path, repeat: int, workers: int, seq_len: int,
                num_shards: int, single: bool = True) -> dict[str, Any]:
    """Each contender `repeat` times, interleaved; the best run counts. The last run's outputs stay.
    `single`: also the peer at num_proc=1."""
    from pipelines.shards.rows import tokenizer_threads
    from pipelines.tokenizer import corpus_files

    files = corpus_files(corpus)
    runs: dict[str, list[dict]] = {}
    contenders = {"lmforge": None, f"datasets num_proc={workers}": workers, **({"datasets num_proc=1": 1} if single else {})}
    for rep in range(repeat):
        for name, num_proc in contenders.items():
            out = work / name.replace(" ", "_").replace("=", "")
            shutil.rmtree(out, ignore_errors=True)
            if num_proc is None:
                r = time_shards_stage(corpus, tokenizer, out, seq_len, num_shards)
            else:
                cache = Path(tempfile.mkdtemp(prefix="hf-cache-", dir=work))
                # One process gets the tokenizer's thread pool, as the stage's workers do; forked
                # worker processes get one thread each (a pool live across a fork can deadlock).
                with tokenizer_threads() if num_proc == 1 else contextlib.nullcontext():
                    r = run_datasets(files, tokenizer, out, cache, num_proc, seq_len)
                shutil.rmtree(cache)
            r["dir"] = str(out)
            runs.setdefault(name, []).append(r)
            print(f"data: {corpus.name} run {rep + 1}/{repeat} {name}: {r['tokens']:,} tokens in {r['seconds']:.1f} s "
                  f"= {r['tokens_per_s']:,.0f} tokens/s", flush=True)
    return {name: {**min(rs, key=lambda r: r["seconds"]), "all_seconds": [r["seconds"] for r in rs]}
            for name, rs in runs.items()}


# ---- bytes on disk -----------------------------------------------------------------------------

def shard_bytes(shards_dir: Path, tokens: int) -> dict[str, Any]:
    """Bytes per real token of the stage directory, and of a copy of its shards without the mask
    columns (written the way the stage writes them: one IPC stream, 1,024-row batches)."""
    from training.pretraining.data import ShardSet

    shards = ShardSet.open(shards_dir)
    total = dir_bytes(shards_dir)
    arrow = no_mask = 0
    per_column: dict[str, float] = {}
    for split in shards.splits:
        for f in shards.files(split):
            table = pa.ipc.open_stream(pa.memory_map(str(f))).read_all()
            arrow += f.stat().st_size
            slim = table.drop_columns([c for c in MASK_COLUMNS if c in table.column_names])
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, slim.schema) as w:
                w.write_table(slim, max_chunksize=1024)
            no_mask += sink.getvalue().size
            for k, v in column_bytes_per_token(table, tokens).items():
                per_column[k] = per_column.get(k, 0.0) + v
    return {"bytes": total, "bytes_per_token": total / tokens, "bytes_per_token_no_masks": (total - arrow + no_mask) / tokens,
            "mask_share": 1 - (total - arrow + no_mask) / total, "num_variants": shards.num_variants,
            "column_bytes_per_token": per_column}


def hf_bytes(out: Path, tokens: int) -> dict[str, Any]:
    from datasets import load_from_disk

    total = dir_bytes(out)
    table = load_from_disk(str(out)).data.table
    return {"bytes": total, "bytes_per_token": total / tokens, "columns": {f.name: str(f.type) for f in table.schema},
            "column_bytes_per_token": column_bytes_per_token(table, tokens)}


# ---- loader and training step ------------------------------------------------------------------

def bench_loaders(shards_dir: Path, hf_dir: Path, tokenizer: Path, batch_sizes: list[int], epochs: int) -> dict[str, Any]:
    """Batches/s over whole epochs, best epoch of `epochs` (lmforge epochs use variants 0..epochs-1)."""
    import torch
    from datasets import load_from_disk
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling

    from training.pretraining.data import RankLoader, ShardSet

    shards = ShardSet.open(shards_dir)
    table = shards.read("train")
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15)
    grouped = load_from_disk(str(hf_dir))
    as_list = grouped.to_list()  # materialised once, outside the timing
    res: dict[str, Any] = {"lmforge_rows": table.num_rows, "datasets_rows": grouped.num_rows, "by_batch": {}}

    def best_rate(make_epoch) -> dict[str, float]:
        rates = []
        for e in range(epochs):
            n, t0 = 0, time.perf_counter()
            for _ in make_epoch(e):
                n += 1
            rates.append(n / (time.perf_counter() - t0))
        return {"batches_per_s": max(rates), "all": rates}

    for bs in batch_sizes:
        loader = RankLoader(table, 0, 1, bs, seed=0, num_variants=shards.num_variants)

        def plain(e: int, bs: int = bs):
            order = np.random.default_rng(e).permutation(len(as_list))
            for i in range(0, len(order) - bs + 1, bs):
                yield collator([as_list[j] for j in order[i:i + bs]])

        def torch_loader(e: int, bs: int = bs):
            torch.manual_seed(e)
            return torch.utils.data.DataLoader(grouped, batch_size=bs, shuffle=True, drop_last=True, num_workers=0,
                                               collate_fn=collator)

        res["by_batch"][bs] = {"lmforge RankLoader": best_rate(loader.epoch),
                               "DataCollatorForLanguageModeling, torch DataLoader": best_rate(torch_loader),
                               "DataCollatorForLanguageModeling, plain list": best_rate(plain)}
        for name, r in res["by_batch"][bs].items():
            print(f"data: loader batch {bs} {name}: {r['batches_per_s']:,.1f} batches/s", flush=True)
    return res


def bench_step(shards_dir: Path, batch_size: int, steps: int, threads: int, warmup: int = 2) -> dict[str, Any]:
    """Seconds per training step of the demo model as training.pretraining.pretrain runs it, one process, `threads` torch threads."""
    import torch

    from training.models.model import SparseMLM, bert_config, build_model, num_parameters, param_groups, preset
    from training.pretraining.data import RankLoader, ShardSet

    shards = ShardSet.open(shards_dir)
    loader = RankLoader(shards.read("train"), 0, 1, batch_size, seed=0, num_variants=shards.num_variants)
    batches = [b for _, b in zip(range(warmup + steps), loader.epoch(0))]
    torch.manual_seed(0)
    mlm = build_model(bert_config(preset("demo"), shards.vocab_size, shards.pad_id, shards.seq_len))
    model = SparseMLM(mlm)
    # pretrain's optimizer and DeepSpeed's gradient_clipping 1.0
    opt = torch.optim.AdamW(param_groups(model, 0.01), lr=1e-3, betas=(0.9, 0.98), eps=1e-6)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    times = []
    for b in batches:
        t0 = time.perf_counter()
        loss = model(**b)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    torch.set_num_threads(before)
    timed = times[warmup:]
    return {"seconds_per_step": float(np.mean(timed)), "steps": len(timed), "warmup": warmup, "threads": threads,
            "parameters": num_parameters(mlm), "batch_size": batch_size}


def encode_seconds(corpus: Path, tokenizer: Path) -> dict[str, Any]:
    """The tokenizer alone over every text of `corpus`, one process, best of 2: HF tokenizers'
    `encode_batch_fast` with its thread pool (all cores), as the peer and the stage's other
    families encode, and the stage's word-cache encoder (`rows.DocEncoder`, one thread, its
    64th-document check against HF included, a cold cache each run), with the ids of the two
    compared on every text."""
    from pipelines.shards.rows import DocEncoder, encode, load_tokenizer
    from pipelines.tokenizer import corpus_files

    texts = [t for f in corpus_files(corpus) for t in pq.read_table(f, columns=["text"]).column("text").to_pylist()]
    tok = load_tokenizer(tokenizer / "tokenizer.json")
    out: dict[str, Any] = {"documents": len(texts), "threads": os.cpu_count()}
    hf_ids: list = []
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        hf_ids, _ = encode(tok, texts, with_words=False)
        best = min(best, time.perf_counter() - t0)
    out.update(seconds=best, tokens=sum(map(len, hf_ids)))
    enc = DocEncoder(tok)
    if enc.cache is not None:
        best = float("inf")
        for _ in range(2):
            enc = DocEncoder(tok)  # a cold word cache each time, as a Beam worker starts
            t0 = time.perf_counter()
            ids, _ = enc(texts, False)
            best = min(best, time.perf_counter() - t0)
        out["word_cache"] = {"seconds": best, "tokens": int(sum(map(len, ids))), "threads": 1,
                             "distinct_words": enc.cache.distinct_words, "distinct_chunks": enc.cache.distinct_chunks,
                             "chunks": sum(len(t.split()) for t in texts),
                             "same_ids": all(np.array_equal(a, b) for a, b in zip(ids, hf_ids)) and len(ids) == len(hf_ids)}
    else:
        out["word_cache"] = {"unavailable": enc.why_slow}
    return out


def masking_seconds(shards_dir: Path, tokenizer: Path, limit: int) -> dict[str, Any] | None:
    """CPU seconds the stage's pure mlm masking (`mlm_block` over the rows at once, as the stage
    masks a group; K variants) spends on up to `limit` written rows, one process: the part of
    lmforge's time that the peer does not spend."""
    from training.pretraining.data import ShardSet

    shards = ShardSet.open(shards_dir)
    table = shards.read("train").slice(0, limit)
    ids = table.column("input_ids").combine_chunks().flatten().to_numpy().reshape(table.num_rows, -1)
    lengths = table.column("length").to_numpy()
    try:
        from pipelines.shards.mask_config import MaskConfig, MaskVocab
        from pipelines.shards.masking import mlm_block
        from pipelines.shards.rows import load_tokenizer
        from pipelines.tokenizer import special_ids

        tok = load_tokenizer(tokenizer / "tokenizer.json")
        vocab = MaskVocab.from_special_ids(special_ids(tok), tok.get_vocab_size())
        cfg = MaskConfig(num_variants=shards.num_variants)
        t0 = time.perf_counter()
        mlm_block(ids, lengths, vocab, cfg, 0, np.arange(table.num_rows))
    except (ImportError, TypeError, AttributeError) as e:  # the masking API moved; the rest still stands
        print(f"data: masking cost not measured ({type(e).__name__}: {e})", flush=True)
        return None
    seconds = time.perf_counter() - t0
    return {"rows": table.num_rows, "seconds": seconds, "rows_per_s": table.num_rows / seconds}


# ---- entry point -------------------------------------------------------------------------------

@dataclass
class DataBenchConfig:
    corpus: str = opt("runs/demo/corpus", "a finished corpus stage directory")
    tokenizer: str = opt("runs/demo/tokenizer", "a finished tokenizer stage directory, BERT specials")
    copies: list[int] = opt([10, 100], "the larger inputs: the corpus texts this many times each, distinct ids; 1 = only "
                            "the corpus as it is")
    single_up_to: int = opt(10, "run the peer with num_proc=1 too on inputs of at most this many copies (it takes about "
                            "2x the num_proc=2 time, 3 min at 100x)")
    repeat: int = opt(3, "timed runs of each writer on the corpus as it is; best counts")
    repeat_large: int = opt(1, "timed runs of each writer on each larger input")
    seq_len: int | None = opt(None, "tokens per packed row, both sides (default: the demo's)")
    num_shards: int | None = opt(None, "lmforge train shards (default: the demo's)")
    batch_sizes: list[int] = opt([16], "loader batch sizes; the demo's micro batch is always added")
    loader_epochs: int = opt(3, "epochs timed per loader and batch size; best counts")
    train_steps: int = opt(20, "demo-model training steps timed, after 2 warm-up steps")
    masking_rows: int = opt(20000, "rows re-masked to time the masking alone; 0 skips")
    workdir: str | None = opt(None, "where outputs and caches go (default: a new temporary directory, removed after)")

    def __post_init__(self) -> None:
        from flows.presets import demo

        pre = demo()
        self.seq_len = self.seq_len or pre["shards"]["seq_len"]
        self.num_shards = self.num_shards or pre["shards"]["num_shards"]
        if min(*self.copies, self.repeat, self.repeat_large, self.loader_epochs, self.train_steps, *self.batch_sizes) < 1:
            raise ValueError("--copies, --repeat, --repeat-large, --loader-epochs, --train-steps and --batch-sizes must be >= 1")


def parser() -> argparse.ArgumentParser:
    ap = bench_parser("lmforge bench data", __doc__, DataBenchConfig)
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: docs/BENCHMARKS.md)")
    ap.add_argument("--render", metavar="JSON", default=None,
                    help="write the report from a run's saved measurements (the JSON it prints) without measuring")
    return ap


def parse(argv: list[str] | None) -> tuple[DataBenchConfig, argparse.Namespace]:
    return parse_bench(parser(), DataBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    from flows.presets import demo
    from pipelines.corpus.stage import default_beam_args

    pre = demo()
    ap = parser()
    a, ns = parse_bench(ap, DataBenchConfig, argv)
    if ns.render:
        d = json.loads(Path(ns.render).read_text())
        body = render(d)
        write_section(Path(ns.out), "data: tokenize, pack, shard and load", body, d, measured=d.get("measured_utc"))
        print(body)
        return 0
    for flag, path in (("--corpus", a.corpus), ("--tokenizer", a.tokenizer)):
        if not (Path(path) / MANIFEST_NAME).exists():
            ap.error(f"{flag} {path}: no {MANIFEST_NAME} there, so that stage has not finished; "
                     "run `make demo` (or `lmforge corpus` / `lmforge tokenizer`) first, or pass another directory")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as the lmforge CLI sets it for every stage
    # (the stage's encode and the peer at num_proc=1 switch the tokenizer's thread pool on for their calls)
    # Imported before any timing, so neither side's first run pays for them.
    import apache_beam  # noqa: F401
    import datasets
    import transformers

    import pipelines.shards.beam_shards  # noqa: F401

    datasets.utils.logging.disable_progress_bar()
    datasets.utils.logging.set_verbosity_error()
    transformers.utils.logging.set_verbosity_error()  # "longer than model_max_length": grouping cuts it
    corpus, tokenizer = Path(a.corpus), Path(a.tokenizer)
    beam_args = default_beam_args([])  # what the shards stage runs with when given none
    workers = stage_workers(beam_args)
    micro = pre["pretrain"]["micro_batch_size"]
    batch_sizes = sorted({*a.batch_sizes, micro})
    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="lmforge-bench-data-"))
    work.mkdir(parents=True, exist_ok=True)
    from pipelines.tokenizer import corpus_files

    try:
        inputs = {"1x": (corpus, a.repeat, 1)}
        for c in sorted(set(a.copies) - {1}):
            inputs[f"{c}x"] = (write_replicated_corpus(corpus, work / f"corpus-{c}x", c), a.repeat_large, c)
        d: dict[str, Any] = {"corpus": str(corpus), "tokenizer": str(tokenizer), "copies": sorted(set(a.copies) - {1}),
                             "single_up_to": a.single_up_to, "repeat": a.repeat,
                             "repeat_large": a.repeat_large, "seq_len": a.seq_len, "num_shards": a.num_shards,
                             "workers": workers, "beam_args": beam_args, "tokenizers_parallelism": os.environ["TOKENIZERS_PARALLELISM"],
                             "loader_epochs": a.loader_epochs, "write": {}, "bytes": {}, "docs": {}}
        for label, (src, repeat, copies) in inputs.items():
            d["docs"][label] = sum(pq.ParquetFile(f).metadata.num_rows for f in corpus_files(src))
            runs = d["write"][label] = bench_write(src, tokenizer, work / label, repeat, workers, a.seq_len, a.num_shards,
                                                   single=copies <= a.single_up_to)
            lm, hf = runs["lmforge"], runs[f"datasets num_proc={workers}"]
            d["bytes"][label] = {"lmforge": shard_bytes(Path(lm["dir"]), lm["tokens"]),
                                 "datasets": hf_bytes(Path(hf["dir"]), hf["tokens"])}
        lm_dir, hf_dir = Path(d["write"]["1x"]["lmforge"]["dir"]), Path(d["write"]["1x"][f"datasets num_proc={workers}"]["dir"])
        d["num_variants"] = d["bytes"]["1x"]["lmforge"]["num_variants"]
        import torch

        torch.set_num_threads(1)  # one demo rank: training.launch.torchrun sets OMP_NUM_THREADS=1 per process
        d["masking"] = masking_seconds(lm_dir, tokenizer, a.masking_rows) if a.masking_rows else None
        # the tokenizer alone on the largest input of at most 10 copies (at 100x HF alone takes minutes)
        enc_label = [label for label, (_, _, c) in inputs.items() if c <= 10][-1]
        d["encode"] = {"input": enc_label, **encode_seconds(inputs[enc_label][0], tokenizer)}
        # and on the corpus as it is: its first sight of every word, the word cache's worst case
        d["encode_cold"] = {"input": "1x", **encode_seconds(corpus, tokenizer)} if enc_label != "1x" else None
        d["loader"] = bench_loaders(lm_dir, hf_dir, tokenizer, batch_sizes, a.loader_epochs)
        # One thread is a demo rank; all cores to one process makes the step shorter and the loader's share larger.
        d["steps"] = [bench_step(lm_dir, micro, a.train_steps, t) for t in sorted({1, os.cpu_count() or 1})]
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    d["measured_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    raw = Path(tempfile.gettempdir(), "lmforge-bench-data.json")  # kept should the report fail to render
    raw.write_text(json.dumps(d, indent=2, default=str))
    print(f"data: measurements in {raw}", flush=True)
    body = render(d)
    write_section(Path(ns.out), "data: tokenize, pack, shard and load", body, d)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
