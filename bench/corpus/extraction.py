"""Text extraction: resiliparse (what the corpus stage uses) against trafilatura, on the news
pages of samples/crawl whose gold text newspaper4k ships (samples/gold/newspaper4k).

    lmforge bench extraction

Quality is bag-of-words F1 against the gold text (words are `\\w+`; scripts written without
spaces, such as Chinese, Japanese, Thai and Burmese, count characters). Speed is pages/s over
the same pages, single process, best of 3.
"""
from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import write_section
from common.config import opt
from pipelines.corpus.readers import read_file
from pipelines.corpus.text import decode_html, html_to_text
from schemas.records import RawDocument

_WORD = re.compile(r"\w+")
_NO_SPACES = re.compile(r"[\u0e00-\u0e7f\u1000-\u109f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


@dataclass
class ExtractionBenchConfig:
    crawl: str = opt("samples/crawl", "folder with news-*.warc.gz")
    gold: str = opt("samples/gold/newspaper4k", "gold texts and index.json")


def tokens(text: str) -> Counter:
    out: Counter = Counter()
    for w in _WORD.findall(text.lower()):
        if _NO_SPACES.search(w):
            out.update(w)
        else:
            out[w] += 1
    return out


def f1(pred: str, gold: str) -> tuple[float, float, float]:
    p, g = tokens(pred), tokens(gold)
    overlap = sum((p & g).values())
    precision = overlap / max(1, sum(p.values()))
    recall = overlap / max(1, sum(g.values()))
    return precision, recall, 2 * precision * recall / max(1e-9, precision + recall)


def load_pages(crawl: Path, gold_dir: Path) -> list[tuple[str, str, str]]:
    index = json.loads((gold_dir / "index.json").read_text())
    pages = []
    for path in sorted(crawl.glob("news-*.warc.gz")):
        for rec in read_file(str(path)):
            if isinstance(rec, RawDocument) and rec.url in index and rec.html:
                pages.append((rec.url, decode_html(rec.html, rec.charset).text, (gold_dir / index[rec.url]).read_text()))
    if not pages:
        raise RuntimeError(f"no page of {crawl}/news-*.warc.gz has a gold text in {gold_dir}")
    return pages


def extractors() -> dict:
    found = {"resiliparse (main_content=True; lmforge's choice)": html_to_text}
    try:
        import trafilatura

        found[f"trafilatura {trafilatura.__version__} (extract, defaults)"] = lambda html: trafilatura.extract(html) or ""
    except ImportError:
        pass
    return found


def parse(argv: list[str] | None) -> tuple[ExtractionBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench extraction", __doc__, ExtractionBenchConfig)
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: docs/BENCHMARKS.md)")
    return parse_bench(ap, ExtractionBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    a, ns = parse(argv)
    pages = load_pages(Path(a.crawl), Path(a.gold))
    rows, data = [], {}
    for name, fn in extractors().items():
        scores = [f1(fn(html), gold) for _, html, gold in pages]
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _, html, _ in pages:
                fn(html)
            best = min(best, time.perf_counter() - t0)
        mean = [sum(s[i] for s in scores) / len(scores) for i in range(3)]
        data[name] = {"precision": mean[0], "recall": mean[1], "f1": mean[2], "pages_per_s": len(pages) / best,
                      "per_page_f1": {u: round(s[2], 3) for (u, _, _), s in zip(pages, scores)}}
        rows.append(f"| {name} | {mean[0]:.3f} | {mean[1]:.3f} | {mean[2]:.3f} | {len(pages) / best:,.0f} |")
    body = "\n".join([
        f"Main-text extraction on the {len(pages)} news pages of samples/crawl that have newspaper4k gold texts "
        "(bag-of-words against the gold; mean over pages):", "",
        "| extractor | precision | recall | F1 | pages/s |", "|---|---:|---:|---:|---:|", *rows, ""])
    write_section(Path(ns.out), "corpus: text extraction against newspaper4k gold", body, data)
    print(body)
    return 0
