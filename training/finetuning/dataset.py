"""A labelled task from files: examples, their splits and their label names. Pure Python.

    data = load_task("classification", Columns(text="review", label="stars"), data=["reviews.jsonl"])
    data.train, data.validation, data.test, data.labels, data.counts

Where the splits come from, in this order:
1. files named per split (`train=`, `validation=`, `test=`);
2. a DatasetDict's own splits, or the `split` column of the data (`train` / `validation` /
   `test`; `valid`, `dev` and `val` are read as validation);
3. otherwise a hash of each example's id (or of its text when there is no id column): 10% test,
   then 10% of the rest validation. The same example always lands in the same split, whatever
   the file order, and identical texts without ids share a split, so a duplicate cannot leak
   from train into test.
When there is still no validation split, 10% of train (by the same kind of hash, another salt;
for classification 10% of each class, so a rare class is in it) is held out for early stopping
and model selection; the test split is only scored at the end.

A row that cannot be used (empty text, no label, a malformed CSV line, a line that is not UTF-8,
...) is left out and counted under its reason; if more than `max_bad_fraction` of the rows are
bad, the run stops instead, as the file is then probably not what the options say. A problem
that makes the task wrong (a missing column, a label in validation or test that train never
saw, one class only) stops the run with an error naming the file, line and column.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.finetune import LABELED_COLUMNS, SPLITS, TASKS
from training.finetuning.readers import Bad, DataError, Record, TooFewRows, read_file

SPLIT_ALIASES = {"train": "train", "training": "train", "validation": "validation", "valid": "validation",
                 "val": "validation", "dev": "validation", "test": "test", "testing": "test"}
BIO_PREFIXES = ("B-", "I-", "E-", "S-", "L-", "U-")
LEFT_OUT_KEPT = 20
"""Left-out rows listed by file and line in metrics.json (all of them are counted)."""


@dataclass(frozen=True)
class Columns:
    """Which column holds what; for token tasks `tokens` and `tags` (JSONL lists) or CoNLL files."""

    text: str = "text"
    text_pair: str | None = None
    label: str = "label"
    split: str = "split"
    id: str = "id"
    tokens: str = "tokens"
    tags: str = "tags"

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Columns:
        """The columns `options` name by their `<key>_column` options (schemas/finetune.py LABELED_COLUMNS), each
        missing one at its default; an empty pair column: single texts."""
        named = {c.key: options.get(c.option, c.default) for c in LABELED_COLUMNS}
        return cls(**{**named, "text_pair": named["text_pair"] or None})


@dataclass(frozen=True)
class Example:
    uid: str
    """The id column's value, else a digest of the content."""
    where: str
    """File and line (or row) it was read from."""
    text: str = ""
    text_pair: str | None = None
    label: str | float | None = None
    """Class name (str) for classification, float for regression, None for tokens."""
    tokens: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass
class TaskData:
    task: str
    train: list[Example]
    validation: list[Example]
    test: list[Example]
    labels: list[str] | None
    """Class or tag names in id order; None for regression."""
    counts: Counter = field(default_factory=Counter)
    left_out: list[dict[str, str]] = field(default_factory=list)
    splits_from: dict[str, str] = field(default_factory=dict)

    def split(self, name: str) -> list[Example]:
        return {"train": self.train, "validation": self.validation, "test": self.test}[name]

    @property
    def label2id(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.labels or [])}

    @property
    def is_bio(self) -> bool:
        """Tags in a BIO/BIOES scheme (entity F1 applies), not plain tags such as POS."""
        return bool(self.labels) and self.task == "tokens" and all(
            t == "O" or t.startswith(BIO_PREFIXES) for t in self.labels) and any(t != "O" for t in self.labels)


def bucket(key: str, salt: str) -> int:
    """0..999 from a stable hash of (salt, key); Python's hash() is salted per process."""
    return int.from_bytes(hashlib.blake2b(f"{salt}:{key}".encode(), digest_size=8).digest(), "big") % 1000


def _content_key(ex: Example) -> str:
    body = "\x1f".join(ex.tokens) if ex.tokens else f"{ex.text}\x1f{ex.text_pair or ''}"
    return hashlib.blake2b(body.encode(), digest_size=12).hexdigest()


class _Builder:
    def __init__(self, task: str, cols: Columns, max_bad_fraction: float):
        self.task, self.cols, self.max_bad_fraction = task, cols, max_bad_fraction
        self.counts: Counter = Counter()
        self.left_out: list[dict[str, str]] = []
        self.rows = 0

    def leave_out(self, bad: Bad) -> None:
        self.counts[f"left_out_{bad.reason}"] += 1
        if len(self.left_out) < LEFT_OUT_KEPT:
            self.left_out.append({"where": bad.where, "reason": bad.reason, "detail": bad.detail})

    def _need(self, rec: Record, col: str) -> Any:
        if col not in rec.values:
            raise DataError(f"{rec.where}: no column {col!r} (columns: {', '.join(map(str, rec.values))}); "
                            "name the right one with --text-column / --text-pair-column / --label-column")
        return rec.values[col]

    def example(self, rec: Record) -> Example | Bad:
        c, v = self.cols, rec.values
        uid = v.get(c.id)
        if self.task == "tokens":
            tokens, tags = self._need(rec, c.tokens), self._need(rec, c.tags)
            if not isinstance(tokens, (list, tuple)) or not isinstance(tags, (list, tuple)):
                return Bad(rec.where, "tokens_not_a_list", f"{c.tokens!r} and {c.tags!r} must be lists")
            if len(tokens) != len(tags):
                return Bad(rec.where, "tokens_tags_mismatch", f"{len(tokens)} tokens, {len(tags)} tags")
            if not tokens:
                return Bad(rec.where, "empty_sentence")
            if any(not isinstance(t, str) or not t.strip() for t in tokens):
                return Bad(rec.where, "empty_token", "a token is empty or not a string")
            if any(t is None or str(t) == "" for t in tags):
                return Bad(rec.where, "missing_tag")
            ex = Example("", rec.where, tokens=tuple(tokens), tags=tuple(str(t) for t in tags))
        else:
            text = self._need(rec, c.text)
            pair = self._need(rec, c.text_pair) if c.text_pair else None
            label = self._need(rec, c.label)
            if text is None:
                return Bad(rec.where, "missing_text", f"column {c.text!r} is null")
            if not str(text).strip():
                return Bad(rec.where, "empty_text", f"column {c.text!r} is empty")
            if c.text_pair and (pair is None or not str(pair).strip()):
                return Bad(rec.where, "empty_text_pair", f"column {c.text_pair!r} is empty")
            label = self.label(rec, label)
            if isinstance(label, Bad):
                return label
            ex = Example("", rec.where, str(text), None if pair is None else str(pair), label)
        uid = str(uid) if uid not in (None, "") else _content_key(ex)
        return Example(uid, ex.where, ex.text, ex.text_pair, ex.label, ex.tokens, ex.tags)

    def label(self, rec: Record, value: Any) -> Any:
        col = self.cols.label
        if value is None or (isinstance(value, str) and not value.strip()):
            return Bad(rec.where, "missing_label", f"column {col!r} is empty")
        if self.task == "regression":
            try:
                x = float(value)
            except (TypeError, ValueError):
                return Bad(rec.where, "label_not_a_number", f"column {col!r} holds {value!r}")
            return x if math.isfinite(x) else Bad(rec.where, "label_not_a_number", f"column {col!r} holds {value!r}")
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, float):
            if not value.is_integer():
                raise DataError(f"{rec.where}: label {value!r} in column {col!r} is not a class; "
                                "for a numeric target use --task regression")
            value = int(value)
        if isinstance(value, (list, dict)):
            raise DataError(f"{rec.where}: label in column {col!r} is a {type(value).__name__}, not a class")
        return str(value).strip()

    def split_of(self, rec: Record, declared: str | None, has_column: bool) -> str | None:
        if declared:
            return declared
        if rec.split is not None:
            name = SPLIT_ALIASES.get(rec.split.lower())
            if name is None:
                raise DataError(f"{rec.where}: DatasetDict split {rec.split!r} is not one of train/validation/test")
            return name
        if not has_column:
            return None
        value = rec.values.get(self.cols.split)
        name = SPLIT_ALIASES.get(str(value).strip().lower()) if value is not None else None
        if name is None:
            raise DataError(f"{rec.where}: column {self.cols.split!r} holds {value!r}; expected train, validation "
                            "or test (or leave the column out for a hash split)")
        return name


def stratified_split(examples: list[Example], task: str, seed: int, test_per_mille: int,
                     validation_per_mille: int) -> dict[str, list[Example]]:
    """{split: examples}: within each class (classification; one group otherwise) the distinct ids in the order of
    a seeded hash, the first test_per_mille/1000 of them test, the next validation_per_mille/1000 validation, the
    rest train, so every split has each class in its share (a class of 5 rows keeps all 5 in train: 10% of 5
    rounds to 0). Rows sharing an id (identical texts without an id column) share a split."""
    groups: dict[Any, dict[str, list[Example]]] = {}
    for ex in examples:
        key = ex.label if task == "classification" else None
        groups.setdefault(key, {}).setdefault(ex.uid, []).append(ex)
    out: dict[str, list[Example]] = {"train": [], "validation": [], "test": []}
    where: dict[str, str] = {}
    for by_uid in groups.values():
        order = sorted(by_uid, key=lambda u: hashlib.blake2b(f"{seed}:{u}".encode(), digest_size=8).digest())
        n_test = round(len(order) * test_per_mille / 1000)
        n_valid = round(len(order) * validation_per_mille / 1000)
        for i, uid in enumerate(order):
            where[uid] = "test" if i < n_test else "validation" if i < n_test + n_valid else "train"
    for ex in examples:  # file order within each split
        out[where[ex.uid]].append(ex)
    return out


def hold_out_validation(train: list[Example], task: str, per_mille: int) -> tuple[list[Example], list[Example]]:
    """(train, validation): per_mille/1000 of train's distinct ids held out, the lowest by a hash of the id. For
    classification the share is taken within each class, so a rare class gets its share of the rows that pick
    the checkpoint (a plain hash left Reuters' validation 6 minority articles of 151 where 11 were due). Rows
    sharing an id share a side."""
    groups: dict[Any, set[str]] = {}
    for ex in train:
        groups.setdefault(ex.label if task == "classification" else None, set()).add(ex.uid)
    held: set[str] = set()
    for uids in groups.values():
        if task == "classification":
            order = sorted(uids, key=lambda u: (bucket(u, "validation"), u))
            held.update(order[:round(len(order) * per_mille / 1000)])
        else:
            held.update(u for u in uids if bucket(u, "validation") < per_mille)
    return [ex for ex in train if ex.uid not in held], [ex for ex in train if ex.uid in held]


def load_task(task: str, cols: Columns = Columns(), *, train: Iterable[str] = (), validation: Iterable[str] = (),
              test: Iterable[str] = (), data: Iterable[str] = (), test_per_mille: int = 100,
              validation_per_mille: int = 100, max_bad_fraction: float = 0.1, split_seed: int | None = None) -> TaskData:
    """Read the files and split them; see the module docstring for the rules. With `split_seed`, rows that no
    file or column assigns are split by `stratified_split` instead of the id hash."""
    if task not in TASKS:
        raise ValueError(f"task {task!r} is not one of {', '.join(TASKS)}")
    named = [(p, s) for s, paths in (("train", train), ("validation", validation), ("test", test)) for p in paths]
    if named and list(data):
        raise ValueError("give either --data or --train/--validation/--test files, not both")
    if not named and not list(data):
        raise ValueError("no labelled data: give --data FILE or --train FILE (and --validation/--test)")
    if named and not list(train):
        raise ValueError("--validation/--test given without --train")
    sources = named or [(p, None) for p in data]
    b = _Builder(task, cols, max_bad_fraction)
    by_split: dict[str | None, list[Example]] = {None: [], "train": [], "validation": [], "test": []}
    splits_from: dict[str, str] = {}
    for path, declared in sources:
        has_column = None
        for rec in read_file(path, conll=task == "tokens"):
            b.rows += 1
            if isinstance(rec, Bad):
                b.leave_out(rec)
                continue
            if has_column is None:  # the file's first record decides whether it carries a split column
                has_column = cols.split in rec.values and not declared and rec.split is None
            elif has_column and cols.split not in rec.values:
                raise DataError(f"{rec.where}: no column {cols.split!r}, though the file's first row has one")
            split = b.split_of(rec, declared, has_column)
            ex = b.example(rec)
            if isinstance(ex, Bad):
                b.leave_out(ex)
                continue
            by_split[split].append(ex)
            if split:
                how = (f"file {path}" if declared else f"DatasetDict split of {path}" if rec.split is not None
                       else f"column {cols.split!r} of {path}")
                splits_from.setdefault(split, how)
    bad = sum(v for k, v in b.counts.items() if k.startswith("left_out_"))
    if b.rows and bad / b.rows > max_bad_fraction:
        first = "; ".join(f"{x['where']}: {x['reason']} {x['detail']}".strip() for x in b.left_out[:5])
        raise DataError(f"{bad} of {b.rows} rows cannot be used (more than {max_bad_fraction:.0%}), so the options or "
                        f"the file are probably wrong. First ones: {first}")

    rest = by_split.pop(None)
    if rest and split_seed is not None and not any(by_split.values()):  # nothing assigned: seeded, stratified
        by_split = stratified_split(rest, task, split_seed, test_per_mille, validation_per_mille)
        how = "stratified by label, by" if task == "classification" else "by"
        for name, share in (("test", test_per_mille), ("validation", validation_per_mille)):
            splits_from[name] = f"{share / 10:g}% of the rows, {how} a hash seeded {split_seed}"
        splits_from["train"] = "the rows not held out"
        rest = []
    # hash split of the rest: test first (unless a test split was given), then validation from train
    hash_test = bool(rest) and not by_split["test"]
    if hash_test:
        splits_from["test"] = f"hash of the id: {test_per_mille / 10:g}% of the rows"
    for ex in rest:
        by_split["test" if hash_test and bucket(ex.uid, "test") < test_per_mille else "train"].append(ex)
    if rest:
        splits_from.setdefault("train", "hash of the id: the rows not held out")
    if not by_split["validation"]:
        by_split["train"], by_split["validation"] = hold_out_validation(by_split["train"], task, validation_per_mille)
        each = " of each class" if task == "classification" else ""
        splits_from["validation"] = f"held out from train: {validation_per_mille / 10:g}%{each} by a hash of the id"
    for name in SPLITS:
        if not by_split[name]:
            raise TooFewRows(f"the {name} split is empty ({splits_from.get(name, 'no source')}); "
                            f"sources: {', '.join(str(p) for p, _ in sources)}")

    labels = _label_names(task, by_split, cols, sources)
    b.counts.update({f"{s}_examples": len(by_split[s]) for s in SPLITS})
    b.counts["rows_read"] = b.rows
    return TaskData(task, by_split["train"], by_split["validation"], by_split["test"], labels, b.counts, b.left_out,
                    splits_from)


def _label_names(task: str, by_split: dict, cols: Columns, sources: list) -> list[str] | None:
    if task == "regression":
        return None
    seen = Counter(t for ex in by_split["train"] for t in (ex.tags if task == "tokens" else [ex.label]))
    what = "tag" if task == "tokens" else "label"
    col = cols.tags if task == "tokens" else cols.label
    if task == "classification" and len(seen) < 2:
        only = next(iter(seen), None)
        raise DataError(f"{', '.join(str(p) for p, _ in sources)}: the train split has one class ({only!r}, "
                        f"{seen[only]} examples); classification needs at least two")
    for split in ("validation", "test"):
        for ex in by_split[split]:
            for t in (ex.tags if task == "tokens" else [ex.label]):
                if t not in seen:
                    raise DataError(f"{ex.where}: {what} {t!r} in column {col!r} of the {split} split never occurs in "
                                    f"train (train has {len(seen)}: {', '.join(map(str, sorted(seen, key=str)[:20]))})")
    if all(re.fullmatch(r"-?\d+", k) for k in seen):  # integer classes keep their numeric order: 0, 1, 2, 10
        return sorted(seen, key=int)
    return sorted(seen)


def cap(examples: list[Example], n: int, salt: str = "cap") -> list[Example]:
    """At most n examples, the same ones on every run (smallest hash), in their original order."""
    if not n or len(examples) <= n:
        return examples
    chosen = set(sorted(range(len(examples)), key=lambda i: bucket(examples[i].uid, salt) * 10**9 + i)[:n])
    return [ex for i, ex in enumerate(examples) if i in chosen]
