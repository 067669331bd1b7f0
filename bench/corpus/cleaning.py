"""Corpus-stage benchmarks: cleaning speed against datatrove's filters, the URL filter and PII steps
against datatrove's (bench/corpus/url_pii.py), decontamination against datatrove's (bench/corpus/decont.py),
MinHash signature speed against datasketch-naive and rensa, and near-duplicate quality against brute-force
Jaccard on planted duplicates.

    lmforge bench corpus [--docs 2000] [--bases 300]

Documents are the real pages of samples/crawl, extracted and cleaned by the corpus stage's
pure core (no Beam), so every contender hashes the same text and the same 5-word shingles.
"""
from __future__ import annotations

import argparse
import itertools
import random
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import write_section
from common.config import opt
from pipelines.corpus.beam_dedup import choose_representative
from pipelines.corpus.clean import KEPT, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.dedup import (
    band_keys,
    bucket_candidates,
    detection_probability,
    exact_jaccard,
    lsh_params,
    quality,
    rank_key,
    shingle_hashes,
    shingles,
    signatures,
)
from pipelines.corpus.graph import components_local
from pipelines.corpus.readers import read_file
from pipelines.corpus.text import DecodeError, decode_html, html_to_text, identify_language, normalize_text
from pipelines.io import expand_inputs
from schemas.records import RawDocument

NUM_PERM, NGRAM, THRESHOLD = 128, 5, 0.8


@dataclass
class CorpusBenchConfig:
    crawl: list[str] = opt(["samples/crawl"], "pages to benchmark on")
    docs: int = opt(2000, "documents for the speed benchmark")
    bases: int = opt(300, "base documents for the quality benchmark")
    cache: str = opt("samples/.cache/bench-encyclopedic", "where the FOLDOC package for the encyclopedic agreement set "
                     "is downloaded, and under decont/ the labelled sets decontamination is measured against")
    e2e_docs: int = opt(20000, "documents for the end-to-end run against datatrove's full pipeline "
                        "(bench/corpus/end_to_end.py; 0 skips it; its runs are cached under samples/.cache/bench-e2e)")


def sample_texts(crawl: list[str], limit: int) -> list[str]:
    cfg = CorpusConfig(input=crawl, output="-")
    texts = []
    for path in expand_inputs(crawl):
        for rec in read_file(path):
            if isinstance(rec, RawDocument):
                status, value = process_document(rec, cfg)
                if status == KEPT:
                    texts.append(value["text"])
    texts.sort()
    if not texts:
        raise RuntimeError(f"no document survived cleaning in {crawl}")
    return (texts * (limit // len(texts) + 1))[:limit]


def english_pages(crawl: list[str]) -> list[tuple[str, str]]:
    """(record id, page) as the cleaning rules first see it: decoded, extracted, normalised, English;
    one per id, sorted by id."""
    out: dict[str, str] = {}
    for path in expand_inputs(crawl):
        for rec in read_file(path):
            if isinstance(rec, RawDocument) and rec.html is not None and rec.content_type == "text/html":
                try:
                    text = normalize_text(html_to_text(decode_html(rec.html, rec.charset).text))
                except DecodeError:
                    continue
                if text and identify_language(text)[0] == "en":
                    out.setdefault(rec.id, text)
    return sorted(out.items())


def extracted_english(crawl: list[str], limit: int) -> list[str]:
    """`limit` pages of english_pages (repeated to reach it), for speed measurements."""
    out = sorted(t for _, t in english_pages(crawl))
    return (out * (limit // max(1, len(out)) + 1))[:limit]


def bench_cleaning(texts: list[str]) -> dict[str, float]:
    """The four rule families as one chain (C4 paper variant, Gopher repetition, Gopher quality, FineWeb),
    ours against datatrove's filters: the configuration whose decisions are compared page by page
    (bench/corpus/agreement.py)."""
    from bench.corpus.agreement import (
        FAMILIES,
        chain,
        datatrove_family,
        datatrove_filters,
        lmforge_config,
        lmforge_family,
    )

    try:  # the configuration whose decisions agree best: FineWeb's line-end marks as datatrove's
        cfg = lmforge_config(datatrove_line_ends=True)
    except ImportError:
        cfg = lmforge_config()

    def ours():
        for t in texts:
            chain(lambda fam, x: lmforge_family(fam, x, cfg), t)

    rates = {"lmforge (C4 paper variant + Gopher repetition + Gopher quality + FineWeb)": _rate(ours, len(texts))}
    try:
        filters = datatrove_filters()
    except ImportError:
        return rates

    def datatrove():
        for t in texts:
            chain(lambda fam, x: datatrove_family(filters[fam], x), t)

    datatrove()  # first call loads spaCy's tokenizer; not counted
    rates["datatrove 0.10 (" + " + ".join(type(filters[f]).__name__ for f in FAMILIES) + ")"] = _rate(datatrove, len(texts), repeat=1)
    return rates


def _rate(fn, n: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


MINHASH_ROUNDS = 5
OURS = ("lmforge (xxh64 word-polynomial shingle hashes; datasketch's affine32 permutations applied in numpy, "
        "equal to MinHash.bulk; batches of 256)")


def bench_minhash(texts: list[str]) -> dict[str, Any]:
    from datasketch import MinHash

    def ours():
        for i in range(0, len(texts), 256):  # the Beam shell's batch size
            signatures(texts[i : i + 256], NUM_PERM, NGRAM)

    def naive():
        for t in texts:
            m = MinHash(num_perm=NUM_PERM)
            for sh in shingles(t, NGRAM):
                m.update(sh)

    contenders = {OURS: ours}
    try:
        from rensa import RMinHash

        def rensa():
            for t in texts:
                m = RMinHash(num_perm=NUM_PERM, seed=1)
                m.update([s.decode() for s in shingles(t, NGRAM)])
                m.digest()

        contenders["rensa RMinHash (Rust)"] = rensa
    except ImportError:
        pass
    # Interleaved rounds, best of each: a slow spell of a shared machine then hits both sides,
    # not whichever happened to run during it.
    best = {name: float("inf") for name in contenders}
    for _ in range(MINHASH_ROUNDS):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    rates = {name: len(texts) / s for name, s in best.items()}
    rates["datasketch naive (MinHash() + update() per shingle)"] = _rate(naive, len(texts), repeat=1)
    return rates


def mutate(words: list[str], rate: float, vocab: list[str], rng: random.Random) -> list[str]:
    out = list(words)
    for i in rng.sample(range(len(out)), int(rate * len(out))):
        out[i] = rng.choice(vocab)
    return out


def bench_dedup_quality(texts: list[str], bases: int, seed: int = 0) -> dict[str, Any]:
    """Plant one variant per base document at a spread of word-replacement rates, then compare
    the pairs our LSH + verification + components put in one cluster with the pairs whose exact
    shingle Jaccard is >= THRESHOLD (all pairs, brute force)."""
    rng = random.Random(seed)
    base = sorted({t for t in texts if len(t.split()) >= 80})[:bases]
    vocab = sorted({w for t in base for w in t.split()})
    docs = {}
    for i, t in enumerate(base):
        docs[f"b{i:04d}"] = t
        rate = rng.choice([0.005, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12])  # about J 0.97 ... 0.5
        docs[f"b{i:04d}v"] = " ".join(mutate(t.split(), rate, vocab, rng))
    ids = sorted(docs)
    sets = {i: set(shingles(docs[i], NGRAM)) for i in ids}
    t0 = time.perf_counter()
    truth, by_band = set(), {}
    for a, b in itertools.combinations(ids, 2):
        inter = len(sets[a] & sets[b])
        if inter and inter / len(sets[a] | sets[b]) >= THRESHOLD:
            truth.add((a, b))
    brute_s = time.perf_counter() - t0
    bands, rows = lsh_params(THRESHOLD, NUM_PERM)
    t0 = time.perf_counter()
    sigs = signatures([docs[i] for i in ids], NUM_PERM, NGRAM)
    buckets: dict[bytes, list] = {}
    for i, sig in zip(ids, sigs):
        for k in band_keys(sig, bands, rows):
            buckets.setdefault(k, []).append((i, sig))
    candidates = {e for members in buckets.values() for e in bucket_candidates((m, False) for m, _ in members)}
    hashes = {i: shingle_hashes(docs[i], NGRAM) for i in {x for e in candidates for x in e}}
    edges = [(u, v) for u, v in sorted(candidates) if exact_jaccard(hashes[u], hashes[v]) >= THRESHOLD]
    roots = components_local(edges)
    # The pipeline's representative step (beam_dedup.choose_representative), run locally: each
    # member is removed only if its exact Jaccard with the representative reaches THRESHOLD.
    comps: dict[str, list[str]] = {}
    for i, r in roots.items():
        comps.setdefault(r, [r]).append(i)
    removed: dict[str, str] = {}
    chain_kept = 0
    for root, members in comps.items():
        h = {m: hashes.get(m, shingle_hashes(docs[m], NGRAM)) for m in members}
        ranked = [(m, rank_key(m, quality({"text": docs[m], "language_score": 1.0}), indexed=False), h[m], None) for m in members]
        for out in choose_representative((root, ranked), THRESHOLD):
            if hasattr(out, "tag"):
                chain_kept += 1
            else:
                removed[out[0]] = out[1]["kept_id"]
    lsh_s = time.perf_counter() - t0
    clusters: dict[str, list[str]] = {}
    for i in ids:
        clusters.setdefault(removed.get(i, i), []).append(i)
    predicted = {tuple(sorted(p)) for members in clusters.values() for p in itertools.combinations(members, 2)}
    tp = len(predicted & truth)
    # Removal precision: a removed document should be a near-duplicate of the one kept for it
    # (checked here on brute-force shingle sets, independently of the pipeline's hashes).
    removed_ok = sum(1 for i, r in removed.items() if len(sets[i] & sets[r]) / len(sets[i] | sets[r]) >= THRESHOLD)
    # Duplicates left behind: true pairs whose two documents are both kept.
    left = sum(1 for a, b in truth if a not in removed and b not in removed)
    by_band = {}
    for a, b in itertools.combinations(ids, 2):
        if b != a + "v":
            continue
        j = len(sets[a] & sets[b]) / len(sets[a] | sets[b])
        band = f"{int(j * 20) / 20:.2f}"
        hit = (a, b) in predicted
        by_band.setdefault(band, [0, 0])
        by_band[band][0] += hit
        by_band[band][1] += 1
    return {"documents": len(ids), "true_pairs_j_ge_0.8": len(truth), "predicted_pairs": len(predicted),
            "recall": tp / max(1, len(truth)), "precision": tp / max(1, len(predicted)),
            "removed": len(removed), "removal_precision": removed_ok / max(1, len(removed)),
            "true_pairs_both_kept": left, "chain_members_kept": chain_kept,
            "bands": bands, "rows": rows, "brute_force_seconds": round(brute_s, 2), "lsh_seconds": round(lsh_s, 2),
            "detection_probability": {s: round(detection_probability(s, bands, rows), 3) for s in (0.7, 0.8, 0.9)},
            "planted_pairs_found_by_jaccard": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_band.items())}}


def _as_dict(results: dict | None) -> dict | None:
    """{configuration: {family: confusion}} as JSON."""
    return {cfg: {fam: c.as_dict() for fam, c in res.items()} for cfg, res in results.items()} if results else None


def render_cleaning(cl: dict[str, float], n: int, agreement: float | None = None) -> str:
    ours = next(iter(cl.values()))
    lines = [f"Cleaning rules on {n:,} real English pages of samples/crawl (decoded, extracted and normalised "
             "beforehand; single process; lmforge best of 3 passes, datatrove one pass after a warm-up pass):", "", "| implementation | docs/s | lmforge / this |", "|---|---:|---:|"]
    lines += [f"| {k} | {v:,.0f} | {ours / v:.2f}x |" for k, v in cl.items()]
    if len(cl) > 1:
        peer = list(cl.values())[1]
        at = f", at {100 * agreement:.1f}% keep/drop agreement of the whole chain on these pages (below)" if agreement is not None else ""
        lines += ["", f"Goal: >= 10x datatrove at the configuration that agrees best, `matching` below (measured "
                  f"{ours / peer:.1f}x{at}). Both count spaCy's tokens and sentences: datatrove runs spaCy, lmforge "
                  "its re-implementation of spaCy's English tokenizer and sentencizer (pipelines/corpus/words.py), "
                  "which caches each whitespace-separated chunk's tokens as spaCy does."]
    return "\n".join(lines) + "\n\n"


def render(mh: dict[str, float], dq: dict[str, Any], n_docs: int) -> str:
    ours = mh[OURS]
    lines = [f"MinHash signatures from text ({n_docs:,} real cleaned pages of samples/crawl, {NUM_PERM} permutations, "
             f"{NGRAM}-word shingles, single process; lmforge and rensa best of {MINHASH_ROUNDS} interleaved rounds, "
             "datasketch naive one pass):", "",
             "| implementation | docs/s | lmforge / this |", "|---|---:|---:|"]
    for name, r in mh.items():
        lines.append(f"| {name} | {r:,.0f} | {ours / r:.2f}x |")
    naive = mh["datasketch naive (MinHash() + update() per shingle)"]
    lines += ["", f"Goals: >= 10x datasketch naive (measured {ours / naive:.1f}x)"
              + (f"; >= 0.8x rensa (measured {ours / mh['rensa RMinHash (Rust)']:.2f}x)." if "rensa RMinHash (Rust)" in mh else "."), ""]
    lines += [f"Near-duplicate quality against brute-force exact Jaccard ({dq['documents']} documents: real pages plus one "
              f"planted variant each, words replaced at random; LSH {dq['bands']} bands x {dq['rows']} rows, "
              f"one anchor per bucket, candidates confirmed on exact shingle sets, clusters by connected components):", "",
              "| measure | value | goal |", "|---|---:|---:|",
              f"| recall of pairs with J >= 0.8 | {dq['recall']:.3f} | >= 0.95 |",
              f"| precision of pairs put in one cluster | {dq['precision']:.3f} | >= 0.98 |",
              f"| removal precision (removed doc has J >= 0.8 with the doc kept for it) | {dq['removal_precision']:.3f} ({dq['removed']} removed) | |",
              f"| true pairs with both documents kept (duplicates left) | {dq['true_pairs_both_kept']} | |",
              f"| members kept because they reached the cluster only through a chain | {dq['chain_members_kept']} | |",
              f"| true pairs / predicted pairs | {dq['true_pairs_j_ge_0.8']} / {dq['predicted_pairs']} | |",
              f"| LSH + verify + components / brute force seconds | {dq['lsh_seconds']} / {dq['brute_force_seconds']} | |",
              "", "A cluster is the representative plus the members verified against it (exact Jaccard >= 0.8); members "
              "connected only through a chain (a~b~c with a and c apart) stay kept. Pairs of members below J 0.8 can "
              "remain (both near the representative, further from each other).",
              "Planted pairs found, by their exact Jaccard (found/planted): "
              + ", ".join(f"J {k}: {v}" for k, v in dq["planted_pairs_found_by_jaccard"].items()) + ".",
              f"Theoretical detection probability 1-(1-s^r)^b: {dq['detection_probability']}."]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> tuple[CorpusBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench corpus", __doc__, CorpusBenchConfig)
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: docs/BENCHMARKS.md)")
    return parse_bench(ap, CorpusBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    a, ns = parse(argv)
    pages = english_pages(a.crawl)
    agreement = encyclopedic = url_results = pii_results = decont_results = None
    try:
        from bench.corpus.agreement import CHAIN, MATCHING, compare, judge
        from bench.corpus.agreement import render as render_agreement

        print(f"bench corpus: keep/drop agreement with datatrove on {len(pages)} pages ...", flush=True)
        agreement = compare(pages)
        agreement_text = render_agreement(f"{len(pages):,} English pages of {' '.join(a.crawl)} (extracted, normalised)", agreement)
        from bench.corpus.encyclopedic import texts as encyclopedic_texts

        try:
            enc = encyclopedic_texts(Path(a.cache))
        except (OSError, subprocess.CalledProcessError) as e:
            agreement_text += f"\nShort encyclopedic texts (FOLDOC, Debian dict-foldoc) not available here: {e}\n"
        else:
            print(f"bench corpus: keep/drop agreement on {len(enc)} FOLDOC entries ...", flush=True)
            encyclopedic = compare(enc)
            agreement_text += "\n" + render_agreement(
                f"{len(enc):,} short encyclopedic texts (FOLDOC entries of >= 200 characters, Debian dict-foldoc, GFDL; "
                "bench/corpus/encyclopedic.py)", encyclopedic)
        agreement_text += "\n" + judge({"samples/crawl": agreement, **({"FOLDOC": encyclopedic} if encyclopedic else {})})
        from bench.corpus import url_pii

        print("bench corpus: URL filter and PII against datatrove ...", flush=True)
        ut1_domains, ut1_listed = url_pii.ut1_urls()
        url_results = url_pii.compare_urls({"crawl": url_pii.crawl_urls(a.crawl), "ut1": ut1_domains, "ut1_urls": ut1_listed})
        pii_results = url_pii.compare_pii([p for _, p in pages])
        agreement_text += "\n" + url_pii.render(url_results, pii_results)
        from bench.corpus.decont import bench_decont
        from bench.corpus.decont import render as render_decont

        print("bench corpus: decontamination against datatrove ...", flush=True)
        decont_results = bench_decont([p for _, p in pages], Path(a.cache, "decont"))
        agreement_text += "\n" + render_decont(decont_results)
    except ImportError:
        agreement_text = "datatrove is not installed (`pip install -e '.[bench]'`): keep/drop agreement not measured.\n"
    raw = extracted_english(a.crawl, a.docs)
    print(f"bench corpus: cleaning {len(raw)} documents ...", flush=True)
    cl = bench_cleaning(raw)
    texts = sample_texts(a.crawl, a.docs)
    print(f"bench corpus: {len(texts)} documents; MinHash ...", flush=True)
    mh = bench_minhash(texts)
    print("bench corpus: dedup quality ...", flush=True)
    dq = bench_dedup_quality(texts, a.bases)
    e2e, e2e_text = None, ""
    if a.e2e_docs and agreement is not None:  # datatrove is installed
        from bench.corpus import end_to_end
        from bench.kit.real_text import build

        e2e = end_to_end.bench_e2e(build(Path("samples/.cache/transfer")), Path("samples/.cache/bench-e2e"), a.e2e_docs)
        e2e_text = "\n" + end_to_end.render(e2e)
    body = (render_cleaning(cl, len(raw), agreement[MATCHING][CHAIN].agreement if agreement else None) + agreement_text
            + "\n" + render(mh, dq, len(texts)) + e2e_text)
    write_section(Path(ns.out), "corpus: cleaning, MinHash and near-duplicate quality", body,
                  {"cleaning_docs_per_s": cl, "minhash_docs_per_s": mh, "dedup_quality": dq,
                   "agreement": _as_dict(agreement), "agreement_encyclopedic": _as_dict(encyclopedic),
                   "url_filter": url_results, "pii": pii_results, "decontamination": decont_results,
                   "end_to_end": e2e})
    print(body)
    return 0
