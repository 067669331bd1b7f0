"""N-gram decontamination measured on real pages: planted recall, clean pages flagged, page-by-page
agreement with datatrove 0.10.1's NGramsDecontFilter, and speed.

    from bench.corpus.decont import decont_agreement
    report = decont_agreement(pages, read_eval_sets(cfg), cfg)   # a dict, JSON-ready

(a) planted: up to `max_planted` items that have an n-gram at all (an item shorter than n_grams
    words cannot be found by either implementation; `too_short` counts them) are planted into
    clean pages three ways: "whole" (its own paragraph), "inside" (mid-sentence in the page's
    longest line) and "changed" (its own paragraph, upper case, other punctuation). Recall: the
    share whose match names the planted item.
(b) clean_flagged: the unplanted pages that match, each with its n-gram and items, to be explained.
(c) agreement: every page, planted and clean, through both: the same decision, the same n-gram.
    datatrove's index is written as its indexer writes it (`<task>.index.hashes`, uint64) from its
    own `compute_hashes`, called directly: its indexer's constructor and `run` need lighteval.
    Its hash is its default (xxhash 64-bit; xxhash is pinned below 4, which refuses the str datatrove hashes).
(d) docs_per_s over the same documents, one pass each (index building and loading excluded).
"""
from __future__ import annotations

import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from pipelines.corpus.decont import DecontConfig, EvalItem, NGramIndex, word_tokens

WAYS = ("whole", "inside", "changed")
INSTALL = "pip install -c constraints.txt -e '.[bench]'"
LISTED = 20


def plant(page: str, text: str, way: str) -> str:
    """`page` with `text` planted the given way (see the module docstring)."""
    lines = page.split("\n")
    if way == "inside":
        i = max(range(len(lines)), key=lambda j: len(lines[j]))
        cut = lines[i].find(" ", len(lines[i]) // 2)
        cut = len(lines[i]) if cut < 0 else cut
        lines[i] = f"{lines[i][:cut]} {text} {lines[i][cut:]}"
    else:
        if way == "changed":  # every mark used is in datatrove's punctuation list
            text = "".join(c.upper() if c.isascii() else c for c in text)  # "ß".upper() is "SS"
            text = "« " + text.replace(",", " --").replace(".", "!").replace("'", "’") + " »"
        lines.insert(len(lines) // 2, text)
    return "\n".join(lines)


def datatrove_indexer(cfg: DecontConfig) -> Any:
    """What NGramsDecontIndexer.compute_hashes reads from `self`, for cfg's options."""
    from datatrove.pipeline.decont.n_grams import NGramsDecontConfig
    from datatrove.utils.hashing import HashConfig, create_hash_func
    from datatrove.utils.text import TextNormConfig
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    norm = {k: v for k, v in cfg.norm().items() if k not in ("n_grams", "skip_number_ngrams")}
    config = NGramsDecontConfig(n_grams=cfg.n_grams, norm_config=TextNormConfig(**norm), hash_config=HashConfig())
    return SimpleNamespace(config=config, tokenizer=load_word_tokenizer("en"), hash_func=create_hash_func(config.hash_config))


def datatrove_filter(items: list[EvalItem], cfg: DecontConfig, folder: Path) -> Any:
    """NGramsDecontFilter over `items`' label n-grams (no query), its index loaded."""
    from datatrove.pipeline.decont.n_grams import NGramsDecontFilter, NGramsDecontIndexer

    me = datatrove_indexer(cfg)
    per_task: dict[str, set[int]] = {}
    for it in items:
        per_task.setdefault(it.task, set()).update(NGramsDecontIndexer.compute_hashes(me, it.text))
    for task, hashes in per_task.items():
        np.array(sorted(hashes), dtype="<u8").tofile(folder / f"{task.replace(' ', '_')}.index.hashes")
    f = NGramsDecontFilter(str(folder), config=me.config)
    f.load_index_hashes()
    return f


def decont_agreement(pages: list[str], items: list[EvalItem], cfg: DecontConfig, max_planted: int = 300) -> dict:
    """(a) to (d) of the module docstring on `pages` (real page texts) and `items` (evaluation items):
    pages, items and too_short per task, planted (per way: planted, found, recall, missed), clean_flagged,
    agreement (docs, same_decision, same_ngram, differ; a sentence when datatrove is not installed),
    docs_per_s, index_build_s. Items are planted every len/max_planted-th, each page used in turn."""
    t0 = time.perf_counter()
    index = NGramIndex.build(items, cfg)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mine = [index.match(p) for p in pages]  # timed with the planted pages below: one pass over `docs`
    match_s = time.perf_counter() - t0
    clean = [i for i, m in enumerate(mine) if m is None]
    checkable = [it for it in items if len(word_tokens(it.text, cfg)) >= cfg.n_grams]
    chosen = checkable[::max(1, len(checkable) // max(1, max_planted))][:max_planted] if clean else []
    docs = list(pages)
    planted: dict[str, Any] = {}
    for way in WAYS:
        found, missed = 0, []
        for j, it in enumerate(chosen):
            docs.append(plant(pages[clean[j % len(clean)]], it.text, way))
            t0 = time.perf_counter()
            mine.append(m := index.match(docs[-1]))
            match_s += time.perf_counter() - t0
            if m is not None and it.ref in m.items:
                found += 1
            elif len(missed) < LISTED:
                missed.append({"item": asdict(it), "page": clean[j % len(clean)], "ngram": m and m.ngram})
        planted[way] = {"planted": len(chosen), "found": found, "recall": found / len(chosen) if chosen else None,
                        "missed": missed}
    report: dict[str, Any] = {
        "pages": len(pages), "items": index.items_per_task(), "too_short": index.too_short, "n_grams": cfg.n_grams,
        "index_build_s": build_s, "planted": planted,
        "clean_flagged": [{"page": i, "ngram": m.ngram, "items": [asdict(r) for r in m.items]}
                          for i, m in enumerate(mine[:len(pages)]) if m is not None],
        "docs_per_s": {"lmforge": len(docs) / match_s},
    }
    try:
        from datatrove.data import Document
    except ImportError:
        report["agreement"] = f"datatrove is not installed: {INSTALL}"
        return report
    with tempfile.TemporaryDirectory() as tmp:
        dt = datatrove_filter(items, cfg, Path(tmp))
        theirs = [Document(text=d, id=str(i)) for i, d in enumerate(docs)]
        t0 = time.perf_counter()
        kept = [dt.filter(doc) is True for doc in theirs]
        report["docs_per_s"]["datatrove"] = len(docs) / (time.perf_counter() - t0)
    same = [(m is None) == k for m, k in zip(mine, kept)]
    same_ngram = [(m.ngram if m else None) == d.metadata.get("contaminated_ngram") for m, d in zip(mine, theirs)]
    report["agreement"] = {
        "docs": len(docs), "same_decision": sum(same), "same_ngram": sum(same_ngram),
        "differ": [{"doc": i, "planted": i >= len(pages), "lmforge": m and m.ngram,
                    "datatrove": d.metadata.get("contaminated_ngram")}
                   for i, (m, d, s, g) in enumerate(zip(mine, theirs, same, same_ngram)) if not (s and g)][:LISTED],
    }
    return report



def bench_decont(pages: list[str], work: Path, sources: tuple[str, ...] = ("vader", "reuters", "wsj_pos")) -> dict:
    """decont_agreement on `pages` against the validation and test splits of the labelled sources,
    prepared into `work` (Reuters and WSJ come from their Debian packages, fetched on first use)."""
    from pipelines.corpus.decont import read_eval_sets
    from pipelines.labeled.registry import prepare

    folders, missing = [], {}
    for name in sources:
        try:
            folders.append(str(prepare(name, work / name)))
        except (OSError, ValueError) as e:  # a package that cannot be fetched here: said, not hidden
            missing[name] = str(e)
    cfg = DecontConfig(files=folders)
    items = read_eval_sets(cfg)
    report = decont_agreement(pages, items, cfg)
    # datatrove's decisions are compared at its own options: lmforge's default also leaves figures-only
    # n-grams out of the index (DecontConfig.skip_number_ngrams), which datatrove has no switch for.
    same = DecontConfig(files=folders, skip_number_ngrams=False)
    report["as_datatrove"] = decont_agreement(pages, items, same)
    report["sources_missing"] = missing
    return report


def render(r: dict) -> str:
    planted = r["planted"]
    ways = ", ".join(f"{w} {p['found']}/{p['planted']}" for w, p in planted.items())
    recall_ok = all(p["recall"] == 1.0 for p in planted.values() if p["planted"])
    agree = r["as_datatrove"]["agreement"]
    lines = [f"Decontamination ({r['n_grams']}-grams, datatrove's normalisation) on {r['pages']:,} real pages of the sample "
             f"crawl against the validation and test items of " + ", ".join(f"{t} ({n:,}, {r['too_short'].get(t, 0):,} too "
                                                                         "short to check)" for t, n in r["items"].items()) + ":", "",
             "| measure | value | goal |", "|---|---:|---:|",
             f"| planted items found (whole paragraph, inside a paragraph, changed case and punctuation) | {ways} | 100% "
             f"**{'MET' if recall_ok else 'NOT MET'}** |",
             f"| clean pages flagged (lmforge's default) | {len(r['clean_flagged'])} | 0, or each explained |",
             f"| clean pages flagged with figures-only n-grams indexed (`--no-decontaminate-skip-number-ngrams`, datatrove's way) "
             f"| {len(r['as_datatrove']['clean_flagged'])} | |"]
    if isinstance(agree, dict):
        lines.append(f"| same decision as datatrove's NGramsDecontFilter at the same options (planted and clean pages) | {agree['same_decision']:,} / "
                     f"{agree['docs']:,} | all **{'MET' if agree['same_decision'] == agree['docs'] else 'NOT MET'}** |")
        lines.append(f"| same first n-gram as datatrove | {agree['same_ngram']:,} / {agree['docs']:,} | |")
        s = r["docs_per_s"]
        lines.append(f"| docs/s lmforge / datatrove (one pass, index built beforehand) | {s['lmforge']:,.0f} / {s['datatrove']:,.0f} "
                     f"= {s['lmforge'] / s['datatrove']:.1f}x | |")
    else:
        lines.append(f"| agreement with datatrove | {agree} | |")
    for f in r["clean_flagged"]:
        lines.append(f"\nClean page {f['page']} flagged: `{f['ngram']}` ({f['items'][0]}).")
    flagged = Counter((f["ngram"], f["items"][0]["item"]) for f in r["as_datatrove"]["clean_flagged"])
    for (ngram, item), n in flagged.most_common():
        lines.append(f"\nWith figures-only n-grams indexed, {n} clean pages share `{ngram}` with {item}.")
    if r.get("sources_missing"):
        lines.append("\nNot measured (source unavailable): " + "; ".join(f"{k}: {v}" for k, v in r["sources_missing"].items()))
    lines += ["", "Items shorter than n words have no n-gram and are counted, not checked; `--decontaminate-n-grams 8` "
              "reaches more of them (GPT-3 chose n between 8 and 13 per task). Both sides hash n-grams their own way "
              "(lmforge blake2b-64, datatrove its default xxhash-64), so a decision "
              "could differ only by a 64-bit collision."]
    return "\n".join(lines) + "\n"
