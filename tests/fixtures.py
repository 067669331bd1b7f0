"""Test fixtures: a throwaway WordPiece tokenizer and tiny token shards, built in milliseconds.

Tests must not wait for the tokenizer and shards stages, so this writes both to the same
contract (`schemas.shards`, a shards manifest with the `extra` a reader needs). Masks come
from the shards stage's own `mask_variants` (BERT's 15% with 80/10/10). For any other
tokenizer family or objective, `make_corpus` writes a tiny corpus stage that the real
tokenizer stage and `pipelines.shards.stage.run_local` (the shards stage without Beam) read.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipelines.shards.mask_config import MaskConfig, MaskVocab
from pipelines.shards.masking import mask_variants
from schemas.manifest import Manifest, describe_outputs, write_manifest
from schemas.shards import shard_file_name, shard_schema

ROOT = Path(__file__).resolve().parents[1]
VADER = ROOT / "samples" / "labeled" / "vader"

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Real sentences (public-domain openings and proverbs), repeated so a tiny model can learn them.
SENTENCES = [
    "It was the best of times, it was the worst of times.",
    "Call me Ishmael.",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
    "All happy families are alike; each unhappy family is unhappy in its own way.",
    "The quick brown fox jumps over the lazy dog.",
    "A journey of a thousand miles begins with a single step.",
    "Happy families are all alike, and the best of times is now.",
    "The sun rose over the quiet town and the dog barked at the fox.",
    "In the beginning the town was small and the families were happy.",
    "He walked a thousand miles to see the sea for the first time.",
    "She read the letter twice and then put it in the fire.",
    "The old man and the sea were alone in the morning light.",
]


def make_tokenizer(out_dir: str | Path, vocab_size: int = 300, texts: list[str] | None = None) -> Path:
    """Train a lowercase BERT WordPiece tokenizer on `texts` (default SENTENCES) and save it as a HF tokenizer dir."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts or SENTENCES * 4, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    out_dir = Path(out_dir)
    fast.save_pretrained(out_dir)
    return out_dir


def make_shards(out_dir: str | Path, tokenizer_dir: str | Path, seq_len: int = 32, num_variants: int = 2,
                train_rows: int = 40, valid_rows: int = 8, train_files: int = 2, seed: int = 0,
                schema_version: str | None = None, texts: list[str] | None = None, padded_every: int = 3) -> Path:
    """Write `train/shard-0000k-000.arrow`, `valid/shard-00000-000.arrow` and a shards manifest (BERT MLM).

    Rows are packed: consecutive texts (default SENTENCES) joined by [SEP] after a [CLS]; every
    third row (every `padded_every`-th; 0: none) is cut short so padding and `length` are exercised.
    """
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    vocab = len(tok)
    pad, cls, sep, mask = (tok.convert_tokens_to_ids(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]"))
    vocab_spec = MaskVocab(vocab, tuple(sorted({pad, cls, sep, mask, tok.convert_tokens_to_ids("[UNK]")})), mask, pad_id=pad)
    mask_cfg = MaskConfig(num_variants=num_variants, seed=seed)
    encoded = [ids for ids in tok(texts or SENTENCES, add_special_tokens=False)["input_ids"] if ids]
    rng = np.random.default_rng(seed)
    schema = shard_schema(seq_len, num_variants, "mlm", pad_id=pad)
    if schema_version is not None:
        schema = schema.with_metadata({**schema.metadata, b"lmforge.schema": schema_version.encode()})

    def row(i: int) -> dict:
        ids, starts, j = [cls], [0], int(rng.integers(len(encoded)))
        while len(ids) < seq_len:
            if len(ids) > 1:
                starts.append(len(ids))
            ids += encoded[j % len(encoded)] + [sep]
            j += 1
        ids = ids[:seq_len]
        padded = padded_every and i % padded_every == padded_every - 1
        length = seq_len - padded * (seq_len // 4)  # every third row: a quarter is padding
        ids = np.array(ids[:length] + [pad] * (seq_len - length), dtype=np.int32)
        positions, tokens = mask_variants(ids, length, vocab_spec, mask_cfg, shard=0, row=i)
        return {"input_ids": ids.tolist(), "length": length, "doc_starts": [s for s in starts if s < length],
                "mask_positions": [p.tolist() for p in positions], "mask_tokens": [t.tolist() for t in tokens]}

    out_dir = Path(out_dir)
    splits: dict[str, list[str]] = {"train": [], "valid": []}
    plan = [("train", k, train_rows // train_files + (k < train_rows % train_files)) for k in range(train_files)]
    plan.append(("valid", 0, valid_rows))
    for split, k, n in plan:
        rel = shard_file_name(split, k, 0)
        (out_dir / split).mkdir(parents=True, exist_ok=True)
        rows = [row(i) for i in range(n)]
        with pa.ipc.new_stream(str(out_dir / rel), schema) as w:
            w.write_table(pa.Table.from_pylist(rows, schema=schema))
        splits[split].append(rel)
    files = splits["train"] + splits["valid"]
    write_manifest(out_dir, Manifest(
        stage="shards", config={"seq_len": seq_len, "num_variants": num_variants, "fixture": True},
        counts={"train_rows": train_rows, "valid_rows": valid_rows}, outputs=describe_outputs(out_dir, files),
        extra={"seq_len": seq_len, "num_variants": num_variants, "vocab_size": vocab, "pad_id": pad,
               "mask_id": mask, "splits": splits, "objective": "mlm", "family": "bert", "packing": "concat"},
    ))
    return out_dir


def vader_texts(name: str = "tweets", n: int = 300, skip: int = 0) -> list[str]:
    """Human-written sentences from a VADER ground-truth file (`id <tab> score <tab> text`) in samples/."""
    lines = (VADER / f"{name}_GroundTruth.txt").read_text(encoding="utf-8").splitlines()
    return [ln.split("\t", 2)[2] for ln in lines[skip:skip + n]]


def make_corpus(out_dir: str | Path, texts: list[str], lang: str = "en", prefix: str = "doc") -> Path:
    """A corpus stage directory the tokenizer and shards stages accept: data/<lang>/part-00000.parquet
    with `id` and `text`, and a manifest. Ids are `doc-00000`, ... (`prefix`) in the order given."""
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    rel = Path("data", lang, "part-00000.parquet")
    (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [f"{prefix}-{i:05d}" for i in range(len(texts))], "text": texts}), out_dir / rel)
    write_manifest(out_dir, Manifest(stage="corpus", config={"fixture": True}, counts={"kept": len(texts)},
                                     outputs=describe_outputs(out_dir, [rel])))
    return out_dir


OBJECTIVE_TOKENIZERS = {"t5_span": ("unigram", 400), "causal": ("byte_bpe", 500), "span": ("byte_bpe", 500)}
"""The tokenizer family (and a small vocabulary) each non-BERT test objective is built with."""


def make_objective_shards(root: str | Path, objective: str, num_variants: int = 2, seq_len: int = 48) -> Path:
    """Real shards from the stage's local path (no Beam) for `objective`, over 180 vaderSentiment
    texts, with the tokenizer of OBJECTIVE_TOKENIZERS (trained once under root/<model>)."""
    from pipelines.shards.stage import ShardsConfig, run_local
    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer

    root = Path(root)
    corpus = root / "corpus"
    if not (corpus / "manifest.json").exists():
        make_corpus(corpus, vader_texts("tweets", 120) + vader_texts("movieReviewSnippets", 60))
    model, vocab = OBJECTIVE_TOKENIZERS[objective]
    tok = root / model
    if not tok.exists():
        run_tokenizer(TokenizerConfig(corpus=str(corpus), output=str(tok), model=model, vocab_size=vocab, min_frequency=1))
    cfg = ShardsConfig(corpus=str(corpus), tokenizer=str(tok), output=str(root / objective), seq_len=seq_len,
                       valid_per_mille=100, mask=MaskConfig(objective=objective, num_variants=num_variants))
    return run_local(cfg)


def tiny_bert_dir(out_dir: str | Path, hidden: int = 32, layers: int = 2, vocab_size: int = 600) -> Path:
    """A HF model directory (a tiny randomly initialised BertForMaskedLM and a WordPiece tokenizer
    trained on 1,200 VADER sentences), as the pretrain stage would export it; built in about a second."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    out_dir = Path(out_dir) / "tiny-bert"
    texts = [t for name in ("tweets", "movieReviewSnippets", "amazonReviewSnippets") for t in vader_texts(name, 400)]
    make_tokenizer(out_dir, vocab_size=vocab_size, texts=texts)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=128, pad_token_id=0)
    BertForMaskedLM(config).save_pretrained(out_dir)
    return out_dir


def tiny_llama_dir(out_dir: str | Path, hidden: int = 32, layers: int = 2, vocab_size: int = 600) -> Path:
    """A HF model directory of the decoder causal shards train (a tiny randomly initialised LlamaForCausalLM,
    grouped-query attention, built by training.models.model as `lmforge pretrain` builds it) and a byte-level BPE
    tokenizer trained on 1,200 VADER sentences."""
    import torch

    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer
    from training.models.export import load_tokenizer, save_hf
    from training.models.model import ModelConfig, build_for_objective

    out_dir = Path(out_dir)
    texts = [t for name in ("tweets", "movieReviewSnippets", "amazonReviewSnippets") for t in vader_texts(name, 400)]
    corpus = make_corpus(out_dir / "llama-corpus", texts)
    tok = load_tokenizer(run_tokenizer(TokenizerConfig(corpus=str(corpus), output=str(out_dir / "llama-tokenizer"),
                                                       model="byte_bpe", vocab_size=vocab_size, min_frequency=1)))
    torch.manual_seed(0)
    m = ModelConfig(hidden_size=hidden, num_layers=layers, num_heads=4, num_kv_heads=2, intermediate_size=2 * hidden,
                    dropout=0.0, max_position=128)
    model = build_for_objective("causal", m, len(tok), tok.pad_token_id, tok.eos_token_id, 64).hf
    save_hf(model, tok, out_dir / "tiny-llama")
    return out_dir / "tiny-llama"


HANDBOOK_ADDRESSES = "Mail for the zone goes to admin@falcot.com, and its name server answers at 212.94.201.10."
"""The Debian handbook's example zone contact and server address (sect.domain-name-servers.html), as a sentence."""


def planted_pages(path: str | Path, vader_folder: str | Path, crawl: str | Path = ROOT / "samples" / "crawl" / "news-000.warc.gz") -> dict:
    """A JSONL crawl file of three real news pages that pass the default cleaning, each given one thing
    a cleaning step must catch: a UT1-listed URL (pornhub.com), the handbook's addresses (PII), and a
    VADER test sentence of the prepared task at `vader_folder` (decontamination). Returns what was
    planted: {"ids": [...], "sentence": ..., "item": VADER id}."""
    from pipelines.corpus.clean import KEPT, process_document
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.readers import read_file
    from pipelines.corpus.text import normalize_text
    from schemas.records import RawDocument

    cfg = CorpusConfig(input=["-"], output="-", languages=["en"])
    kept = []
    for d in read_file(str(crawl)):
        if isinstance(d, RawDocument) and process_document(d, cfg)[0] == KEPT:
            kept.append((d, normalize_text(process_document(d, cfg)[1]["text"])))
        if len(kept) == 3:
            break
    rows = [json.loads(x) for x in (Path(vader_folder) / "data.jsonl").read_text().splitlines()]
    item = next(r for r in rows if r["split"] == "test" and len(r["text"].split()) >= 20)
    (d1, t1), (d2, t2), (d3, t3) = kept
    docs = [{"id": "planted-url", "url": "http://www.pornhub.com/view_video.php", "text": t1},
            {"id": "planted-pii", "url": d2.url, "text": t2 + "\n\n" + HANDBOOK_ADDRESSES},
            {"id": "planted-test", "url": d3.url, "text": t3 + "\n\n" + item["text"].upper().replace(",", " ;")}]
    Path(path).write_text("".join(json.dumps(x) + "\n" for x in docs))
    return {"ids": [x["id"] for x in docs], "sentence": item["text"], "item": item["id"]}


def tiny_pages() -> list[str]:
    """The text of every HTML page of tests/data/tiny/tiny.warc.gz, extracted and normalised as the
    corpus stage sees it before its cleaning steps (pages that do not decode are left out)."""
    from pipelines.corpus.readers import read_file
    from pipelines.corpus.text import DecodeError, decode_html, html_to_text, normalize_text
    from schemas.records import RawDocument

    out = []
    for d in read_file(str(ROOT / "tests" / "data" / "tiny" / "tiny.warc.gz")):
        if isinstance(d, RawDocument) and d.html:
            try:
                out.append(normalize_text(html_to_text(decode_html(d.html, d.charset).text)))
            except DecodeError:
                continue
    return [t for t in out if t]


# --- a user's own data, for the whole-DAG tests of `lmforge run` on it -------------------------------------------
TINY = ROOT / "tests" / "data" / "tiny"


def pages_in(language: str, warcs: list[Path], manifest: Path, limit: int = 10**6) -> list[dict]:
    """Pages of `language` (the sample manifest's lang column) as the corpus stage would extract them."""
    from pipelines.corpus.readers import read_file
    from pipelines.corpus.text import decode_html, html_to_text
    from schemas.records import RawDocument

    lang = {r["url"]: r["lang"] for r in csv.DictReader(manifest.open(), delimiter="\t")}
    pages = []
    for warc in warcs:
        for doc in read_file(str(warc)):
            if isinstance(doc, RawDocument) and doc.html and lang.get(doc.url) == language:
                text = html_to_text(decode_html(doc.html, doc.charset).text)
                if len(text.split()) > 50 and len(pages) < limit:
                    pages.append({"id": f"page-{len(pages)}", "url": doc.url, "text": text})
    return pages


def english_pages() -> list[dict]:
    return pages_in("en", [TINY / "tiny.warc.gz"], TINY / "manifest.tsv")


def tweets_csv(path: Path, n: int = 900) -> None:
    """VADER's tweets with a user's column names and no split column (label: VADER's 3 classes)."""
    from pipelines.labeled.vader import label_of

    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["tweet", "sentiment"])
        for line in (VADER / "tweets_GroundTruth.txt").read_text(encoding="utf-8").splitlines()[:n]:
            _, score, text = line.split("\t", 2)
            w.writerow([text.strip(), label_of(float(score))])


def files_holding(secret: str, *roots: str | Path, texts: dict[str, str] | None = None) -> list[str]:
    """Every file under `roots` (and every named text: captured logs) whose bytes hold `secret`, gzip members
    and zstd frames decompressed first (the corpus and shards write .gz/.zst parts); empty when none does."""
    import gzip
    import zlib

    import zstandard

    needle = secret.encode()
    hits = [name for name, text in (texts or {}).items() if secret in text]
    for root in map(Path, roots):
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            data = path.read_bytes()
            try:
                if data[:2] == b"\x1f\x8b":
                    data += gzip.decompress(data)
                elif data[:4] == b"\x28\xb5\x2f\xfd":
                    data += zstandard.ZstdDecompressor().stream_reader(data).read()
            except (OSError, EOFError, zlib.error, zstandard.ZstdError):
                pass  # a deliberately broken input (tests/data/tiny/broken.warc.gz): its raw bytes were scanned
            if needle in data:
                hits.append(str(path))
    return hits
