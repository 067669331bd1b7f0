r"""Exact and faster encoding of the tokenizer stage's four families: one model call per distinct word.

    enc = WordCacheEncoder.for_tokenizer(tok)     # None when the tokenizer is not of this kind
    flat, doc_lens, starts = enc.encode(texts, with_words=True)

HF tokenizers runs the model (WordPiece here) on every word of every document. Natural text
repeats its words (Zipf): the demo corpus has 27,875 distinct words among 494,617, and a larger
crawl repeats more. This encoder gives exactly the ids (and word starts) that
`Tokenizer.encode_batch(texts, add_special_tokens=False)` gives, but asks the tokenizer's own
model only once per distinct word and leaves the per-token work to C and numpy:

1. normalise each text with the tokenizer's own normalizer (`normalize_str`, in Rust). The
   lmforge WordPiece tokenizer's normalizer is NFC then Strip; a text whose every character is
   NFC-inert (canonical combining class 0 and NFC quick check Yes, so NFC leaves it as it is in
   every Unicode version that assigns it) is already its own NFC and skips that call (Strip only
   removes whitespace the pre-tokenizer drops anyway). Any other text, or another normalizer,
   goes through `normalize_str`;
2. cut it at whitespace with `str.split()` into chunks ("word," or "(see"): the pre-tokenizer
   also cuts there and drops the whitespace, so a text's words are its chunks' words back to
   back. The few characters Python calls whitespace and the pre-tokenizer does not (U+001C to
   U+001F) send their text through the pattern of step 3 instead;
3. look every chunk up in a cache of its piece ids (a dict lookup per chunk, the one per-token
   Python step). A chunk not seen yet is cut into words as `BertPreTokenizer` does (whitespace
   removed, each punctuation mark a word of its own) by one regular expression, whose classes
   come from asking the pre-tokenizer itself about each distinct character (the `tokenizers`
   crate and Python's `unicodedata` disagree on about 60 code points, from different Unicode
   versions); each word not seen yet goes to the tokenizer's model (`Model.tokenize`), which is
   what the pipeline runs on each pre-token;
4. gather the pieces of all chunks of all documents into one int32 array with a few numpy calls.

The same holds for the Metaspace pre-tokenizer of the unigram (T5) and character-BPE families
(`prepend_scheme="always"`, `split=True`): it turns each " " into "▁" and starts a word at each
"▁", so a text is its `split(" ")` chunks, each chunk the words of "▁" + chunk (the first chunk
without the "▁" when the text starts with " " or "▁", as Metaspace prepends only then). Their
normalizer is NFC alone (Strip would change Metaspace's words, so it is not skipped there).

Byte-level BPE (RoBERTa, GPT-2: `ByteLevel` with GPT-2's regex, no prefix space, no normalizer)
is cut by that regex itself (`GPT2_PATTERN`, with the `regex` module's \p{L} and \p{N}): its
words are the chunks, each seen by the model as the characters of its UTF-8 bytes
(`bytes_to_unicode`). Here the regex is the per-token step, so the gain is smaller.

Only tokenizers where this holds are served (`why_not` says why another is not): the
pre-tokenizer is `BertPreTokenizer`, such a Metaspace or such a ByteLevel, and every added token
is special and not extracted from the text (`encode_special_tokens`, as `rows.load_tokenizer`
sets), so added tokens never split a text. Others go through `encode_batch` as before.
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["WordCacheEncoder", "why_not"]


GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""The regex of HF tokenizers' ByteLevel pre-tokenizer (GPT-2's)."""


def bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> character table, which ByteLevel applies to each word's UTF-8 bytes."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1), *range(ord("\u00ae"), 256)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def pre_tokenizer_kind(tok: Any) -> tuple[str | None, str | None]:
    """("bert_pre", None) for BertPreTokenizer, ("metaspace", replacement) for a splitting Metaspace that
    always prepends, else (None, why not)."""
    pre = getattr(tok, "pre_tokenizer", None)
    name = type(pre).__name__ if pre is not None else None
    if name == "BertPreTokenizer":
        return "bert_pre", None
    if name == "Metaspace":
        spec = json.loads(tok.to_str()).get("pre_tokenizer") or {}
        rep = spec.get("replacement", "")
        if spec.get("prepend_scheme") != "always" or not spec.get("split", False) or len(rep) != 1:
            return None, (f"Metaspace with prepend_scheme={spec.get('prepend_scheme')!r}, split={spec.get('split')!r}, "
                          f"replacement={rep!r} (the word cache knows prepend_scheme='always', split=True)")
        return "metaspace", rep
    if name == "ByteLevel":
        spec = json.loads(tok.to_str()).get("pre_tokenizer") or {}
        if not spec.get("use_regex", True) or spec.get("add_prefix_space", False):
            return None, ("ByteLevel with use_regex off or add_prefix_space on (the word cache knows GPT-2's regex "
                          "without a prefix space)")
        return "bytelevel", None
    return None, f"pre-tokenizer is {name}, not BertPreTokenizer, Metaspace or ByteLevel"


def why_not(tok: Any) -> str | None:
    """None when `WordCacheEncoder` gives `tok`'s exact ids, else the reason it would not."""
    kind, reason = pre_tokenizer_kind(tok)
    if kind is None:
        return reason
    added = tok.get_added_tokens_decoder().values()
    if any(not a.special for a in added):
        return "it has non-special added tokens, which split texts before pre-tokenization"
    if added and not tok.encode_special_tokens:
        return "special tokens are extracted from the text (encode_special_tokens is off)"
    if tok.padding is not None or tok.truncation is not None:
        return "padding or truncation is on"
    return None


NFC_ONLY = {"bert_pre": ("NFC", "Strip"), "metaspace": ("NFC",), "bytelevel": ("NFC",)}
"""Normalizers that leave a text of NFC-inert characters with the same words (see `nfc_inert`), by
pre-tokenizer: Strip only removes whitespace BERT's drops anyway, but Metaspace turns it into words."""


@lru_cache(maxsize=1)
def composition_seconds() -> frozenset[int]:
    """Code points that may compose with the character before them (NFC quick check Maybe) though
    their combining class is 0: the second half of a primary composite, and Hangul V and T jamo."""
    seconds = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x30000):  # every canonical decomposition lies below U+2FA1E
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2 and unicodedata.normalize("NFC", chr(cp)) == chr(cp):
                seconds.add(int(parts[1], 16))
    return frozenset(seconds)


def nfc_inert(cp: int) -> bool:
    """True when NFC leaves this character alone in any text: assigned (in Python's Unicode),
    combining class 0, its own NFC, and never the second half of a composition. Such properties
    never change once assigned (Unicode's normalization stability policy), so a text of inert
    characters is NFC for the `tokenizers` crate too, whichever Unicode version it was built with."""
    c = chr(cp)
    return (unicodedata.category(c) != "Cn" and not unicodedata.combining(c)
            and unicodedata.normalize("NFC", c) == c and cp not in composition_seconds())


def normalizer_kinds(tok: Any) -> list[str] | None:
    """The types of the tokenizer's normalizers in order ([] for none), or None if unreadable."""
    spec = json.loads(tok.to_str()).get("normalizer")
    if spec is None:
        return []
    if spec.get("type") == "Sequence":
        return [n.get("type") for n in spec.get("normalizers", [])]
    return [spec.get("type")]


class _WordIndex(dict):
    """chunk -> its index in the encoder's piece arrays; a missing chunk is added by `add`."""

    def __init__(self, add):
        super().__init__()
        self.add = add

    def __missing__(self, chunk: str | tuple[str]) -> int:
        return self.add(chunk)


class WordCacheEncoder:
    """Encodes documents to the ids of `tok` (see module doc); the word cache lives as long as the encoder."""

    def __init__(self, tok: Any, max_chunks: int = 2_000_000):
        reason = why_not(tok)
        if reason is not None:
            raise ValueError(f"WordCacheEncoder cannot reproduce this tokenizer: {reason}")
        self.normalizer = tok.normalizer
        self.kind, self.replacement = pre_tokenizer_kind(tok)
        kinds = normalizer_kinds(tok)
        self.nfc_only = kinds is not None and all(k in NFC_ONLY[self.kind] for k in kinds)
        self.non_inert: set[int] = set()
        self.model = tok.model
        self.pre = tok.pre_tokenizer
        # char class of every code point asked so far: 0 word, 1 whitespace, 2 punctuation
        self.char_class: dict[int, int] = {}
        self.space: list[str] = []
        self.punct: list[str] = []
        self.pattern: re.Pattern[str] | None = None
        self.max_chunks = max_chunks
        self.resets = 0
        self._clear()
        # Python's str.split() cuts at these, but the pre-tokenizer keeps them inside words
        # (U+001C..U+001F): a text holding one is cut into words by the pattern instead
        self.odd_space: tuple[str, ...] = ()
        if self.kind == "bert_pre":
            py_space = [c for c in range(0x3001) if chr(c).isspace()]  # U+3000 is the last
            self._learn_chars([chr(c) for c in py_space])
            self.odd_space = tuple(chr(c) for c in py_space if self.char_class[c] != 1)
        elif self.kind == "metaspace":  # words are the replacement and what follows it, up to the next one
            rep = re.escape(self.replacement)
            self.pattern = re.compile(f"{rep}[^{rep}]*|[^{rep}]+")
        else:  # ByteLevel: GPT-2's regex cuts the words, each then seen as its UTF-8 bytes' characters
            import regex  # the \p{L} and \p{N} classes; a dependency of transformers

            self.pattern = regex.compile(GPT2_PATTERN)
            self.byte_char = bytes_to_unicode()

    def _clear(self) -> None:
        """An empty word cache (the character classes stay)."""
        self.word_pieces: dict[str, list[int]] = {}  # pre-tokenizer word -> the model's ids
        self.chunk_index = _WordIndex(self._add_chunk)  # chunk (see `encode`) -> index in the arrays below
        self._piece_ids: list[int] = []
        self._piece_first: list[bool] = []  # the piece begins a pre-tokenizer word
        self._piece_start: list[int] = []
        self._piece_len: list[int] = []
        self._arrays: tuple[np.ndarray, ...] | None = None

    @classmethod
    def for_tokenizer(cls, tok: Any) -> WordCacheEncoder | None:
        return cls(tok) if why_not(tok) is None else None

    # -- characters --------------------------------------------------------------------------------
    def _classify(self, cp: int) -> int:
        parts = self.pre.pre_tokenize_str("a" + chr(cp) + "b")
        if len(parts) == 1:
            return 0
        if len(parts) == 2:
            return 1
        if len(parts) == 3:
            return 2
        raise AssertionError(f"BertPreTokenizer split 'a{chr(cp)!r}b' into {parts}")

    def _learn_chars(self, texts: Sequence[str]) -> None:
        """Classify every code point of `texts` not seen yet; rebuild the splitting pattern if needed."""
        grew = self.pattern is None
        if grew:  # ASCII up front: most texts are ASCII only and skip the scan below
            for cp in range(128):
                grew |= self._learn(cp)
        joined = "".join(t for t in texts if not t.isascii())
        if joined:
            codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
            for cp in np.flatnonzero(np.bincount(codes)).tolist():
                if cp not in self.char_class:
                    grew |= self._learn(cp)
        if grew and self.kind == "bert_pre":
            self._compile()

    def _learn(self, cp: int) -> bool:
        """Record the pre-tokenizer's class of `cp`; True if it is whitespace or punctuation."""
        cls = self.char_class[cp] = self._classify(cp) if self.kind == "bert_pre" else 0
        if self.nfc_only and not nfc_inert(cp):
            self.non_inert.add(cp)
        if cls == 1:
            self.space.append(chr(cp))
        elif cls == 2:
            self.punct.append(chr(cp))
        return cls != 0

    def _normalize(self, texts: Sequence[str]) -> list[str]:
        """The normalizer's output for each text, with every character of it classified."""
        if self.normalizer is None:
            if self.kind == "bert_pre":  # the splitting pattern needs each character's class
                self._learn_chars(texts)
            return list(texts)
        norm = self.normalizer.normalize_str
        if not self.nfc_only:
            out = [norm(t) for t in texts]
            self._learn_chars(out)
            return out
        self._learn_chars(texts)  # also finds the characters that are not NFC-inert
        if not self.non_inert:
            return list(texts)
        marks = [chr(c) for c in sorted(self.non_inert)]
        if len(marks) <= 8:  # a few substring scans beat a character class
            def bad(t: str) -> bool:
                return any(m in t for m in marks)
        else:
            bad = re.compile("[" + "".join(re.escape(m) for m in marks) + "]").search
        out, changed = [], []
        for t in texts:
            if not t.isascii() and bad(t):
                t = norm(t)
                changed.append(t)
            out.append(t)
        self._learn_chars(changed)  # NFC may compose characters not seen before
        return out

    def _compile(self) -> None:
        def cls(chars: list[str]) -> str:
            return "".join(re.escape(c) for c in sorted(chars))

        space, punct = cls(self.space), cls(self.punct)
        word = f"[^{space}{punct}]+" if space or punct else "[\\s\\S]+"
        self.pattern = re.compile(f"{word}|[{punct}]" if punct else word)

    # -- words and chunks ----------------------------------------------------------------------------
    def _add_chunk(self, chunk: str | tuple[str]) -> int:
        """Index of a new chunk: its pre-tokenizer words (BERT: a whitespace-free chunk such as "word,"
        is the words "word" and ","; Metaspace: "▁" + chunk, or the chunk alone when given as a
        1-tuple; ByteLevel: the chunk is one word), each word's pieces from the model once."""
        ids: list[int] = []
        first: list[bool] = []
        known = self.word_pieces
        if self.kind == "metaspace":  # a space before the chunk became the replacement; a tuple: no space
            words = self.pattern.findall(chunk[0] if isinstance(chunk, tuple) else self.replacement + chunk)
        elif self.kind == "bytelevel":  # a chunk is one of the regex's words, in byte characters
            words = ["".join(map(self.byte_char.__getitem__, chunk.encode("utf-8")))]
        else:
            words = self.pattern.findall(chunk)
        for word in words:
            pieces = known.get(word)
            if pieces is None:
                pieces = known[word] = [t.id for t in self.model.tokenize(word)]
            if pieces:
                first.append(True)
                first += [False] * (len(pieces) - 1)
                ids += pieces
        i = len(self._piece_start)
        self.chunk_index[chunk] = i
        self._piece_start.append(len(self._piece_ids))
        self._piece_len.append(len(ids))
        self._piece_ids += ids
        self._piece_first += first
        self._arrays = None
        return i

    def _chunk_arrays(self) -> tuple[np.ndarray, ...]:
        if self._arrays is None:
            self._arrays = (np.array(self._piece_ids, np.int32), np.array(self._piece_first, bool),
                            np.array(self._piece_start, np.int64), np.array(self._piece_len, np.int64))
        return self._arrays

    @property
    def distinct_words(self) -> int:
        return len(self.word_pieces)

    @property
    def distinct_chunks(self) -> int:
        return len(self._piece_start)

    # -- documents ---------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], with_words: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(ids of all texts back to back int32, tokens per text int64, word-start flags or None).

        `ids[sum(lens[:i]):sum(lens[:i+1])]` equals `tok.encode(texts[i], add_special_tokens=False).ids`;
        the flags are True on the first token of every pre-tokenizer word (as `word_ids` give)."""
        if self.distinct_chunks > self.max_chunks:  # a long run's rare chunks: memory stays bounded
            self._clear()  # (about 200 bytes a chunk; the common ones come back at once)
            self.resets += 1
        norm = self._normalize(texts)
        # Whitespace is where both str.split() and the pre-tokenizer cut and drop, so a text is its
        # whitespace-free chunks back to back; the pattern cuts texts holding a space only Python sees.
        findall, odd = self.pattern.findall, self.odd_space
        chunks: list[str] = []
        per_doc = np.zeros(len(norm), np.int64)
        meta, rep, byte_level = self.kind == "metaspace", self.replacement, self.kind == "bytelevel"
        for i, t in enumerate(norm):
            if meta:  # Metaspace cuts at " " only; it prepends the replacement unless the text starts with one
                c = t.split(" ") if t else []
                if c and t[0] in (" ", rep):
                    c[0] = (c[0],)
            elif byte_level:  # GPT-2's regex: its words are the chunks
                c = findall(t)
            else:
                c = findall(t) if any(o in t for o in odd) else t.split()  # `in`: a fast substring scan
            per_doc[i] = len(c)
            chunks += c
        # a chunk not in the index is cut into words once (`_WordIndex.__missing__`), then looked up
        idx = np.fromiter(map(self.chunk_index.__getitem__, chunks), np.int64, count=len(chunks))
        pieces, first, start, plen = self._chunk_arrays()
        lens = plen[idx]
        total = int(lens.sum())
        ends = np.cumsum(lens)
        # position k of the output takes pieces[start[chunk] + (k - first position of chunk)]
        gather = np.repeat(start[idx] - (ends - lens), lens) + np.arange(total, dtype=np.int64)
        flat = pieces[gather]
        chunk_end = np.cumsum(per_doc)  # chunks up to and including each document
        doc_end = np.where(chunk_end > 0, ends[np.maximum(chunk_end - 1, 0)], 0) if len(chunks) else chunk_end
        doc_tokens = np.diff(np.concatenate([[0], doc_end])).astype(np.int64)
        return flat, doc_tokens, first[gather] if with_words else None
