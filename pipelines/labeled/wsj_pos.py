"""Part-of-speech tags of Wall Street Journal sentences (Penn Treebank, human annotated), from the
sample that Debian's `python3-pattern` ships as a test corpus (`tagged-en-wsj.txt`).

1,000 lines of `word/TAG` tokens with the 45 Penn Treebank tags (25,026 tokens; a few lines hold
two sentences), the opening of the treebank's WSJ section, as in NLTK's 5% sample. Each line
becomes one example (`tokens`, `tags`; the tag follows the word's last `/`). The split is a hash
of the line number: 10% test, 10% validation. Token accuracy is the metric (POS tags are not
BIO spans). Licence: Pattern is BSD-3-Clause, but its test corpora README says "meant for
personal use, they are not part of the module's BSD license"; the Penn Treebank is LDC's.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines.labeled.splits import split_of

PACKAGE = "python3-pattern"
SUBDIR = "usr/share/doc/python3-pattern/test/corpora"
LICENCE_FILE = "README.txt"
FINETUNE = {"task": "tokens", "tokens_column": "tokens", "tags_column": "tags"}
DESCRIPTION = "WSJ part-of-speech tags (Penn Treebank sample in Debian's python3-pattern): 1,000 lines, 25k tokens"


def rows(source: Path, counts: Counter) -> Iterator[dict[str, Any]]:
    path = source / "tagged-en-wsj.txt"
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        tokens, tags = [], []
        for item in line.split():
            word, sep, tag = item.rpartition("/")
            if not sep or not word or not tag:
                raise ValueError(f"{path}:{n}: {item!r} is not word/TAG")
            tokens.append(word)
            tags.append(tag)
        counts["tokens"] += len(tokens)
        uid = f"wsj-{n:04d}"
        yield {"id": uid, "tokens": tokens, "tags": tags, "split": split_of(uid)}
