"""Reuters-21578 topic classification (ModApte split), from the ARFF files in Debian's `weka` package.

Weka ships the same 2,158 Reuters newswire articles twice, labelled corn / not corn
(`ReutersCorn-{train,test}.arff`) and grain / not grain (`ReutersGrain-...`), already split
ModApte-style into 1,554 train and 604 test articles (one fold of five of the full split). The
two labels become one 3-class topic: `corn` (the corn articles; nearly all are also grain),
`grain` (grain but not corn), `other`. Classes are unbalanced (about 3% / 4% / 93%), so the
fine-tune selects on macro-F1, on a validation split of 20% of train held out within each class
(about 22 corn and grain articles; at the default 10% there are about 11, and a checkpoint picked
on macro-F1 over 11 articles is mostly chance: 5-seed test macro-F1 spread 0.13). Licence: the weka package is GPL-2+; the Reuters-21578 texts are
(c) Reuters Ltd, distributed free of charge for research purposes only.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PACKAGE = "weka"
SUBDIR = "usr/share/doc/weka/examples"
LICENCE_FILE = "../copyright"
FINETUNE = {"task": "classification", "text_column": "text", "label_column": "label", "select_metric": "macro_f1",
             "validation_per_mille": 200}
DESCRIPTION = "Reuters-21578 ModApte (weka's ARFF files): 2,158 news articles, topic corn / grain / other"

_ROW = re.compile(r"^'((?:[^'\\]|\\.)*)',([01])\s*$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\"}


def read_arff(path: Path) -> list[tuple[str, int]]:
    """(text, class) of each @data row of weka's two-attribute (string, {0,1}) Reuters files."""
    rows, data = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not data:
            data = line.strip().lower() == "@data"
            continue
        if not line.strip():
            continue
        m = _ROW.match(line)
        if not m:
            raise ValueError(f"{path}:{n}: expected 'text',0|1 (a quoted string and the class)")
        text = re.sub(r"\\(.)", lambda e: _ESCAPES.get(e.group(1), e.group(1)), m.group(1))
        rows.append((text, int(m.group(2))))
    return rows


def rows(source: Path, counts: Counter) -> Iterator[dict[str, Any]]:
    for split in ("train", "test"):
        corn = read_arff(source / f"ReutersCorn-{split}.arff")
        grain = read_arff(source / f"ReutersGrain-{split}.arff")
        if [t for t, _ in corn] != [t for t, _ in grain]:
            raise ValueError(f"{source}: ReutersCorn-{split}.arff and ReutersGrain-{split}.arff do not hold the same "
                             "articles in the same order")
        for i, ((text, c), (_, g)) in enumerate(zip(corn, grain), 1):
            label = "corn" if c else "grain" if g else "other"
            counts[label] += 1
            counts["corn_not_grain"] += c and not g
            yield {"id": f"reuters-{split}-{i:04d}", "text": text.strip(), "label": label, "split": split}
