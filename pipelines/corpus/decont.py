"""N-gram decontamination, the pure core: evaluation sets in, an index of their word n-grams, and
for each document the first of its n-grams that an evaluation item also has (GPT-3 appendix C;
datatrove 0.10.1's NGramsDecontIndexer and NGramsDecontFilter, which lmforge matches decision for
decision, `bench/corpus/decont.py`).

    items = read_eval_sets(cfg)                # validation/test items of JSONL/CSV/Parquet files
    index = NGramIndex.build(items, cfg)       # or NGramIndex.load(path, cfg)
    m = index.match(page_text)                 # None, or Match(ngram, items=(ItemRef, ...), position)

A text's n-grams are datatrove's: `simplify` (lowercase, numbers -> 0, punctuation -> space,
whitespace collapsed, diacritics dropped), then spaCy's English tokens (pipelines/corpus/words.py),
then every run of `n_grams` tokens joined by " ". An item with fewer tokens has no n-gram and can
not be found; those are counted per task (`too_short`) so a report can say so.

Index file (`save`, one .npz, no pickles): `hashes` uint64 sorted, the 64-bit key of each distinct
n-gram string; `offsets` int64 and `postings` int32, the items of hashes[i] being
postings[offsets[i]:offsets[i+1]]; `quick` uint64 sorted, the n-grams' rolling keys (NGramIndex);
`meta`, UTF-8 JSON: format, n_grams, the normalisation options, the items as [task, split, item],
too_short. Written to a temporary name and renamed; loading with other options fails.

Speed (2 cores, VADER's 4.6k validation/test items): 2,300 3-KB pages/s with cold caches, 4,100 warm;
datatrove 0.10.1 (spaCy, SHA-1) 280/s on the same pages, with the same decision on each.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

import numpy as np
import regex

from common.config import opt, require
from pipelines.corpus.words import english
from pipelines.io import read_records
from schemas import storage

FORMAT = "lmforge.decont_index/v1"
MODES = ("drop", "mark")
NORM_OPTIONS = ("lowercase", "norm_whitespace", "remove_punctuation", "norm_unicode_diacritics", "norm_numbers",
                "norm_weekdays", "norm_monthnames")


@dataclass
class DecontConfig:
    enabled: bool = opt(True, "check documents against the evaluation sets of --decontaminate (the step runs when files are given)")
    files: list[str] = opt([], alias="--decontaminate", help="evaluation sets: JSONL/CSV/Parquet files with a split and a text column, or labelled-task "
                           "folders from `lmforge labeled prepare` (their finetune.json names the columns)", path=True)
    splits: list[str] = opt(["validation", "test"], "the splits of those sets that are evaluation data")
    text_column: str = opt("text", "files: column with an item's text (else a 'tokens' list of words is joined)")
    split_column: str = opt("split", "files: column with an item's split")
    id_column: str = opt("id", "files: column with an item's id (else its line or row number names it)")
    n_grams: int = opt(12, "words per n-gram; a document sharing one n-gram with an item is contaminated "
                       "(datatrove's default 12; GPT-3 used 8 to 13)")
    mode: str = opt("drop", "drop: contaminated documents are dropped; mark: kept, with the n-gram and items noted")
    lowercase: bool = opt(True, "normalise: lowercase")
    norm_whitespace: bool = opt(True, "normalise: collapse whitespace runs to one space")
    remove_punctuation: bool = opt(True, "normalise: punctuation (datatrove's list) becomes a space")
    norm_unicode_diacritics: bool = opt(True, "normalise: drop diacritics (NFD, then nonspacing marks removed)")
    norm_numbers: bool = opt(True, "normalise: every number (1,000.5 counts as 0.0) becomes 0")
    norm_weekdays: bool = opt(False, "normalise: English weekday names (lowercase) become WEEKDAY")
    norm_monthnames: bool = opt(False, "normalise: English month names (lowercase) become MONTH")
    skip_number_ngrams: bool = opt(True, "leave out of the index n-grams with no letter in any token (a row of figures "
                                   "becomes '0 0 0 ...', which any table on the web shares; off: as datatrove, which "
                                   "flagged 28 clean sample-crawl pages for one Reuters table)")

    def __post_init__(self) -> None:
        require(self.n_grams >= 1, f"decontaminate: n_grams must be >= 1, got {self.n_grams}")
        require(self.mode in MODES, f"decontaminate: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        require(bool(self.splits) and len(set(self.splits)) == len(self.splits),
                f"decontaminate: splits must be distinct and not empty, got {self.splits}")
        require(all((self.text_column, self.split_column)), "decontaminate: text_column and split_column must be named")

    def norm(self) -> dict:
        """What makes two indexes comparable: n_grams and the normalisation switches."""
        return {"n_grams": self.n_grams, "skip_number_ngrams": self.skip_number_ngrams, **{k: getattr(self, k) for k in NORM_OPTIONS}}


@dataclass(frozen=True)
class ItemRef:
    task: str
    split: str
    item: str
    """The record's id, else "line N" (JSONL, CSV) or "row N" (Parquet), 1-based."""


@dataclass(frozen=True)
class EvalItem(ItemRef):
    text: str

    @property
    def ref(self) -> ItemRef:
        return ItemRef(self.task, self.split, self.item)


@dataclass(frozen=True)
class Match:
    ngram: str
    """The document's first n-gram (simplified tokens joined by " ") that the index holds."""
    items: tuple[ItemRef, ...]
    position: int
    """Index of the n-gram's first token among the document's simplified tokens."""


# --- Reading evaluation sets --------------------------------------------------------------------

@dataclass(frozen=True)
class Columns:
    text: str = "text"
    pair: str = ""
    tokens: str = "tokens"
    split: str = "split"
    id: str = "id"


def read_eval_sets(cfg: DecontConfig) -> list[EvalItem]:
    """The items of cfg.splits in every file or prepared task folder of cfg.files, in file order."""
    items: list[EvalItem] = []
    tasks: dict[str, str] = {}
    for name in cfg.files:
        path = Path(name)
        if path.is_dir():
            task, data, cols = path.name, *_prepared_task(path)
        else:
            task, data, cols = path.stem, [path], Columns(cfg.text_column, "", "tokens", cfg.split_column, cfg.id_column)
        if task in tasks:
            raise ValueError(f"{name}: task name {task!r} is taken by {tasks[task]}; rename one of them")
        tasks[task] = name
        for f in data:
            items.extend(_file_items(f, task, cols, cfg.splits))
    return items


def _prepared_task(folder: Path) -> tuple[list[Path], Columns]:
    """The data files and columns that `lmforge labeled prepare` wrote into finetune.json."""
    spec = folder / "finetune.json"
    try:
        ft = json.loads(spec.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{spec}: not a prepared labelled task ({e})") from None
    # A moved folder still holds its data: finetune.json names absolute paths from when it was written.
    data = [Path(d) if Path(d).exists() else folder / Path(d).name for d in ft.get("data") or ["data.jsonl"]]
    return data, Columns(ft.get("text_column", "text"), ft.get("text_pair_column") or "", ft.get("tokens_column", "tokens"),
                         ft.get("split_column", "split"), ft.get("id_column", "id"))


def _file_items(path: Path, task: str, cols: Columns, splits: list[str]) -> list[EvalItem]:
    out, seen = [], Counter()
    for where, rec in read_records(path):
        if rec.get(cols.split) is None:
            raise ValueError(f"{path}:{where}: no {cols.split!r} column; every record needs its split")
        seen[str(rec[cols.split])] += 1
        if str(rec[cols.split]) in splits:
            uid = rec.get(cols.id)
            out.append(EvalItem(task, str(rec[cols.split]), where if uid in (None, "") else str(uid),
                                _item_text(rec, cols, f"{path}:{where}")))
    if not seen:
        raise ValueError(f"{path}: no records")
    if not out:
        raise ValueError(f"{path}: no record in splits {', '.join(splits)} (found: {', '.join(sorted(seen))})")
    return out


def _item_text(rec: dict, cols: Columns, where: str) -> str:
    """The text column (+ the pair's second text on the next line: n-grams may span both, as
    datatrove's query + gold overlap n-grams do), else the words of a token task."""
    if rec.get(cols.text) is not None:
        texts = [rec[cols.text], *([rec[cols.pair]] if cols.pair and rec.get(cols.pair) is not None else [])]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{where}: {cols.text!r} (or {cols.pair!r}) is not a string")
        return "\n".join(texts)
    words = rec.get(cols.tokens)
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError(f"{where}: no {cols.text!r} text column (nor a {cols.tokens!r} list of words)")
    return tokens_text(words)


_PTB = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "``": '"', "''": '"'}


def tokens_text(words: list[str]) -> str:
    """Treebank words as a page writes them, where it changes the n-grams: "do n't" -> "don't" (a page's
    "don't" simplifies to "don t", Treebank's to "do n t") and bracket names back to brackets. Other
    Treebank splits ("company 's", "$ 5") are punctuation that simplify turns into spaces anyway."""
    out: list[str] = []
    for w in words:
        w = _PTB.get(w, w)
        if out and w.lower() in ("n't", "n’t"):
            out[-1] += w
        else:
            out.append(w)
    return " ".join(out)




# --- Normalisation: datatrove 0.10.1 datatrove/utils/text.py simplify_text, ported -----------------
# (Apache-2.0; datatrove is only a bench dependency). Same output, 2x faster (see simplify's comments).

PUNCTUATION = '!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„\';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_."}►»' + "".join(
    map(chr, (x for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for x in range(a, b))))
_PUNCT = re.compile("[" + re.escape(PUNCTUATION) + "]")
_NUMBERS = regex.compile(r"\p{Nd}+([.,،٫⎖⎗⎘]{1}\p{Nd}+)?", regex.VERBOSE | regex.UNICODE)  # `regex`: \p{Nd}
_WEEKDAYS = re.compile(r"monday|tuesday|wednesday|thursday|friday|saturday|sunday")
_MONTHS = re.compile(r"january|february|march|april|may|june|july|august|september|october|november|december")


@cache
def _nonspacing_marks() -> dict[int, None]:
    """str.translate table deleting category Mn, by this Python's unicodedata as datatrove asks it
    (55 ms once; translate is 3x faster than datatrove's per-character generator)."""
    return dict.fromkeys(c for c in range(0x110000) if unicodedata.category(chr(c)) == "Mn")


def simplify(text: str, cfg: DecontConfig) -> str:
    """datatrove's simplify_text(text, TextNormConfig(...)) with cfg's switches."""
    if cfg.lowercase:
        text = text.lower()
    if cfg.norm_numbers:
        text = _NUMBERS.sub("0", text)
    if cfg.norm_weekdays:
        text = _WEEKDAYS.sub("WEEKDAY", text)
    if cfg.norm_monthnames:
        text = _MONTHS.sub("MONTH", text)
    if cfg.remove_punctuation:  # a class regex is 2x faster than translate with a table of non-ASCII keys
        text = _PUNCT.sub(" ", text)
    if cfg.norm_whitespace:  # = strip, then \s+ -> " ": str.split and re's \s share Py_UNICODE_ISSPACE
        text = " ".join(text.split())
    if cfg.norm_unicode_diacritics and not text.isascii():  # NFD leaves ASCII as it is, and ASCII has no Mn
        text = unicodedata.normalize("NFD", text)
        marks = _nonspacing_marks()
        if not marks.keys().isdisjoint(map(ord, set(text))):
            text = text.translate(marks)
    return text.strip()


def word_tokens(text: str, cfg: DecontConfig) -> list[str]:
    """datatrove's word_tokenize(simplify_text(text)) for English: spaCy's tokens, blank ones dropped
    (its strip_strings; words.tokens drops whitespace tokens, and no other token holds a space)."""
    return english().tokens(simplify(text, cfg))


# --- The index ------------------------------------------------------------------------------------

def ngram_hash(ngram: str) -> int:
    """64-bit key of an n-gram string: blake2b (xxhash, datatrove's, is not an lmforge dependency).
    Odds of a false match: an index of N n-grams checked against M document n-grams expects M*N/2^64
    false hits; 10^7 index n-grams (a large suite) over a 10^12-word crawl gives 10^19/1.8e19 = 0.5
    documents; VADER's 3.6e4 over 10^10 words 3.6e14/1.8e19 = 2e-5."""
    return int.from_bytes(hashlib.blake2b(ngram.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


_P = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible mod 2^64: no token's key is multiplied away
_EMPTY = np.zeros(0, np.uint64)
TOKEN_CACHE = 1_000_000


def window_keys(toks: list[str], n: int, token_keys: dict[str, int]) -> np.ndarray:
    """The rolling key of every n-token window: sum of token keys * P^(n-1-k) mod 2^64, all windows at
    once (22 array operations for 12-grams, instead of ~1 us of Python hashing per window)."""
    w = len(toks) - n + 1
    if w <= 0:
        return _EMPTY
    keys = list(map(token_keys.get, toks))
    if None in keys:
        if len(token_keys) > TOKEN_CACHE:
            token_keys.clear()
        keys = [k if k is not None else token_keys.setdefault(t, ngram_hash(t)) for t, k in zip(toks, keys)]
    h = np.array(keys, dtype=np.uint64)
    key = h[:w].copy()
    for k in range(1, n):  # wraps mod 2^64, as intended
        key *= _P
        key += h[k:k + w]
    return key


class NGramIndex:
    """Evaluation n-grams -> items. A document is looked up in two steps: the rolling keys of all its
    windows (`window_keys`) against `quick`, then, in text order, the string key of the windows whose
    rolling key is there. The rolling key only shortlists: it has no false negatives, and the string
    key removes its false positives, so decisions are the string key's."""

    def __init__(self, cfg: DecontConfig, hashes: np.ndarray, offsets: np.ndarray, postings: np.ndarray,
                 quick: np.ndarray, items: list[ItemRef], too_short: dict[str, int]) -> None:
        self.cfg, self.hashes, self.offsets, self.postings, self.quick = cfg, hashes, offsets, postings, quick
        self.items, self.too_short = items, too_short
        self._token_keys: dict[str, int] = {}

    @classmethod
    def build(cls, items: list[EvalItem], cfg: DecontConfig) -> NGramIndex:
        n, too_short = cfg.n_grams, Counter({it.task: 0 for it in items})
        found: dict[int, set[int]] = {}
        quick, token_keys = [_EMPTY], {}
        for i, it in enumerate(items):
            toks = word_tokens(it.text, cfg)
            if len(toks) < n:
                too_short[it.task] += 1
                continue
            keys = window_keys(toks, n, token_keys)
            if cfg.skip_number_ngrams:
                letters = np.array([any(c.isalpha() for c in t) for t in toks], dtype=np.int64)
                runs = np.concatenate([[0], np.cumsum(letters)])
                keep = (runs[n:] - runs[:-n]) > 0  # windows with at least one token that has a letter
                keys = keys[keep]
            else:
                keep = np.ones(len(keys), dtype=bool)
            if not keep.any():  # every window is figures only: nothing to look for, as for a short item
                too_short[it.task] += 1
                continue
            for k in np.flatnonzero(keep).tolist():
                found.setdefault(ngram_hash(" ".join(toks[k:k + n])), set()).add(i)
            quick.append(keys)
        hashes = sorted(found)
        offsets = np.cumsum([0] + [len(found[h]) for h in hashes], dtype=np.int64)
        postings = np.array([i for h in hashes for i in sorted(found[h])], dtype=np.int32)
        return cls(cfg, np.array(hashes, dtype=np.uint64), offsets, postings, np.unique(np.concatenate(quick)),
                   [it.ref for it in items], dict(too_short))

    def items_per_task(self) -> dict[str, int]:
        """Items read per task, the too short included (`too_short` has those)."""
        return dict(Counter(it.task for it in self.items))

    def match(self, text: str) -> Match | None:
        """The first n-gram of `text`, in text order, that an evaluation item has (datatrove's filter)."""
        return next(self.matches(text), None)

    def matches(self, text: str) -> Iterator[Match]:
        """Every n-gram of `text` that an evaluation item has, in text order (the first is `match`'s)."""
        toks = word_tokens(text, self.cfg)
        keys = window_keys(toks, self.cfg.n_grams, self._token_keys)
        if not len(keys) or not len(self.quick):
            return
        at = np.minimum(np.searchsorted(self.quick, keys), len(self.quick) - 1)
        for k in np.flatnonzero(self.quick[at] == keys).tolist():
            ngram = " ".join(toks[k:k + self.cfg.n_grams])
            h = ngram_hash(ngram)
            j = int(np.searchsorted(self.hashes, np.uint64(h)))
            if j < len(self.hashes) and int(self.hashes[j]) == h:
                yield Match(ngram, tuple(self.items[i] for i in self.postings[self.offsets[j]:self.offsets[j + 1]]), k)

    def save(self, path: str | Path) -> None:
        meta = {"format": FORMAT, **self.cfg.norm(), "too_short": self.too_short,
                "items": [[it.task, it.split, it.item] for it in self.items]}
        buf = io.BytesIO()
        np.savez(buf, hashes=self.hashes, offsets=self.offsets, postings=self.postings, quick=self.quick,
                 meta=np.frombuffer(json.dumps(meta, ensure_ascii=False).encode(), dtype=np.uint8))
        storage.write_bytes(path, buf.getvalue())  # a temporary name + rename (one put on object storage)

    @classmethod
    def load(cls, path: str | Path, cfg: DecontConfig | None = None) -> NGramIndex:
        """The index at `path`; with `cfg`, refuse one built with other n_grams or normalisation."""
        try:
            with np.load(io.BytesIO(storage.read_bytes(path)), allow_pickle=False) as z:
                arrays = {k: z[k] for k in ("hashes", "offsets", "postings", "quick", "meta")}
            meta = json.loads(arrays.pop("meta").tobytes().decode())
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"{path}: not a decontamination index ({e})") from None
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: index format {meta.get('format')!r}, this lmforge reads {FORMAT}")
        built = DecontConfig(**{f.name: meta[f.name] for f in fields(DecontConfig) if f.name in meta})
        if cfg is not None and cfg.norm() != built.norm():
            diff = {k: (v, cfg.norm()[k]) for k, v in built.norm().items() if cfg.norm()[k] != v}
            raise ValueError(f"{path}: index built with other options than asked: "
                             + ", ".join(f"{k}={a} (asked {b})" for k, (a, b) in diff.items()) + "; rebuild it")
        return cls(built, items=[ItemRef(*it) for it in meta["items"]], too_short=meta["too_short"], **arrays)

