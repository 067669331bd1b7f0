"""The language step: py3langid names the page's language; pages scored too low, or in a language
not kept, are dropped. With `--languages auto` every language passes here and the stage keeps those the
crawl has enough of after cleaning (beam_corpus.ChooseLanguages). It is a step like the others, placed in registry.STEPS before the steps that
need the language (C4's bad words, Gopher's stop words) and after C4's line cleaning, so that it
reads the cleaned page.

Its options are CorpusConfig's own fields `language_id`, `languages` and `min_language_score`, not a
sub-config: their flags (--language-id, --languages, --min-language-score) and `--config` keys are
older than the steps, and a sub-config would rename them (--language-id-enabled, ...).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from pipelines.corpus.steps.base import Decision, Page, Step
from pipelines.corpus.text import identify_language


def _identify(page: Page, cfg: Any) -> Decision:
    lang, score = identify_language(page.text)
    if score < cfg.min_language_score:
        return None, "low_language_score"
    if lang not in cfg.languages and not cfg.auto_languages:  # auto: chosen once the crawl is counted (beam_corpus)
        return None, "language_not_kept"
    return replace(page, language=lang, language_score=score), None


# Off (dedup-only runs on already-clean text): the page keeps Page's "und" and 1.0, so every document
# goes to one partition, data/und/, and the language-dependent rules see "und".
STEP = Step("language_id", _identify, enabled=lambda cfg: cfg.language_id)


def language_verdicts(counts: dict[str, int], share: float, documents: int) -> dict[str, str | None]:
    """{language: None to keep it, or why it is not}: `--languages auto`'s rule. A language is kept with at least
    `documents` of the documents that passed cleaning, or at least `share` of them; the commonest is always kept."""
    total = sum(counts.values())
    top = max(counts, key=lambda k: (counts[k], k), default=None)
    return {lang: None if n >= documents or n >= share * total or lang == top else
            f"auto: {lang} had {n:,} of the {total:,} documents that passed cleaning, under {share:.0%} and under {documents:,}"
            for lang, n in counts.items()}
