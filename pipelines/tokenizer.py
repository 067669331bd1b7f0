"""The tokenizer stage: train a WordPiece, BPE, byte-level BPE or Unigram tokenizer with HF `tokenizers`.

Run alone:  lmforge tokenizer --corpus runs/demo/corpus --output runs/demo/tokenizer [--model byte_bpe --sample 20000]
Or adopt:   lmforge tokenizer --from path/to/hf_model --output runs/demo/tokenizer   (no training; see `adopt`)

Texts stream from the corpus Parquet files batch by batch, so memory does not grow with the
corpus; `--sample N` trains on N documents chosen by a hash of their id (see `choose_sample`).
Each model family brings the special tokens its objective needs: BERT's [PAD] [UNK] [CLS]
[SEP] [MASK] for wordpiece, RoBERTa's <s> <pad> </s> <unk> <mask> for bpe and byte_bpe,
T5's <pad> </s> <unk> and <extra_id_N> sentinels for unigram. Writes tokenizer.json plus
the files `transformers.AutoTokenizer.from_pretrained` reads; the manifest names the model,
the special token ids and the sha256 of tokenizer.json. `special_ids()` tells downstream
stages which ids are pad, mask, cls/bos, sep/eos and the sentinels.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.config import config_to_dict, opt, require
from pipelines.tokenizer_families import (  # noqa: F401  (BERT, ROBERTA, T5, MODELS: re-exported)
    BERT,
    FAMILIES,
    LAYOUTS,
    MODELS,
    ROBERTA,
    SPECIALS,
    T5,
    continuation_tokens,
    family,
    sentinel,
)
from schemas.hf import portable_tokenizer_config
from schemas.manifest import Manifest, describe_outputs, input_ref, read_manifest, sha256_file, write_manifest


def min_vocab(model: str, extra_ids: int) -> int:
    """Special tokens + what the model cannot do without + 100 learned pieces (pipelines.tokenizer_families)."""
    return family(model).min_vocab(extra_ids)


@dataclass
class TokenizerConfig:
    output: str = opt(help="stage directory to write tokenizer.json and the transformers files to", path=True)
    corpus: str = opt("", "corpus stage directory to train on (reads data/<lang>/*.parquet)", path=True)
    from_model: str = opt("", "adopt the tokenizer of this Hugging Face model directory instead of training one "
                          "(for continued pretraining with --init-from; its special tokens and ids are kept)", alias="--from", path=True)
    model: str = opt("wordpiece", " | ".join(f"{f.name} ({f.summary})" for f in FAMILIES.values()))
    vocab_size: int = opt(8000, "vocabulary size, special tokens (and unigram's sentinels) included")
    min_frequency: int = opt(2, "ignore pieces seen fewer times (wordpiece, bpe, byte_bpe; unigram prunes by likelihood)")
    sample: int = opt(0, "train on this many documents, those with the smallest hash of (seed, id); 0 = all")
    seed: int = opt(0, "salt of the sample hash: another seed draws another sample of the same size")
    extra_ids: int = opt(100, "unigram only: T5 sentinels <extra_id_0>..<extra_id_{n-1}> for span corruption")
    model_max_length: int = opt(512, "model_max_length written to tokenizer_config.json")

    def __post_init__(self) -> None:
        require(bool(self.corpus) != bool(self.from_model), "give --corpus (train a tokenizer) or --from MODEL_DIR "
                "(adopt a model's tokenizer), one of the two")
        require(self.model in MODELS, f"model {self.model!r} is not one of {', '.join(MODELS)}")
        require(self.extra_ids >= 0, "extra_ids must be >= 0")
        low = min_vocab(self.model, self.extra_ids)
        require(self.vocab_size >= low, f"vocab_size {self.vocab_size} is too small for {self.model} (at least {low})")
        require(self.min_frequency >= 1, "min_frequency must be >= 1")
        require(self.sample >= 0, "sample must be >= 0 (0 = every document)")
        require(self.model_max_length > 0, "model_max_length must be > 0")


# ---- the sample: pure ---------------------------------------------------------------------------

def sample_key(doc_id: str, seed: int = 0) -> int:
    """A stable 64-bit hash of (seed, id); Python's hash() is salted per process, so it would not do."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest(), "big")


def choose_sample(ids: Iterable[str], n: int, seed: int = 0) -> frozenset[str]:
    """The n ids with the smallest `sample_key` (a bottom-n sketch).

    Why this rather than "the first n in file order" (the old `max_docs`) or "every k-th":
    files are sorted by language, so the first n were all English; a hash ranks documents
    uniformly at random whatever their file, language or order, and the same corpus and seed
    always give the same set. Unlike "every k-th" the size is exactly min(n, corpus), without
    knowing the corpus size beforehand. heapq.nsmallest keeps n (key, id) pairs, never the corpus.
    """
    return frozenset(i for _, i in heapq.nsmallest(n, ((sample_key(i, seed), i) for i in ids)))


# ---- reading the corpus -------------------------------------------------------------------------

def corpus_files(corpus_dir: str | Path) -> list[Path] | list[str]:
    """The corpus stage's Parquet files (local paths, or object names on s3://, gs://, ...)."""
    from schemas import storage

    files = storage.files_under(storage.join(corpus_dir, "data"), "*/*.parquet")
    if not storage.is_remote(corpus_dir):
        files = [Path(f) for f in files]
    if not files:
        raise FileNotFoundError(f"{corpus_dir}/data/*/*.parquet: no corpus files (did the corpus stage keep anything?)")
    return files


def iter_columns(files: list[Path], columns: list[str], batch_size: int = 256) -> Iterator[tuple]:
    """Rows of `columns` as tuples, file by file, one Parquet batch in memory at a time."""
    import pyarrow.parquet as pq

    from schemas import storage

    for f in files:
        with storage.open_read(f) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=batch_size, columns=columns):
                yield from zip(*(batch.column(c).to_pylist() for c in columns))


def iter_texts(files: list[Path], keep: Callable[[str], bool] | None = None) -> Iterator[str]:
    """Texts whose id passes `keep` (all if None), in file order."""
    for doc_id, text in iter_columns(files, ["id", "text"]):
        if keep is None or keep(doc_id):
            yield text


def sample_texts(files: list[Path], n: int = 0, seed: int = 0,
                 keep: Callable[[str], bool] | None = None) -> Callable[[], Iterator[str]]:
    """A function that streams the sample's texts (every text passing `keep` if n == 0) each time it is called.

    The sample is chosen once, from a pass that reads only the id column; each later pass
    streams texts and yields the chosen ones. Memory holds n ids, never n texts. Training may
    read the texts more than once (see `train`), hence a function rather than an iterator.
    """
    if n:
        keep = choose_sample((i for (i,) in iter_columns(files, ["id"]) if keep is None or keep(i)), n, seed).__contains__
    return lambda: iter_texts(files, keep)


# ---- the model families -------------------------------------------------------------------------

def build(model: str, vocab_size: int, min_frequency: int = 2, extra_ids: int = 100):
    """(untrained tokenizers.Tokenizer, trainer) of a family (pipelines.tokenizer_families)."""
    return family(model).build(vocab_size, min_frequency, extra_ids)


def finish(tok, model: str, extra_ids: int = 100) -> None:
    """Sentinels for unigram, and a post-processor that adds the family's specials on encode.

    T5's layout puts the sentinels last and reversed (<extra_id_0> is the highest id), so they
    are added from <extra_id_{n-1}> down.
    """
    from tokenizers import processors

    spec = SPECIALS[model]
    if family(model).sentinels and extra_ids:
        tok.add_special_tokens([sentinel(i) for i in reversed(range(extra_ids))])
    in_templates = {piece.split(":")[0] for piece in f"{spec.single} {spec.pair}".split()}
    tok.post_processor = processors.TemplateProcessing(single=spec.single, pair=spec.pair, special_tokens=[
        (t, tok.token_to_id(t)) for t in spec.tokens if t in in_templates])


Texts = Callable[[], Iterable[str]] | Sequence[str]


def train(texts: Texts, model: str = "wordpiece", vocab_size: int = 8000, min_frequency: int = 2,
          extra_ids: int = 100):
    """A finished `tokenizers.Tokenizer` trained on `texts`.

    `texts` is a list or a function returning a fresh iterable: wordpiece reads the texts
    twice (once for `continuation_tokens`), the other models once.
    """
    from tokenizers import Tokenizer

    if not callable(texts) and not isinstance(texts, Sequence):
        raise TypeError("texts must be a list or a function returning an iterable (training may read them twice)")
    passes = texts if callable(texts) else lambda: texts
    fam = family(model)
    extra_ids = extra_ids if fam.sentinels else 0
    tok, trainer = fam.build(vocab_size, min_frequency, extra_ids)
    seeded: list[str] = []
    if fam.seed_continuations:
        seeded = continuation_tokens(tok, passes())
        trainer.special_tokens = [*SPECIALS[model].tokens, *seeded]
    tok.train_from_iterator(passes(), trainer=trainer)
    if seeded:  # they are ordinary vocabulary: drop them from the special (added) tokens
        spec = json.loads(tok.to_str())
        spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] in SPECIALS[model].tokens]
        tok = Tokenizer.from_str(json.dumps(spec))
    if fam.canonical is not None:
        tok = fam.canonical(tok)
    finish(tok, model, extra_ids)
    for t in SPECIALS[model].tokens:  # trainers put special tokens first; the id contract relies on it
        assert tok.token_to_id(t) == SPECIALS[model].tokens.index(t), (t, tok.token_to_id(t))
    return tok


def special_ids(tok: Any) -> dict[str, Any]:
    """Which ids are special, for any tokenizer this stage writes.

    `tok` is a `tokenizers.Tokenizer`, a transformers tokenizer or a plain {token: id} vocab.
    `cls` opens a sequence and `sep` closes one (for RoBERTa <s> and </s>; T5 has no cls);
    `bos`/`eos` are set only where the family has them; `sentinels[i]` is <extra_id_i>.
    Missing roles are None.
    """
    vocab: Mapping[str, int] = tok if isinstance(tok, Mapping) else tok.get_vocab()
    layout = next((lay for lay in LAYOUTS if all(t in vocab for t in lay.tokens)), None)
    if layout is None:
        raise ValueError("not an lmforge tokenizer: its vocabulary holds none of the special token sets "
                         + "; ".join(" ".join(s.tokens) for s in LAYOUTS))
    roles = layout.roles
    ids: dict[str, Any] = {r.removesuffix("_token"): vocab[roles[f"{r}_token"]] if f"{r}_token" in roles else None
                           for r in ("pad", "unk", "mask", "cls", "sep", "bos", "eos")}
    if layout.sep_is_eos:
        ids["sep"] = ids["eos"]
    n = sum(1 for t in vocab if re.fullmatch(r"<extra_id_\d+>", t))
    ids["sentinels"] = [vocab[sentinel(i)] for i in range(n)]
    ids["family"] = layout.layout
    return ids


# ---- saving -------------------------------------------------------------------------------------

def to_transformers(tok, model: str, model_max_length: int = 512):
    """A `PreTrainedTokenizerFast` that wraps `tok` unchanged, with the special tokens named.

    Not BertTokenizerFast / RobertaTokenizerFast / T5TokenizerFast: in transformers 5 those
    rebuild the pipeline in __init__ (BERT's lowercasing, accent-stripping normaliser; T5's
    whitespace splitting), so AutoTokenizer would no longer tokenize as trained. The generic
    class loads tokenizer.json as it is and takes the special tokens from tokenizer_config.json.
    clean_up_tokenization_spaces=False: the clean-up turns " ." into "." and breaks round trips.
    """
    from transformers import PreTrainedTokenizerFast

    sentinels = [sentinel(i) for i in range(sum(1 for t in tok.get_vocab() if re.fullmatch(r"<extra_id_\d+>", t)))]
    extra = {"extra_special_tokens": sentinels} if sentinels else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length,
                                   clean_up_tokenization_spaces=False, **SPECIALS[model].roles, **extra)


def save(tok, out: Path, model: str = "wordpiece", model_max_length: int = 512) -> list[Path]:
    """tokenizer.json and the transformers files, each written under a temporary directory and renamed in."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tokenizer.", dir=out))
    try:
        written = to_transformers(tok, model, model_max_length).save_pretrained(str(tmp))
        portable_tokenizer_config(tmp)  # loadable by transformers 4.x too (schemas/hf.py)
        names = sorted({Path(p).name for p in written if Path(p).is_file()} | {"tokenizer.json"})
        for name in names:
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [out / n for n in names]


def model_family(tok) -> str:
    """The tokenizer stage's name for a `tokenizers.Tokenizer`'s model: wordpiece, bpe, byte_bpe or unigram."""
    spec = json.loads(tok.to_str())
    kind = spec["model"]["type"]
    byte_level = "ByteLevel" in json.dumps(spec.get("pre_tokenizer") or {})
    found = [f for f in FAMILIES.values() if f.hf_model == kind]
    if not found:
        raise ValueError(f"tokenizer model {kind!r} is not one lmforge encodes "
                         f"({', '.join(dict.fromkeys(f.hf_model for f in FAMILIES.values()))})")
    # a model type with a byte-level and a plain family (BPE) is told apart by its pre-tokenizer
    return next((f for f in found if f.byte_level == byte_level), found[0]).name


def adopt(model_dir: str | Path, out: Path) -> tuple[Any, str, list[Path]]:
    """An existing model's tokenizer, saved to `out` as the transformers files plus tokenizer.json.

    The tokenizer is loaded with `AutoTokenizer` (so a model that ships only vocab.txt gets its
    fast tokenizer converted) and its `tokenizers.Tokenizer` is what the shards stage encodes with;
    the special ids come from its vocabulary (`special_ids`), not from the training layout."""
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError) as e:
        raise ValueError(f"--from {model_dir}: no tokenizer that transformers can load ({e})") from e
    if not getattr(hf, "is_fast", False):
        raise ValueError(f"--from {model_dir}: {type(hf).__name__} is not a fast (tokenizers) tokenizer")
    tok = hf.backend_tokenizer
    special_ids(tok)  # a clear error when none of the known special-token sets is there
    family = model_family(tok)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tokenizer.", dir=out))
    try:
        written = hf.save_pretrained(str(tmp))
        portable_tokenizer_config(tmp)
        names = sorted({Path(p).name for p in written if Path(p).is_file()} | {"tokenizer.json"})
        for name in names:
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(out / "tokenizer.json")), family, [out / n for n in names]


def run(cfg: TokenizerConfig) -> Path:
    import tokenizers
    import transformers

    t0 = time.time()
    if cfg.from_model:
        return run_adopt(cfg, t0)
    read_manifest(cfg.corpus)  # the corpus must have finished
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    files = corpus_files(cfg.corpus)
    sample = sample_texts(files, cfg.sample, cfg.seed)
    n_docs = 0

    def counted() -> Iterator[str]:  # counts the last pass, the one the trainer reads
        nonlocal n_docs
        n_docs = 0
        for t in sample():
            n_docs += 1
            yield t

    tok = train(counted, cfg.model, cfg.vocab_size, cfg.min_frequency, cfg.extra_ids)
    written = save(tok, out, cfg.model, cfg.model_max_length)
    vocab = tok.get_vocab_size()
    ids = special_ids(tok)
    sentinels = ids.pop("sentinels")
    write_manifest(out, Manifest(
        stage="tokenizer", config=config_to_dict(cfg), inputs=[input_ref(cfg.corpus)],
        counts={"documents": n_docs, "vocab_size": vocab},
        outputs=describe_outputs(out, written),
        extra={"model": cfg.model, "vocab_size": vocab,
               "special_tokens": {t: tok.token_to_id(t) for t in SPECIALS[cfg.model].tokens},
               "special_ids": ids,
               "sentinels": {"count": len(sentinels), "extra_id_0": sentinels[0] if sentinels else None,
                             "last": sentinels[-1] if sentinels else None},
               "tokenizer_json_sha256": sha256_file(out / "tokenizer.json"),
               "sample": {"documents": n_docs, "requested": cfg.sample, "seed": cfg.seed},
               "versions": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__}},
        wall_seconds=round(time.time() - t0, 2)))
    print(f"tokenizer: {cfg.model}, {vocab} pieces from {n_docs} documents -> {out}", flush=True)
    return out


def run_adopt(cfg: TokenizerConfig, t0: float) -> Path:
    """`--from`: the tokenizer stage's outputs and manifest for an adopted tokenizer."""
    import tokenizers
    import transformers

    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    tok, family, written = adopt(cfg.from_model, out)
    vocab = tok.get_vocab_size()
    ids = special_ids(tok)
    sentinels = ids.pop("sentinels")
    write_manifest(out, Manifest(
        stage="tokenizer", config=config_to_dict(cfg), inputs=[input_ref(cfg.from_model)],
        counts={"documents": 0, "vocab_size": vocab},
        outputs=describe_outputs(out, written),
        extra={"model": family, "adopted_from": str(cfg.from_model), "vocab_size": vocab,
               "special_tokens": {t: tok.token_to_id(t) for t in SPECIALS[family].tokens if tok.token_to_id(t) is not None},
               "special_ids": ids,
               "sentinels": {"count": len(sentinels), "extra_id_0": sentinels[0] if sentinels else None,
                             "last": sentinels[-1] if sentinels else None},
               "tokenizer_json_sha256": sha256_file(out / "tokenizer.json"),
               "versions": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__}},
        wall_seconds=round(time.time() - t0, 2)))
    print(f"tokenizer: adopted {family} ({vocab} pieces) from {cfg.from_model} -> {out}", flush=True)
    return out
