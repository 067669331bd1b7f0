"""The tokenizer stage: train a WordPiece tokenizer (BERT style) with HF `tokenizers`.

Run alone:  lmforge tokenizer --corpus runs/demo/corpus --output runs/demo/tokenizer

Texts stream from the corpus Parquet files (sorted, batch by batch), so memory does not grow
with the corpus. Normalisation is NFC without lowercasing or accent stripping: BERT's
uncased normaliser strips accents, which would turn Russian "й" into "и".
Writes tokenizer.json plus the files `transformers.AutoTokenizer.from_pretrained` reads.
Other model types (byte-level BPE, Unigram, T5 sentinels) come with issue 4.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lmforge.config import config_to_dict, opt, require
from schemas.manifest import Manifest, describe_outputs, input_ref, read_manifest, write_manifest

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@dataclass
class TokenizerConfig:
    corpus: str = opt(help="corpus stage directory (reads data/<lang>/*.parquet)")
    output: str = opt(help="stage directory to write tokenizer.json and the transformers files to")
    vocab_size: int = opt(8000, "WordPiece vocabulary size, special tokens included")
    min_frequency: int = opt(2, "ignore pieces seen fewer times")
    max_docs: int = opt(0, "train on at most this many documents (0 = all), taken in file order")

    def __post_init__(self) -> None:
        require(self.vocab_size >= len(SPECIAL_TOKENS) + 100, f"vocab_size {self.vocab_size} is too small")
        require(self.max_docs >= 0, "max_docs must be >= 0")


def corpus_files(corpus_dir: str | Path) -> list[Path]:
    files = sorted(Path(corpus_dir, "data").glob("*/*.parquet"))
    if not files:
        raise FileNotFoundError(f"{corpus_dir}/data/*/*.parquet: no corpus files (did the corpus stage keep anything?)")
    return files


def iter_texts(files: list[Path], max_docs: int = 0, batch_size: int = 256) -> Iterator[str]:
    import pyarrow.parquet as pq

    n = 0
    for f in files:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=batch_size, columns=["text"]):
            for t in batch.column(0).to_pylist():
                if max_docs and n >= max_docs:
                    return
                n += 1
                yield t


def build_wordpiece(vocab_size: int, min_frequency: int):
    """An untrained BERT-style WordPiece tokenizer and its trainer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=SPECIAL_TOKENS, show_progress=False)
    return tok, trainer


def finish(tok) -> None:
    """Add [CLS] ... [SEP] around every encoded text (sentence pairs get a second [SEP])."""
    from tokenizers import processors

    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])


def save(tok, out: Path) -> list[Path]:
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)
    written = fast.save_pretrained(str(out))
    return [Path(p) for p in written if Path(p).exists()] + [out / "tokenizer.json"]


def run(cfg: TokenizerConfig) -> Path:
    t0 = time.time()
    read_manifest(cfg.corpus)  # the corpus must have finished
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    files = corpus_files(cfg.corpus)
    tok, trainer = build_wordpiece(cfg.vocab_size, cfg.min_frequency)
    n_docs = 0

    def counted() -> Iterator[str]:
        nonlocal n_docs
        for t in iter_texts(files, cfg.max_docs):
            n_docs += 1
            yield t

    tok.train_from_iterator(counted(), trainer=trainer)
    finish(tok)
    written = save(tok, out)
    vocab = tok.get_vocab_size()
    write_manifest(out, Manifest(
        stage="tokenizer", config=config_to_dict(cfg), inputs=[input_ref(cfg.corpus)],
        counts={"documents": n_docs, "vocab_size": vocab},
        outputs=describe_outputs(out, written),
        extra={"model": "wordpiece", "special_tokens": {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}},
        wall_seconds=round(time.time() - t0, 2)))
    print(f"tokenizer: {vocab} pieces from {n_docs} documents -> {out}", flush=True)
    return out
