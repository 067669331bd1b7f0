"""Pure per-document cleaning: RawDocument -> kept record, or a drop reason, or a quarantine."""
from __future__ import annotations

from typing import Any

from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.filters import clean_page
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
            html = decode_html(doc.html or b"", doc.charset)
        except DecodeError as e:
            return QUARANTINED, Quarantined(doc.source, doc.offset, "undecodable", str(e), doc.id)
        text = html_to_text(html)
    if "\x00" in text:
        return QUARANTINED, Quarantined(doc.source, doc.offset, "nul_bytes", "text contains NUL bytes", doc.id)
    text = normalize_text(text)
    if not text:
        return DROPPED, (doc, "empty_text")
    page, reason = clean_page(text, cfg.c4)
    if page is None:
        return DROPPED, (doc, reason)
    lang, score = identify_language(page)
    if score < cfg.min_language_score:
        return DROPPED, (doc, "low_language_score")
    if lang not in cfg.languages:
        return DROPPED, (doc, "language_not_kept")
    return KEPT, {"id": doc.id, "url": doc.url, "text": page, "language": lang,
                  "language_score": score, "source": doc.source}
