"""The docs/BENCHMARKS.md section of `lmforge bench data`: pure functions from the measured dict to
Markdown, so a synthetic dict tests the wording and the arithmetic in milliseconds."""
from __future__ import annotations

from typing import Any

LM = "lmforge"
RANK_LOADER = "lmforge RankLoader"
COLLATOR_DL = "DataCollatorForLanguageModeling, torch DataLoader"
COLLATOR_LIST = "DataCollatorForLanguageModeling, plain list"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def times(a: float, b: float, digits: int) -> str:
    return f"{ratio(a, b):.{digits}f}x"


def verdict(value: float, goal: float, above: bool = True) -> str:
    return "met" if (value >= goal if above else value < goal) else "**not met**"


def fixed_and_marginal(t1: float, n1: int, t2: float, n2: int) -> tuple[float, float] | None:
    """Fit seconds = fixed + tokens / marginal through two sizes: (fixed seconds, marginal tokens/s).

    E.g. 10 s for 1M tokens and 28 s for 10M: marginal = 9M / 18 s = 500k tokens/s, fixed =
    10 - 1M / 500k = 8 s. None when the larger input was not slower (noise swamps the fit).
    """
    if t2 <= t1 or n2 <= n1:
        return None
    marginal = (n2 - n1) / (t2 - t1)
    return t1 - n1 / marginal, marginal


def step_share(batch_seconds: float, step_seconds: float) -> float:
    """Share of a training step spent producing its batch, when the two run one after the other."""
    return batch_seconds / (batch_seconds + step_seconds)


def _write_section(d: dict[str, Any]) -> list[str]:
    w, k, sizes = d["workers"], d["num_variants"], list(d["write"])
    peer, small, big = f"datasets num_proc={w}", sizes[0], sizes[-1]
    runs = f"best of {d['repeat']} interleaved runs at {small}"
    if len(sizes) > 1:
        large = "one run" if d["repeat_large"] == 1 else f"best of {d['repeat_large']}"
        runs += f", {large} at {' and '.join(sizes[1:])}"
    out = [
        "### Tokenize + pack + write", "",
        f"lmforge = the shards stage end to end (`pipelines.shards.stage.run` with its default Beam arguments: the "
        f"DirectRunner mode it picks for the input, named in the table (`stage.auto_mode`: in_memory, one process, up to "
        f"50,000 documents; else `{' '.join(d['beam_args'])}`); {d['num_shards']} train shards + 1 valid; manifest with "
        "sha256s), which also draws "
        f"**K={k} mask variants per row**; the peer draws none (it masks on the fly while training). Peer = HF "
        "run_mlm.py: `Dataset.from_parquet` -> `map(tokenize, batched=True)` -> `map(group_texts, batched=True)` "
        f"(block {d['seq_len']}) -> `save_to_disk`, map with num_proc={w} and with num_proc=1"
        + (f" (num_proc=1 up to {d['single_up_to']}x copies)" if d.get("single_up_to") else "") + ", a fresh cache dir per run; "
        "its time includes loading the tokenizer and reading the Parquet, as the stage's does. Tokens = real tokens "
        "written ([CLS]/[SEP] included, padding not; group_texts drops each 1,000-document batch's remainder). "
        f"Wall clock, {runs}.", "",
        "| input | contender | tokens written | wall s | tokens/s | lmforge / this |", "|---|---|---:|---:|---:|---:|"]
    for s in sizes:
        lm = d["write"][s][LM]["tokens_per_s"]
        for name, r in d["write"][s].items():
            vs = "" if name == LM else times(lm, r["tokens_per_s"], 2)
            label = f"{name} ({r['mode']})" if name == LM and r.get("mode") else name
            out.append(f"| {s} | {label} | {r['tokens']:,} | {r['seconds']:.1f} | {r['tokens_per_s']:,.0f} | {vs} |")
    out += ["", "The peer's time by step (s, its best run):", "",
            "| input | num_proc | from_parquet | map tokenize | map group_texts | save_to_disk |", "|---|---:|---:|---:|---:|---:|"]
    for s in sizes:
        for name, r in d["write"][s].items():
            if name != LM:
                st = r["steps"]
                out.append(f"| {s} | {name.rsplit('=', 1)[1]} | {st['from_parquet']:.1f} | {st['map_tokenize']:.1f} | "
                           f"{st['map_group_texts']:.1f} | {st['save_to_disk']:.1f} |")
    x = {s: ratio(d["write"][s][LM]["tokens_per_s"], d["write"][s][peer]["tokens_per_s"]) for s in sizes}
    first = d["write"][small]
    same = first[LM]["tokens"] == first[peer]["tokens_before_grouping"]
    check = "equal" if same else f"{first[LM]['tokens']:,} vs {first[peer]['tokens_before_grouping']:,}"
    out += ["", f"Goal lmforge >= 2x the peer at num_proc={w}: "
            + ", ".join(f"{s} {x[s]:.2f}x ({verdict(x[s], 2)})" for s in sizes) + ". "
            f"Same tokenization: at {small}, lmforge's token count and the peer's before grouping are {check}."]
    if len(sizes) > 1:
        out += ["", f"The stage is built for corpora, not for one demo's worth of text: each run builds and starts a Beam "
                f"pipeline (and with multi_processing {w} worker processes, which import Beam, pyarrow and tokenizers "
                f"before the first document), a cost whatever the input, while the peer's map workers fork from a warm "
                f"process. So the goal is judged at the largest input, {big}: {x[big]:.2f}x ({verdict(x[big], 2)}). The "
                "smaller inputs show the fixed cost, and are reported as measured."]
    if len(sizes) > 1:
        fits = {}
        for name in d["write"][big]:  # a contender run at the largest input only if it ran at the smallest too
            if name not in d["write"][small]:
                continue
            a, b = d["write"][small][name], d["write"][big][name]
            fits[name] = fixed_and_marginal(a["seconds"], a["tokens"], b["seconds"], b["tokens"])
        described = [f"{name} {f[0]:.1f} s + {f[1]:,.0f} tokens/s" for name, f in fits.items() if f]
        if described:
            line = (f"A straight line through {small} and {big} (fixed seconds + marginal rate): "
                    f"{'; '.join(described)}.")
            if fits.get(LM) and fits.get(peer):
                line += (f" Marginal rate lmforge / peer at num_proc={w}: {ratio(fits[LM][1], fits[peer][1]):.2f}x, "
                         "the ratio a much larger input would approach.")
            out += ["", line]
    if d.get("masking"):
        m = d["masking"]
        rows = d["write"][big][LM]["rows"]
        out += ["", f"Masking alone (the stage's `mlm_block`, K={k}, re-run on {m['rows']:,} written rows in one "
                f"process): {m['rows_per_s']:,.0f} rows/s, so the {rows:,} rows of {big} cost about {rows / m['rows_per_s']:,.0f} "
                f"CPU seconds, {rows / m['rows_per_s'] / w:,.1f} s of wall time over {w} workers "
                f"(lmforge's {big} run took {d['write'][big][LM]['seconds']:.1f} s)."]
    if d.get("encode"):
        out += _encode_section(d, peer)
    return out


def _encode_section(d: dict[str, Any], peer: str) -> list[str]:
    """The tokenizer alone: HF tokenizers against the word cache, on the inputs measured."""
    runs = [e for e in (d.get("encode_cold"), d["encode"]) if e]
    out = ["", "The tokenizer alone, in one process (best of 2; the word cache starts cold each run), against the "
           "peer's whole run on the same input:", "",
           "| input | encoder | threads | s | tokens | share of the peer's run | distinct chunks / chunks |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for e in runs:
        at = e.get("input", list(d["write"])[-1])
        peer_s = d["write"][at][peer]["seconds"]
        out.append(f"| {at} | HF tokenizers `encode_batch_fast` | {e['threads']} | {e['seconds']:.2f} | {e['tokens']:,} | "
                   f"{e['seconds'] / peer_s:.0%} |  |")
        wc = e.get("word_cache") or {}
        if "seconds" in wc:
            share = f"{wc['distinct_chunks'] / wc['chunks']:.1%}" if wc.get("chunks") else ""
            out.append(f"| {at} | lmforge word cache | {wc['threads']} | {wc['seconds']:.2f} | {wc['tokens']:,} | "
                       f"{wc['seconds'] / peer_s:.0%} | {share} |")
    last = runs[-1].get("word_cache") or {}
    if "seconds" not in last:
        return out + (["", f"The word-cache encoder did not apply: {last.get('unavailable')}."] if last else [])
    same = all((e.get("word_cache") or {}).get("same_ids") for e in runs)
    texts = " and ".join(f"{e['documents']:,} texts of {e.get('input')}" for e in runs)
    out += ["", "The word cache (`pipelines.shards.fast_encode`, its check of every 64th document against HF tokenizers "
            "included) runs the tokenizer's normalizer and WordPiece model once per distinct whitespace chunk "
            f"({last['distinct_chunks']:,} here, {last['distinct_words']:,} distinct words) and leaves the rest to a dict "
            f"lookup and numpy. Its ids equal HF tokenizers' on {'every one' if same else '**not every one**'} of the "
            f"{texts}."]
    cold = d.get("encode_cold")
    if cold and "seconds" in (cold.get("word_cache") or {}):
        c, big = cold["word_cache"], runs[-1]
        out += ["", f"How much of this is the repeated input: from the second copy of the corpus on every chunk is in the "
                f"cache. On the corpus as it is ({cold['input']}), where {c['distinct_chunks'] / c['chunks']:.1%} of the "
                f"chunks are distinct, the cold word cache on one core takes {c['seconds']:.2f} s against HF tokenizers' "
                f"{cold['seconds']:.2f} s on {cold['threads']}, so {times(cold['seconds'] * cold['threads'], c['seconds'], 1)} "
                f"less CPU time; at {big.get('input')}, {times(big['seconds'] * big['threads'], last['seconds'], 1)}. "
                "A real corpus of the larger sizes lies between the two: its share of distinct chunks falls as it grows "
                "(Heaps' law), but not to zero."]
    return out


def _loader_section(d: dict[str, Any]) -> list[str]:
    small, lo = list(d["write"])[0], d["loader"]
    out = ["", "### Loader: masked batches/s", "",
           f"One process, one torch thread (one demo rank runs with OMP_NUM_THREADS=1). lmforge `RankLoader` over the "
           f"memory-mapped {small} train shards ({lo['lmforge_rows']:,} rows; epoch e applies variant e % K); the peer "
           f"`DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)` over the {small} `group_texts` rows "
           f"({lo['datasets_rows']:,}, with their special_tokens_mask, which spares the collator a lookup), through a "
           "torch DataLoader (num_workers=0, shuffle) and over a plain Python list (materialised before timing). "
           f"Whole epochs, best of {d['loader_epochs']}; the demo's micro batch is {d['steps'][0]['batch_size']}.", "",
           "| batch | loader | batches/s | lmforge / this |", "|---:|---|---:|---:|"]
    for bs, by in lo["by_batch"].items():
        lm = by[RANK_LOADER]["batches_per_s"]
        for name, r in by.items():
            vs = "" if name == RANK_LOADER else times(lm, r["batches_per_s"], 1)
            out.append(f"| {bs} | {name} | {r['batches_per_s']:,.1f} | {vs} |")
    worst = min(ratio(by[RANK_LOADER]["batches_per_s"], r["batches_per_s"])
                for by in lo["by_batch"].values() for n, r in by.items() if n != RANK_LOADER)
    steps, mb = d["steps"], d["steps"][0]["batch_size"]
    by = lo["by_batch"][mb] if mb in lo["by_batch"] else lo["by_batch"][str(mb)]
    lm_s, hf_s = 1 / by[RANK_LOADER]["batches_per_s"], 1 / by[COLLATOR_DL]["batches_per_s"]
    worst_share = max(step_share(lm_s, st["seconds_per_step"]) for st in steps)
    out += ["", f"Goal lmforge >= 3x the collator: the smallest ratio above is {worst:.1f}x ({verdict(worst, 3)}).", "",
            "### Loader's share of a training step", "",
            f"The demo model ({steps[0]['parameters']:,} parameters) as `training.pretraining.pretrain` steps it: SparseMLM forward + "
            f"backward + gradient clipping + torch AdamW step, micro batch {mb} (the demo's), seq {d['seq_len']}, one "
            f"process, mean of {steps[0]['steps']} steps after {steps[0]['warmup']} warm-up steps, with one torch thread "
            "(as a demo rank) and with every core (a shorter step, so a larger share). Share = batch time / (batch time + "
            "step time), batch time from the table above (one thread): the loader runs in the training process, between steps.", "",
            "| torch threads | step s | lmforge batch ms | lmforge share | collator (DataLoader) batch ms | collator share |",
            "|---:|---:|---:|---:|---:|---:|"]
    for st in steps:
        sec = st["seconds_per_step"]
        out.append(f"| {st['threads']} | {sec:.3f} | {lm_s * 1e3:.2f} | {step_share(lm_s, sec):.2%} | {hf_s * 1e3:.2f} | "
                   f"{step_share(hf_s, sec):.2%} |")
    out += ["", f"Goal under 5%: at most {worst_share:.2%} ({verdict(worst_share, 0.05, above=False)})."]
    return out


def _bytes_section(d: dict[str, Any]) -> list[str]:
    sizes, k = list(d["write"]), d["num_variants"]
    small = d["bytes"][sizes[0]]
    peer_cols = ", ".join(f"{n} ({t})" for n, t in small["datasets"]["columns"].items())
    out = ["", "### Bytes per token on disk", "",
           "Whole output directory / real tokens. lmforge without masks = its shards rewritten without the two mask "
           f"columns by the same IPC stream writer. The peer stores what the recipe's tokenizer returns: {peer_cols}.", "",
           "| input | output | bytes | bytes/token |", "|---|---|---:|---:|"]
    for s in sizes:
        b, tokens = d["bytes"][s], d["write"][s][LM]["tokens"]
        out += [f"| {s} | lmforge shards, K={k} mask variants | {b[LM]['bytes']:,} | {b[LM]['bytes_per_token']:.2f} |",
                f"| {s} | lmforge shards, no mask columns | {round(b[LM]['bytes_per_token_no_masks'] * tokens):,} | "
                f"{b[LM]['bytes_per_token_no_masks']:.2f} |",
                f"| {s} | datasets save_to_disk | {b['datasets']['bytes']:,} | {b['datasets']['bytes_per_token']:.2f} |"]

    def cols(c: dict[str, float]) -> str:
        return ", ".join(f"{n} {v:.2f}" for n, v in c.items())

    out += ["", f"The K={k} masks are {small[LM]['mask_share']:.0%} of lmforge's bytes. Arrow buffer bytes per token by "
            f"column ({sizes[0]}): lmforge {cols(small[LM]['column_bytes_per_token'])}; "
            f"peer {cols(small['datasets']['column_bytes_per_token'])}."]
    return out


def render(d: dict[str, Any]) -> str:
    sizes = list(d["write"])
    inputs = "; ".join(
        f"**{s}** = {d['docs'][s]:,} documents"
        + (f" (`{d['corpus']}` as it is)" if s == sizes[0] else f" (its texts {s.rstrip('x')} times under distinct ids)")
        for s in sizes)
    head = [f"Same text, same tokenizer (`{d['tokenizer']}`; the peer loads it with `AutoTokenizer.from_pretrained`), "
            f"seq {d['seq_len']}. Encoding: the stage encodes this WordPiece tokenizer with lmforge's word cache "
            f"(`pipelines.shards.fast_encode`: HF tokenizers' exact ids, one thread per Beam worker, checked against HF "
            f"tokenizers on every 64th document; it serves the other three families too; `--no-fast-encode` uses HF "
            f"tokenizers' thread pool, `pipelines.shards.rows.tokenizer_threads`); the peer at num_proc=1 gets the "
            f"tokenizers pool, at num_proc="
            f"{d['workers']} one thread per forked worker (TOKENIZERS_PARALLELISM={d['tokenizers_parallelism']}, as a "
            f"pool live across a fork can deadlock). Inputs: {inputs}.", ""]
    return "\n".join(head + _write_section(d) + _loader_section(d) + _bytes_section(d)) + "\n"
