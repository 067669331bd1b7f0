"""Export the word and sentence rules lmforge's cleaning counts with (issue 16) from their sources.

    .venv/bin/python infra/tools/export_word_rules.py   # needs spaCy and datatrove: pip install -e '.[bench]'

writes pipelines/corpus/data/words/english.json:
  - spaCy's English tokenizer (`spacy.blank("en")`): its prefix, suffix and infix expressions, its URL
    expression and its special cases (tokenizer exceptions such as "don't" -> do n't, "e.g.", "U.S.");
  - spaCy's Sentencizer's default sentence-final characters;
  - datatrove's PUNCTUATION_SET (datatrove.utils.text), which decides which tokens Gopher's quality
    rules count as words.

datatrove's Gopher and C4 filters count words and sentences with exactly these (spaCy's blank English
pipeline plus a sentencizer); `pipelines/corpus/words.py` re-implements spaCy's tokenizer algorithm
over the exported rules in pure Python, so lmforge makes the same decisions without depending on
spaCy at run time. Rerun this when the pinned spaCy changes; the unit tests then compare the two.
Licences: spaCy is MIT (Explosion AI), datatrove Apache-2.0 (Hugging Face); both are kept beside the
data in pipelines/corpus/data/words/SOURCE.md.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "pipelines" / "corpus" / "data" / "words" / "english.json"


def export() -> dict:
    import datatrove
    import spacy
    from datatrove.utils.text import PUNCTUATION_SET
    from spacy.attrs import ORTH
    from spacy.pipeline import Sentencizer

    tok = spacy.blank("en").tokenizer
    assert tok.token_match is None, "spaCy's English tokenizer gained a token_match: words.py must handle it"
    url = tok.url_match.__self__
    return {
        "source": {"spacy": spacy.__version__, "datatrove": getattr(datatrove, "__version__", "0.10.1"),
                   "made_by": "infra/tools/export_word_rules.py"},
        "prefix": tok.prefix_search.__self__.pattern,
        "suffix": tok.suffix_search.__self__.pattern,
        "infix": tok.infix_finditer.__self__.pattern,
        "url": url.pattern,
        "url_flags": int(url.flags),
        "faster_heuristics": bool(tok.faster_heuristics),
        "specials": {s: [t[ORTH] for t in toks] for s, toks in sorted(tok.rules.items())},
        "sentence_ends": sorted(Sentencizer.default_punct_chars),
        "punctuation": sorted(PUNCTUATION_SET),
    }


def main() -> int:
    data = export()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(data['specials'])} special cases, spaCy {data['source']['spacy']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
