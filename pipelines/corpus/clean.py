"""Pure per-document cleaning: RawDocument -> kept record, or a drop reason, or a quarantine.

  1. decode + extract   HTML bytes -> text (JSONL/WET text is taken as is); the charset comes
                        from the BOM, HTTP header or <meta>, else UTF-8, else detection (text.py)
  2. normalise          NFC, single spaces, one blank line between paragraphs
  3. the steps          steps/registry.py STEPS, in order, each switched on or off by its options:
                        URL filter, C4 line cleaning and page rules, language id, C4 bad words,
                        Gopher repetition, Gopher quality, FineWeb, PII; the first reason given
                        drops the page

C4 runs before the others because it rewrites the text (drops lines); the later steps see the
cleaned page, which is the text that is kept. With every family off, a kept document's text
is the normalised text. Paragraphs are the blocks between blank lines: resiliparse puts a blank
line around <p> and <h1>-<h6>, normalize_text and C4 keep one, and Gopher's duplicate-paragraph
rules split on them. Pages whose text is in <div>s or <br>-separated lines come out as one
paragraph, and for them only the line rules can fire.
"""
from __future__ import annotations

from typing import Any

from pipelines.corpus import budget
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.steps.base import Page
from pipelines.corpus.steps.registry import STEPS
from pipelines.corpus.text import DecodeError, decode_html, html_to_text, identify_language, normalize_text
from schemas.records import Quarantined, RawDocument

KEPT, DROPPED, QUARANTINED = "kept", "dropped", "quarantined"


def process_document(doc: RawDocument, cfg: CorpusConfig) -> tuple[str, Any]:
    """(KEPT, record dict) | (DROPPED, (doc, reason, language)) | (QUARANTINED, Quarantined). A kept record's
    `notes` are the steps' Notes (steps/base.py); a reason may be a Reason carrying a detail. A dropped page's
    `language` is the one identified on the text it had when dropped (`dropped_language`), so the report can say
    what each language lost; None for a page without text."""
    if doc.text is not None:
        text = doc.text
    elif doc.content_type not in ("text/html", "application/xhtml+xml"):
        return DROPPED, (doc, "not_html", None)
    else:
        try:
            decoded = decode_html(doc.html or b"", doc.charset)
        except DecodeError as e:
            return QUARANTINED, Quarantined(doc.source, doc.offset, "undecodable", str(e), doc.id)
        text = html_to_text(decoded.text)
    if "\x00" in text:
        return QUARANTINED, Quarantined(doc.source, doc.offset, "nul_bytes", "text contains NUL bytes", doc.id)
    page: Page | None = Page(normalize_text(text), url=doc.url or "")
    if not page.text:
        return DROPPED, (doc, "empty_text", None)
    size, name = len(page.text), "normalise"
    budget.start(cfg.document_seconds)
    try:
        for step in STEPS:
            if step.name in cfg.applied_steps:  # the input went through it already
                continue
            name = step.name
            options = step.options(cfg)
            if step.enabled(options):
                last, (page, reason) = page, step.apply(page, options)
                if page is None:
                    return DROPPED, (doc, reason, dropped_language(last, cfg))
                budget.check()
    except budget.TooSlow:
        return QUARANTINED, Quarantined(doc.source, doc.offset, "too_slow", f"cleaning went over document_seconds "
                                        f"{cfg.document_seconds:g} in step {name}: {size} characters", doc.id)
    finally:
        budget.stop()
    return KEPT, {"id": doc.id, "url": doc.url, "text": page.text, "language": page.language,
                  "language_score": page.language_score, "source": doc.source, "notes": page.notes}


DROPPED_LANGUAGE_CHARS = 600
"""Characters py3langid reads of a page dropped before the language step: enough to name the language of a page for the
report (the language step itself reads 2,000); reading 2,000 cost the cleaning 3-4% of its time on the sample crawl."""


def dropped_language(page: Page, cfg: CorpusConfig) -> str | None:
    """The language of a page a step dropped: the language step's, once it ran; else py3langid's on the page as it was
    when dropped (its first DROPPED_LANGUAGE_CHARS characters); None with language id off."""
    if not cfg.language_id:
        return None
    if page.language != "und":
        return page.language
    return identify_language(page.text[:DROPPED_LANGUAGE_CHARS])[0] if page.text.strip() else None
