"""Pure per-document cleaning: RawDocument -> kept record, or a drop reason, or a quarantine.

The steps, in this fixed order (each filter family can be switched off in CorpusConfig):

  1. decode + extract   HTML bytes -> text (JSONL/WET text is taken as is); the charset comes
                        from the BOM, HTTP header or <meta>, else UTF-8, else detection (text.py)
  2. normalise          NFC, single spaces, one blank line between paragraphs
  3. C4                 line cleaning, then page rules (filters.py; tfds or paper variant)
  4. language id        py3langid; drop low scores and languages not kept
  5. C4 bad words       the LDNOOBW list of the identified language (filters.has_bad_words)
  6. Gopher repetition  (quality.py)
  7. Gopher quality     (quality.py; the stop-word rule needs the language from step 4)
  8. FineWeb            (quality.py)

C4 runs before the others because it rewrites the text (drops lines); the later rules see the
cleaned page, which is the text that is kept. With every family off, a kept document's text
is the normalised text. Paragraphs are the blocks between blank lines: resiliparse puts a blank
line around <p> and <h1>-<h6>, normalize_text and C4 keep one, and Gopher's duplicate-paragraph
rules split on them. Pages whose text is in <div>s or <br>-separated lines come out as one
paragraph, and for them only the line rules can fire.
"""
from __future__ import annotations

from typing import Any

from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.filters import clean_page, has_bad_words
from pipelines.corpus.quality import fineweb_quality, gopher_quality, gopher_repetition
from pipelines.corpus.text import DecodeError, decode_html, html_to_text, identify_language, normalize_text
from schemas.records import Quarantined, RawDocument

KEPT, DROPPED, QUARANTINED = "kept", "dropped", "quarantined"


def process_document(doc: RawDocument, cfg: CorpusConfig) -> tuple[str, Any]:
    """(KEPT, record dict) | (DROPPED, (doc, reason)) | (QUARANTINED, Quarantined)."""
    if doc.text is not None:
        text = doc.text
    elif doc.content_type not in ("text/html", "application/xhtml+xml"):
        return DROPPED, (doc, "not_html")
    else:
        try:
            decoded = decode_html(doc.html or b"", doc.charset)
        except DecodeError as e:
            return QUARANTINED, Quarantined(doc.source, doc.offset, "undecodable", str(e), doc.id)
        text = html_to_text(decoded.text)
    if "\x00" in text:
        return QUARANTINED, Quarantined(doc.source, doc.offset, "nul_bytes", "text contains NUL bytes", doc.id)
    page = normalize_text(text)
    if not page:
        return DROPPED, (doc, "empty_text")
    if cfg.c4.enabled:
        page, reason = clean_page(page, cfg.c4)
        if page is None:
            return DROPPED, (doc, reason)
    if cfg.language_id:
        lang, score = identify_language(page)
        if score < cfg.min_language_score:
            return DROPPED, (doc, "low_language_score")
        if lang not in cfg.languages:
            return DROPPED, (doc, "language_not_kept")
    else:  # dedup-only runs on already-clean text: one partition, no language-dependent rules
        lang, score = "und", 1.0
    if cfg.c4.enabled and cfg.c4.bad_words and has_bad_words(page, lang):
        return DROPPED, (doc, "c4_bad_words")
    reason = ((cfg.gopher_repetition.enabled and gopher_repetition(page, cfg.gopher_repetition))
              or (cfg.gopher_quality.enabled and gopher_quality(page, cfg.gopher_quality, lang))
              or (cfg.fineweb.enabled and fineweb_quality(page, cfg.fineweb)))
    if reason:
        return DROPPED, (doc, reason)
    return KEPT, {"id": doc.id, "url": doc.url, "text": page, "language": lang,
                  "language_score": score, "source": doc.source}
