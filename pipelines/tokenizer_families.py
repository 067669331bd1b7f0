"""The tokenizer-family registry: one record per `lmforge tokenizer --model` (wordpiece, bpe, byte_bpe, unigram).

A family is its special-token layout (BERT's, RoBERTa's or T5's: which tokens, in which order, and how
a text is framed), the `tokenizers` pipeline and trainer it builds, and what it needs besides: the
pieces it cannot do without, T5's sentinels, a post-training step. pipelines/tokenizer.py (train,
finish, detect, save) asks the record instead of comparing names; the shards stage sees only the layout
(`special_ids(...)["family"]`, schemas.shards LAYOUTS).

Adding a family: a build function and a `TokenizerFamily` entry in FAMILIES below (and a layout here
only if it brings new special tokens).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Specials:
    """One model family's special tokens: `tokens` take ids 0.. in this order; `roles` name them for transformers."""

    tokens: tuple[str, ...]
    roles: dict[str, str] = field(hash=False)
    single: str
    """TemplateProcessing for one text; `pair` for two."""
    pair: str
    layout: str = "bert"
    """The shards' name for this layout (schemas.shards LAYOUTS, `lmforge.family`): bert, roberta or t5."""
    sep_is_eos: bool = False
    """It has no separate sep: eos closes a sequence (T5)."""


BERT = Specials(("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
                {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                 "mask_token": "[MASK]"},
                "[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]:1", "bert")
# RoBERTa's order (<s>=0 <pad>=1 </s>=2 <unk>=3); it names <s>/</s> both bos/eos and cls/sep.
ROBERTA = Specials(("<s>", "<pad>", "</s>", "<unk>", "<mask>"),
                   {"bos_token": "<s>", "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>",
                    "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>"},
                   "<s> $A </s>", "<s> $A </s> </s> $B </s>", "roberta")
# T5's order (<pad>=0 </s>=1 <unk>=2); no bos, no mask: span corruption uses the sentinels instead.
T5 = Specials(("<pad>", "</s>", "<unk>"), {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"},
              "$A </s>", "$A </s> $B </s>", "t5", sep_is_eos=True)
LAYOUTS = (BERT, ROBERTA, T5)
"""Every special-token layout, in the order `special_ids` tries them."""


def sentinel(i: int) -> str:
    return f"<extra_id_{i}>"


# ---- how each family builds its pipeline and trainer ---------------------------------------------
# (vocab_size, min_frequency, extra_ids) -> (tokenizers.Tokenizer, trainer). Normalisation is NFC without
# lowercasing or accent stripping (BERT's uncased normaliser strips accents, which would turn Russian "й"
# into "и"); byte_bpe has none, as GPT-2 and RoBERTa: bytes in, the same bytes out.

def _wordpiece(vocab_size: int, min_frequency: int, extra_ids: int):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok, trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                          special_tokens=list(BERT.tokens), show_progress=False)


def _byte_bpe(vocab_size: int, min_frequency: int, extra_ids: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok, trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                    special_tokens=list(ROBERTA.tokens),
                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)


def _bpe(vocab_size: int, min_frequency: int, extra_ids: int):
    """Character BPE over "▁"-marked words (SentencePiece BPE style): the Metaspace decoder restores the spaces;
    characters never seen in training become <unk>."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    tok.decoder = decoders.Metaspace(prepend_scheme="always")
    return tok, trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                    special_tokens=list(ROBERTA.tokens), show_progress=False)


def _unigram(vocab_size: int, min_frequency: int, extra_ids: int):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    tok.decoder = decoders.Metaspace(prepend_scheme="always")
    # The sentinels are added after training (pipelines.tokenizer.finish), so the trainer fills the rest.
    return tok, trainers.UnigramTrainer(vocab_size=vocab_size - extra_ids, special_tokens=list(T5.tokens),
                                        unk_token="<unk>", show_progress=False)


def continuation_tokens(tok, texts: Iterable[str]) -> list[str]:
    """WordPiece's "##c" for every character c that follows another inside a pre-tokenized word.

    Why: `tokenizers`' BPE/WordPiece trainer creates these tokens while iterating a hash map, so
    their ids, and with them the tie-breaks between merges of equal count, change from run to
    run (huggingface/tokenizers#1794, fix pending in PR #2066): two trainings on the same text
    gave different vocabularies. Passing them to the trainer up front, sorted, fixes their ids.
    """
    seen: set[str] = set()
    for text in texts:
        for word, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text)):
            seen.update(word[1:])
    return ["##" + c for c in sorted(seen)]


def canonical_unigram(tok, step: float = 1e-4):
    """The Unigram vocabulary in a canonical form, so that training twice gives the same bytes.

    Two things in `tokenizers`' trainer follow hash-map order: (1) float sums, so scores differ
    in the last bits and pieces of equal score swap ids; (2) characters the EM step dropped are
    re-added with invented scores min_score + k * 1e-4 in hash-set order (`finalize` in
    tokenizers/src/models/unigram/trainer.rs). Here (2) is undone by giving that block of
    single characters the same scores in character order, then scores are rounded to 1e-6
    (SentencePiece's .model stores float32, about 7 significant digits) and pieces sorted by
    (-score, piece).
    """
    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    specials = T5.tokens
    head = [p for p in spec["model"]["vocab"] if p[0] in specials]
    rest = {p: s for p, s in spec["model"]["vocab"] if p not in specials}
    singles = [(s, p) for p, s in rest.items() if len(p) == 1]
    if singles:
        s0 = min(singles)[0]  # the block starts at the model's lowest score, so at the lowest character
        grid: dict[int, list[str]] = {}
        for s, p in singles:
            k = (s - s0) / step
            if abs(k - round(k)) < 1e-3:
                grid.setdefault(round(k), []).append(p)
        # Characters the model kept at exactly min_score share k = 0 with the first invented one,
        # so the whole block, ties included, is re-dealt: its scores, ascending, to its characters in order.
        k_end = next(k for k in range(len(grid) + 1) if k not in grid)  # the block is k = 0, 1, ... without gaps
        block = sorted(c for k in range(k_end) for c in grid[k])
        for c, score in zip(block, sorted(rest[c] for c in block)):
            rest[c] = score
    ordered = sorted(([p, round(s, 6)] for p, s in rest.items()), key=lambda x: (-x[1], x[0]))
    spec["model"]["vocab"] = head + ordered
    return Tokenizer.from_str(json.dumps(spec))



@dataclass(frozen=True)
class TokenizerFamily:
    name: str
    """`--model` and the manifest's `model`."""
    summary: str
    """What it is, for --help."""
    specials: Specials
    build: Callable[[int, int, int], tuple[Any, Any]]
    """(vocab_size, min_frequency, extra_ids) -> (tokenizers.Tokenizer, trainer), untrained."""
    hf_model: str
    """The `tokenizers` model type in tokenizer.json (WordPiece, BPE, Unigram): how `model_family` recognises it."""
    byte_level: bool = False
    """Byte-level pre-tokenizer (GPT-2's): all 256 bytes are pieces, so it never needs <unk>."""
    sentinels: bool = False
    """Holds T5's <extra_id_N> sentinels (`--extra-ids`), added after training."""
    seed_continuations: bool = False
    """Its trainer gets every "##c" continuation up front (`continuation_tokens`: reproducible ids)."""
    canonical: Callable[[Any], Any] | None = None
    """A post-training pass that makes two trainings give the same bytes (`canonical_unigram`)."""

    def min_vocab(self, extra_ids: int) -> int:
        """Special tokens + what the model cannot do without (all bytes, the sentinels) + 100 learned pieces."""
        return len(self.specials.tokens) + 100 + (256 if self.byte_level else 0) + (extra_ids if self.sentinels else 0)


FAMILIES: dict[str, TokenizerFamily] = {f.name: f for f in (
    TokenizerFamily("wordpiece", "BERT", BERT, _wordpiece, "WordPiece", seed_continuations=True),
    TokenizerFamily("bpe", "SentencePiece-style BPE", ROBERTA, _bpe, "BPE"),
    TokenizerFamily("byte_bpe", "GPT-2/RoBERTa", ROBERTA, _byte_bpe, "BPE", byte_level=True),
    TokenizerFamily("unigram", "SentencePiece/T5", T5, _unigram, "Unigram", sentinels=True,
                    canonical=canonical_unigram),
)}
MODELS = tuple(FAMILIES)
SPECIALS = {name: f.specials for name, f in FAMILIES.items()}


def family(name: str) -> TokenizerFamily:
    if name not in FAMILIES:
        raise ValueError(f"model {name!r} is not one of {', '.join(MODELS)}")
    return FAMILIES[name]
