"""The inputs of `lmforge bench scale`: real documents perturbed into as many distinct ones as a size needs, with
planted near-duplicates and exact copies, written once as JSONL.zst files and cached (see bench/corpus/scale.py)."""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GENERATOR_VERSION = 1  # bump when generate() changes, so cached inputs are rebuilt
MB = 1 << 20


@dataclass(frozen=True)
class GenConfig:
    """How synthetic inputs are made from real documents."""

    n_docs: int
    """Documents to generate."""
    seed: int = 0
    """Everything about document i follows from (seed, i): reruns give identical files."""
    files: int = 16
    """JSONL.zst files; document i goes to file i % files."""
    replace_frac: tuple[float, float] = (0.25, 0.35)
    """Fraction of words replaced by vocabulary words, uniform in this range per document.
    Two documents from one base at 30% each share a 5-word shingle with p ~ 0.7^10 = 0.03,
    so their Jaccard is ~0.02, far below the 0.8 near-duplicate threshold."""
    drop_line: float = 0.1
    """Probability of dropping each line (the stage's text has one paragraph per line)."""
    swap_lines: float = 0.5
    """Probability of swapping two lines."""
    near_frac: float = 0.10
    """Fraction of documents that are near-duplicates of an earlier original."""
    near_replace: float = 0.015
    """Words replaced in a near-duplicate. Each replaced word breaks up to 5 shingles:
    kept shingles ~ 0.985^5 = 0.927, Jaccard ~ 0.927 / (2 - 0.927) = 0.86 >= 0.8. (3% would give
    0.97^5 = 0.86 -> J ~ 0.75, mostly below the threshold.)"""
    exact_frac: float = 0.01
    """Fraction of documents that are exact copies of an earlier original."""

    def __post_init__(self) -> None:
        if self.n_docs < 1 or self.files < 1:
            raise ValueError(f"n_docs and files must be >= 1, got {self.n_docs}, {self.files}")
        if not 0 <= self.near_frac + self.exact_frac < 1:
            raise ValueError("near_frac + exact_frac must be in [0, 1)")


@dataclass(frozen=True)
class Bases:
    """Real documents split into lines of words, and per-language vocabularies."""

    docs: list[tuple[list[list[str]], str, str]]
    """(lines of words, url, language) per document."""
    vocab: dict[str, list[str]]
    """language -> alphabetic words with repeats (drawing from it follows word frequency, so
    stop-word and word-length statistics, which Gopher's rules check, stay realistic)."""

    @classmethod
    def from_texts(cls, docs: list[tuple[str, str, str]]) -> Bases:
        # Blank lines (paragraph breaks, if the stage keeps them) stay as empty lines.
        split = [([line.split() for line in text.strip().split("\n")], url, lang) for text, url, lang in docs]
        vocab: dict[str, list[str]] = {}
        for lines, _, lang in split:
            vocab.setdefault(lang, []).extend(w for line in lines for w in line if w.isalpha())
        if not split or not all(vocab.values()):
            raise ValueError("need at least one base document with alphabetic words per language")
        return cls(split, vocab)

    def digest(self) -> str:
        h = hashlib.sha256()
        for lines, url, lang in self.docs:
            h.update(f"{url}\t{lang}\t{lines}\n".encode())
        return h.hexdigest()


def corpus_documents(stage_dir: Path) -> list[tuple[str, str, str]]:
    """(text, url, language) of the kept documents of a finished corpus stage, distinct texts, in file order."""
    import pyarrow.parquet as pq

    seen, out = set(), []
    for f in sorted(Path(stage_dir).glob("data/*/*.parquet")):
        for row in pq.read_table(f, columns=["text", "url", "language"]).to_pylist():
            if row["text"] not in seen:
                seen.add(row["text"])
                out.append((row["text"], row["url"] or "", row["language"]))
    if not out:
        raise FileNotFoundError(f"{stage_dir}/data/*/*.parquet holds no documents")
    return out


def real_documents(crawl: list[str]) -> list[tuple[str, str, str]]:
    """(text, url, language) of every document the stage's pure core keeps, distinct texts, in read order."""
    from pipelines.corpus.clean import KEPT, process_document
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.readers import read_file
    from pipelines.io import expand_inputs
    from schemas.records import RawDocument

    cfg = CorpusConfig(input=crawl, output="-")
    seen, out = set(), []
    for path in expand_inputs(crawl):
        for rec in read_file(path):
            if isinstance(rec, RawDocument):
                status, value = process_document(rec, cfg)
                if status == KEPT and value["text"] not in seen:
                    seen.add(value["text"])
                    out.append((value["text"], value["url"], value["language"]))
    return out


# ---------------------------------------------------------------- the generator (pure)


def perturb(lines: list[list[str]], vocab: list[str], rate: float, rng: random.Random,
            drop_line: float = 0.0, swap_lines: float = 0.0) -> str:
    """Drop and swap lines, then replace `rate` of the words with vocabulary words. A line's last
    word is never replaced: it carries the end punctuation C4's line rule asks for."""
    lines = [ln for ln in lines if rng.random() >= drop_line] or lines[:1]
    if len(lines) > 1 and rng.random() < swap_lines:
        a, b = rng.sample(range(len(lines)), 2)
        lines[a], lines[b] = lines[b], lines[a]
    out = [list(ln) for ln in lines]
    slots = [(i, j) for i, ln in enumerate(out) for j in range(len(ln) - 1)]
    k = max(1, round(rate * len(slots))) if rate > 0 and slots else 0  # >= 1, or a short near-copy is an exact one
    for i, j in rng.sample(slots, k):
        for _ in range(10):  # a different word (frequent words like "the" often draw themselves)
            w = rng.choice(vocab)
            if w != out[i][j]:
                break
        out[i][j] = w
    return "\n".join(" ".join(ln) for ln in out)


def _rng(cfg: GenConfig, i: int) -> random.Random:
    return random.Random(f"{cfg.seed}/{i}")  # str seeds hash with sha512: stable across processes


def role(cfg: GenConfig, i: int) -> str:
    """"original", "near" or "exact"; the first draw of document i's generator."""
    r = _rng(cfg, i).random()
    if i == 0 or r >= cfg.near_frac + cfg.exact_frac:
        return "original"
    return "near" if r < cfg.near_frac else "exact"


def original(bases: Bases, cfg: GenConfig, i: int) -> tuple[str, str, str]:
    """(text, url, language) of document i as an original (whatever its role)."""
    rng = _rng(cfg, i)
    rng.random()  # the role draw
    lines, url, lang = bases.docs[rng.randrange(len(bases.docs))]
    text = perturb(lines, bases.vocab[lang], rng.uniform(*cfg.replace_frac), rng, cfg.drop_line, cfg.swap_lines)
    return text, url, lang


def generate_one(bases: Bases, cfg: GenConfig, i: int) -> dict[str, Any]:
    """Document i as a JSONL record; copies point at an earlier original, regenerated on demand,
    so nothing is held in memory between documents."""
    kind = role(cfg, i)
    rng = _rng(cfg, i)
    if kind == "original":
        text, url, lang = original(bases, cfg, i)
        return {"id": f"scale-{i:08d}", "url": f"{url}?v={i}" if url else "", "text": text, "kind": kind}
    rng.random()
    j = rng.randrange(i)
    while role(cfg, j) != "original":  # ends at 0, always an original
        j -= 1
    text, url, lang = original(bases, cfg, j)
    if kind == "near":
        text = perturb([ln.split() for ln in text.split("\n")], bases.vocab[lang], cfg.near_replace, rng)
    # Zero-padded ids sort like i, so the stage keeps the original (smallest id) of each cluster.
    return {"id": f"scale-{i:08d}", "url": f"{url}?v={i}" if url else "", "text": text, "kind": kind, "of": f"scale-{j:08d}"}


def generate(bases: Bases, cfg: GenConfig) -> Iterator[dict[str, Any]]:
    for i in range(cfg.n_docs):
        yield generate_one(bases, cfg, i)


def write_inputs(bases: Bases, cfg: GenConfig, out: Path, progress: bool = True) -> dict[str, Any]:
    """Stream cfg.n_docs documents into out/part-NNN.jsonl.zst (written under a temporary name,
    then renamed); out/.generated.json (hidden: the stage skips dot-files) describes them."""
    import zstandard
    from tqdm import tqdm

    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    files = [zstandard.ZstdCompressor(level=3).stream_writer(open(tmp / f"part-{k:03d}.jsonl.zst", "wb"))
             for k in range(cfg.files)]
    kinds = {"original": 0, "near": 0, "exact": 0}
    try:
        for i, rec in enumerate(tqdm(generate(bases, cfg), total=cfg.n_docs, desc=f"generate {cfg.n_docs:,}",
                                     unit="doc", disable=not progress, mininterval=1.0)):
            kinds[rec["kind"]] += 1
            files[i % cfg.files].write((json.dumps(rec, ensure_ascii=False) + "\n").encode())
    finally:
        for f in files:
            f.close()
    meta = {"generator_version": GENERATOR_VERSION, "config": asdict(cfg), "kinds": kinds,
            "bases": len(bases.docs), "bases_sha256": bases.digest()}
    text = json.dumps(meta, indent=1, sort_keys=True) + "\n"
    (tmp / ".generated.json").write_text(text)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return json.loads(text)  # as cached_meta() will read it (tuples become lists)


def cached_meta(out: Path, cfg: GenConfig) -> dict[str, Any] | None:
    """The description of cached inputs if they were made by this generator with this config."""
    try:
        meta = json.loads((out / ".generated.json").read_text())
    except (OSError, ValueError):
        return None
    ok = meta.get("generator_version") == GENERATOR_VERSION and meta.get("config") == json.loads(json.dumps(asdict(cfg)))
    return meta if ok else None


# ---------------------------------------------------------------- memory of a process tree
