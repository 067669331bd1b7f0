"""Examples to token ids for a fine-tune: one text or a pair, or pre-split words with their tags.

The tokenizer is any HF fast tokenizer (ours, or the one a pretrained model ships). Word tags
follow BERT's recipe for NER (Devlin et al. 2019, section 5.3): a word's tag sits on its first
sub-word, the later sub-words get -100 and carry no loss; predictions are read back from the
first sub-word. Words cut off by `max_length` (or that tokenize to nothing, such as a lone
zero-width character) get no prediction from the model; they are counted, and scored with the
most frequent train tag, so every gold word is scored.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

IGNORE = -100


def align_tags(word_ids: Sequence[int | None], tag_ids: Sequence[int]) -> list[int]:
    """The label of each sub-word position: the word's tag at its first sub-word, -100 elsewhere.

    >>> align_tags([None, 0, 1, 1, 2, None], [5, 6, 7])
    [-100, 5, 6, -100, 7, -100]
    """
    out, prev = [], None
    for w in word_ids:
        out.append(IGNORE if w is None or w == prev else tag_ids[w])
        prev = w
    return out


def first_subwords(word_ids: Sequence[int | None]) -> dict[int, int]:
    """Word index -> position of its first sub-word (words missing from `word_ids` are absent)."""
    first: dict[int, int] = {}
    for pos, w in enumerate(word_ids):
        if w is not None and w not in first:
            first[w] = pos
    return first


@dataclass
class Encoded:
    input_ids: list[list[int]]
    labels: list[Any]
    """Per example: a class id, a float, or per-position tag ids (-100 where no loss)."""
    token_type_ids: list[list[int]] | None = None
    word_ids: list[list[int | None]] = field(default_factory=list)
    """Token tasks: the word of each position, to read predictions back per word."""
    counts: dict[str, int] = field(default_factory=dict)


def encode(data, split: str, tok, max_length: int) -> Encoded:
    """Encode `data.<split>` (a TaskData) with `tok`, truncated to `max_length` tokens."""
    examples = data.split(split)
    if data.task == "tokens":
        ids = data.label2id
        enc = tok([list(e.tokens) for e in examples], is_split_into_words=True, truncation=True,
                  max_length=max_length, verbose=False)
        word_ids = [enc.word_ids(i) for i in range(len(examples))]
        labels = [align_tags(w, [ids[t] for t in e.tags]) for w, e in zip(word_ids, examples)]
        lost = sum(len(e.tokens) - len(first_subwords(w)) for w, e in zip(word_ids, examples))
        plain = tok([list(e.tokens) for e in examples], is_split_into_words=True, add_special_tokens=False,
                    verbose=False)["input_ids"]
        return Encoded(enc["input_ids"], labels, enc.get("token_type_ids"), word_ids,
                       {f"{split}_words_without_prediction": lost,
                        **fit_counts(split, plain, sum(len(e.tokens) for e in examples), tok.unk_token_id)})
    texts = [e.text for e in examples]
    pairs = [e.text_pair for e in examples] if examples and examples[0].text_pair is not None else None
    enc = tok(texts, pairs, truncation=True, max_length=max_length, verbose=False)
    full = tok(texts, pairs, truncation=False, verbose=False)["input_ids"]
    truncated = sum(len(x) > max_length for x in full)
    labels = [data.label2id[e.label] for e in examples] if data.task == "classification" else [e.label for e in examples]
    specials = tok.num_special_tokens_to_add(pair=pairs is not None)
    words = sum(len(e.text.split()) + len((e.text_pair or "").split()) for e in examples)
    return Encoded(enc["input_ids"], labels, enc.get("token_type_ids"),
                   counts={f"{split}_truncated": truncated, **fit_counts(split, full, words, tok.unk_token_id, specials)})


def fit_counts(split: str, ids: Sequence[Sequence[int]], words: int, unk_id: int | None, specials: int = 0) -> dict[str, int]:
    """How the tokenizer fits the split's text: its tokens (special tokens left out), whitespace words, and unknown
    tokens (the tokenizer's unk id; none when it has no unknown token, a byte-level BPE's case)."""
    return {f"{split}_tokens": sum(len(x) - specials for x in ids), f"{split}_words": words,
            f"{split}_unknown_tokens": 0 if unk_id is None else sum(x.count(unk_id) for x in ids)}


def fit_line(counts: dict[str, Any], split: str = "test") -> tuple[str, str | None]:
    """('1.42 tokens per word, 0.3% unknown tokens on the test text', a warning or None) from fit_counts' counts;
    ('', None) when they are missing (a fine-tune from before they were counted). The warning: more than 1% unknown
    tokens, or more than 3 tokens per whitespace word (text the tokenizer was not trained on: another script, or
    tweets' spellings), each of which makes a pretrained start worth less."""
    tokens, words = counts.get(f"{split}_tokens"), counts.get(f"{split}_words")
    if not tokens or not words:
        return "", None
    unk = counts.get(f"{split}_unknown_tokens", 0) / tokens
    fertility = tokens / words
    line = f"{fertility:.2f} tokens per word, {unk:.1%} unknown tokens on the {split} text"
    bad = [x for x, on in ((f"{unk:.1%} of its tokens are unknown", unk > UNKNOWN_WARN),
                           (f"{fertility:.1f} tokens per word", fertility > FERTILITY_WARN)) if on]
    return line, (f"the tokenizer fits the {split} text poorly: {' and '.join(bad)} (the pretrained model learnt other "
                  "text; a tokenizer trained with the task's kind of text, or a larger vocabulary, fits better)"
                  if bad else None)


UNKNOWN_WARN = 0.01
FERTILITY_WARN = 3.0


def collate(enc: Encoded, rows: Sequence[int], pad_id: int, task: str) -> dict[str, Any]:
    """A padded batch of `rows` as torch tensors (padding to the longest row of the batch)."""
    import torch

    width = max(len(enc.input_ids[r]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    types = torch.zeros((len(rows), width), dtype=torch.long) if enc.token_type_ids else None
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long) if task == "tokens" else None
    for i, r in enumerate(rows):
        n = len(enc.input_ids[r])
        ids[i, :n] = torch.tensor(enc.input_ids[r])
        mask[i, :n] = 1
        if types is not None:
            types[i, :n] = torch.tensor(enc.token_type_ids[r])
        if labels is not None:
            labels[i, :n] = torch.tensor(enc.labels[r])
    if labels is None:
        labels = torch.tensor([enc.labels[r] for r in rows],
                              dtype=torch.float if task == "regression" else torch.long)
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    if types is not None:
        batch["token_type_ids"] = types
    return batch


def tags_from_logits(enc: Encoded, row: int, logits_row, names: Sequence[str], n_words: int, default: str) -> list[str]:
    """The predicted tag of every word of one sentence, read at each word's first sub-word."""
    first = first_subwords(enc.word_ids[row])
    best = logits_row.argmax(-1).tolist()
    return [names[best[first[w]]] if w in first else default for w in range(n_words)]
