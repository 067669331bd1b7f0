"""Tokenizers: fertility (tokens per whitespace word) of each model type of the tokenizer stage
on held-out English and Russian documents of a corpus run, and how often decode(encode(x)) == x.

    lmforge bench tokenizer [--corpus runs/demo/corpus] [--vocab-size 8000] [--train-docs 20000]

Documents are split by a CRC-32 of their id: --heldout-per-mille of them are held out, the rest
are the training pool, from which each model trains on the same `--train-docs` sample (the
stage's own `sample_texts`, so the sample is bounded and streamed). The language is the corpus
partition (data/en, data/ru). Every model gets the same --vocab-size, special tokens included,
so byte_bpe spends 256 of it on bytes and unigram 100 on T5 sentinels. Lower fertility means
shorter sequences for the same text; byte_bpe should round-trip 100% (it sees bytes, no
normaliser), the others lose whatever NFC, whitespace splitting or <unk> changes.
"""
from __future__ import annotations

import argparse
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import write_section
from common.config import opt, require
from pipelines.tokenizer import MODELS, corpus_files, iter_columns, min_vocab, sample_texts, special_ids, train
from schemas.manifest import read_manifest


@dataclass
class TokenizerBenchConfig:
    corpus: str = opt("runs/demo/corpus", "a finished corpus stage directory")
    models: list[str] = opt(list(MODELS), f"model types to train, from {list(MODELS)}")
    vocab_size: int = opt(8000, "vocabulary size of every model, specials included")
    train_docs: int = opt(20000, "training sample size, by hash of the id; 0 = whole pool")
    heldout_per_mille: int = opt(50, "share of documents held out, per mille")
    heldout_docs: int = opt(1000, "at most this many held-out documents per language")
    languages: list[str] = opt(["en", "ru"], "languages to report")

    def __post_init__(self) -> None:
        bad = [m for m in self.models if m not in MODELS]
        require(bool(self.models) and not bad, f"--models: unknown {', '.join(bad) or '(none named)'}; choose from "
                f"{', '.join(MODELS)}")
        low = max(min_vocab(m, 100) for m in self.models)
        require(self.vocab_size >= low, f"--vocab-size {self.vocab_size} is too small for {', '.join(self.models)} "
                f"(at least {low})")


def held_out(doc_id: str, per_mille: int) -> bool:
    """Salted differently from the shards stage's train/valid split, so the two are independent."""
    return zlib.crc32(b"tokenizer-heldout:" + doc_id.encode()) % 1000 < per_mille


def load_held_out(files: list[Path], per_mille: int, cap: int) -> dict[str, list[str]]:
    """Up to `cap` held-out texts per language (the data/<lang>/ folder), in file order."""
    texts: dict[str, list[str]] = defaultdict(list)
    for f in files:
        lang = f.parent.name
        for doc_id, text in iter_columns([f], ["id", "text"]):
            if len(texts[lang]) >= cap:
                break
            if held_out(doc_id, per_mille):
                texts[lang].append(text)
    return dict(texts)


def measure(tok, texts: list[str]) -> dict[str, float]:
    """Fertility, <unk> share and exact round trips of `tok` on `texts` (no special tokens added)."""
    unk = special_ids(tok)["unk"]
    encs = tok.encode_batch(texts, add_special_tokens=False)
    tokens = sum(len(e.ids) for e in encs)
    words = sum(len(t.split()) for t in texts)
    exact = sum(tok.decode(e.ids, skip_special_tokens=False) == t for e, t in zip(encs, texts))
    return {"docs": len(texts), "words": words, "tokens": tokens, "fertility": tokens / max(1, words),
            "unk_share": sum(e.ids.count(unk) for e in encs) / max(1, tokens), "exact_round_trip": exact / max(1, len(texts))}


def parse(argv: list[str] | None) -> tuple[TokenizerBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench tokenizer", __doc__, TokenizerBenchConfig)
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: docs/BENCHMARKS.md)")
    return parse_bench(ap, TokenizerBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    a, ns = parse(argv)
    read_manifest(a.corpus)  # the corpus stage must have finished
    files = corpus_files(a.corpus)
    heldout = load_held_out(files, a.heldout_per_mille, a.heldout_docs)
    pool = sample_texts(files, a.train_docs, keep=lambda i: not held_out(i, a.heldout_per_mille))
    train_docs = sum(1 for _ in pool())
    langs = a.languages
    rows, data = [], {"corpus": a.corpus, "vocab_size": a.vocab_size, "train_docs": train_docs,
                      "heldout_docs": {lang: len(heldout.get(lang, [])) for lang in langs}, "models": {}}
    for model in a.models:
        t0 = time.perf_counter()
        tok = train(pool, model, a.vocab_size)
        seconds = time.perf_counter() - t0
        per_lang = {lang: measure(tok, heldout[lang]) for lang in langs if heldout.get(lang)}
        data["models"][model] = {"vocab": tok.get_vocab_size(), "train_seconds": seconds, **per_lang}

        def cell(lang: str, key: str, fmt: str, m: dict = per_lang) -> str:
            return format(m[lang][key], fmt) if lang in m else "n/a"

        rows.append(f"| {model} | {tok.get_vocab_size():,} | {seconds:.1f} | "
                    + " | ".join(cell(lang, "fertility", ".3f") for lang in langs) + " | "
                    + " | ".join(cell(lang, "unk_share", ".3%") for lang in langs) + " | "
                    + " | ".join(cell(lang, "exact_round_trip", ".1%") for lang in langs) + " |")
        print(rows[-1], flush=True)
    counts = ", ".join(f"{len(heldout.get(lang, []))} {lang}" for lang in langs)
    head = (["model", "vocab", "train s"] + [f"{lang} tokens/word" for lang in langs]
            + [f"{lang} <unk>" for lang in langs] + [f"{lang} exact round trip" for lang in langs])
    body = "\n".join([
        f"Each tokenizer type of the tokenizer stage trained on the same {train_docs:,} documents of `{a.corpus}` "
        f"(vocab {a.vocab_size:,}, specials included) and measured on held-out documents ({counts}; "
        f"{a.heldout_per_mille}/1000 of ids by CRC-32). Fertility is tokens per whitespace-separated word, "
        "without special tokens; exact round trip is the share of documents with decode(encode(text)) == text.", "",
        "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1), *rows, ""])
    write_section(Path(ns.out), "tokenizer: fertility and round trip on held-out text", body, data)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
