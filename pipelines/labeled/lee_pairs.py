"""Human similarity ratings of news document pairs (Lee, Pincombe & Welsh 2005), from gensim's sdist.

gensim ships the corpus as test data: `lee.cor` (50 short Australian news articles, one per
line, Latin-1) and `similarities0-1.txt` (the 50 x 50 matrix of mean human ratings, the 1-5
scale divided by 5; the upper triangle holds the 1,225 pairs). Each pair becomes a regression
example (`text`, `text_pair`, `score`). This is the only real human-rated pair set of more than
500 pairs found in Debian or PyPI packages; it pairs documents, not sentences (no NLI, STS or
paraphrase set ships in them). As every document takes part in 49 pairs, the split is by
document: 15% of the documents (by a hash) are test documents and 15% validation documents; a
pair is test if either document is a test document, else validation if either is a validation
document, else train, so no test document is seen in training. Licence: gensim is LGPL-2.1; the
ratings and articles carry no licence of their own (an academic release).
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PACKAGE = "pypi:gensim==4.4.0"
SUBDIR = "gensim-4.4.0/gensim/test/test_data"
LICENCE_FILE = "../../../COPYING"
FINETUNE = {"task": "regression", "text_column": "text", "text_pair_column": "text_pair", "label_column": "score"}
DESCRIPTION = "Lee et al. 2005 news document similarity (gensim's test data): 1,225 human-rated pairs of 50 articles"


def doc_split(i: int) -> str:
    b = int.from_bytes(hashlib.blake2b(f"lee-doc:{i}".encode(), digest_size=8).digest(), "big") % 100
    return "test" if b < 15 else "validation" if b < 30 else "train"


def rows(source: Path, counts: Counter) -> Iterator[dict[str, Any]]:
    docs = [d.strip() for d in (source / "lee.cor").read_text(encoding="latin-1").splitlines() if d.strip()]
    matrix = [[float(x) for x in line.split()] for line in (source / "similarities0-1.txt").read_text().splitlines()
              if line.strip()]
    if len(docs) != 50 or len(matrix) != 50 or any(len(r) != 50 for r in matrix):
        raise ValueError(f"{source}: expected 50 documents and a 50 x 50 matrix, got {len(docs)} and "
                         f"{len(matrix)} rows")
    for i in range(50):
        for j in range(i + 1, 50):
            sa, sb = doc_split(i), doc_split(j)
            split = "test" if "test" in (sa, sb) else "validation" if "validation" in (sa, sb) else "train"
            counts["pairs"] += 1
            yield {"id": f"lee-{i:02d}-{j:02d}", "text": docs[i], "text_pair": docs[j], "score": matrix[i][j],
                   "split": split}
