"""The Gopher quality family (Rae et al. 2021, appendix A.1.1): its config, its rules and its step.

`gopher_quality(text, cfg, language)` returns None to keep, else the first rule the text fails. The
rules and their order follow datatrove's GopherQualityFilter; the defaults are the published
thresholds: Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training
Gopher", arXiv:2112.11446, appendix A.1.1. The stop-word rule needs the page's language, so the
step comes after the language step (registry.STEPS).
Words are counted as datatrove counts them (the package docstring, pipelines/corpus/steps).

One difference from datatrove remains, deliberate and measured by `bench corpus`: line fractions
(bullets, ellipses) leave blank lines out: they separate paragraphs in lmforge's text; datatrove's
text (trafilatura's, or its C4 filter's output) has none.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.config import opt, require
from pipelines.corpus.steps.base import Step, filter_step, fraction
from pipelines.corpus.words import english

_BULLETS = ("•", "-")  # datatrove's bullet marks
_ELLIPSES = ("...", "…")
GOPHER_STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]  # Gopher A.1.1


@dataclass
class GopherQualityConfig:
    enabled: bool = opt(True, "apply the Gopher quality rules")
    min_words: int = opt(50, "Gopher A.1.1: drop documents with fewer words (spaCy tokens not made only of punctuation, as datatrove)")
    max_words: int = opt(100_000, "Gopher A.1.1: drop documents with more words")
    min_mean_word_length: float = opt(3.0, "Gopher A.1.1: drop documents whose mean word length (characters) is lower")
    max_mean_word_length: float = opt(10.0, "Gopher A.1.1: drop documents whose mean word length (characters) is higher")
    max_symbol_word_ratio: float = opt(0.1, "Gopher A.1.1: max ratio of '#' to tokens, and of ellipses ('...' or '…') to tokens "
                                                 "(spaCy tokens, punctuation included, as datatrove)")
    max_bullet_lines_frac: float = opt(0.9, "Gopher A.1.1: max fraction of non-blank lines starting with a bullet ('•' or '-', as datatrove)")
    max_ellipsis_lines_frac: float = opt(0.3, "Gopher A.1.1: max fraction of non-blank lines ending with an ellipsis")
    min_alpha_words_frac: float = opt(0.8, "Gopher A.1.1: min fraction of tokens containing a letter (spaCy tokens, "
                                                "punctuation and numbers included, as datatrove; lower it for "
                                                "punctuation-rich languages)")
    min_stop_words: int = opt(2, "Gopher A.1.1: min number of distinct stop_words present (0 turns the rule off)")
    stop_words: list[str] = opt(GOPHER_STOP_WORDS, "Gopher A.1.1: the English stop words (case-sensitive, as datatrove)")
    stop_words_languages: list[str] = opt(["en"], "apply the stop-word rule only to documents identified as these languages "
                                                  "(the list is English; for other languages the rule is skipped)")

    def __post_init__(self) -> None:
        require(0 <= self.min_words <= self.max_words, "gopher_quality: need 0 <= min_words <= max_words")
        require(0 <= self.min_mean_word_length <= self.max_mean_word_length,
                "gopher_quality: need 0 <= min_mean_word_length <= max_mean_word_length")
        require(self.max_symbol_word_ratio >= 0, "gopher_quality: max_symbol_word_ratio must be >= 0")
        for name in ("max_bullet_lines_frac", "max_ellipsis_lines_frac", "min_alpha_words_frac"):
            fraction(name, getattr(self, name))
        require(self.min_stop_words >= 0, "gopher_quality: min_stop_words must be >= 0")


def gopher_quality(text: str, cfg: GopherQualityConfig, language: str) -> str | None:
    """None to keep, else gopher_<rule>. `language` (ISO 639-1) gates the English stop-word rule."""
    words = english().tokens(text)
    n = len(words)
    # Word count and mean length over tokens that are not all punctuation; the ratios below over
    # every token (datatrove's GopherQualityFilter: non_symbol_words and words).
    n_words, n_chars, n_alpha = english().word_stats(words)
    if not cfg.min_words <= n_words <= cfg.max_words or n_words == 0:
        return "gopher_word_count"
    if not cfg.min_mean_word_length <= n_chars / n_words <= cfg.max_mean_word_length:
        return "gopher_mean_word_length"
    if text.count("#") / n > cfg.max_symbol_word_ratio:
        return "gopher_hash_ratio"
    if (text.count("...") + text.count("…")) / n > cfg.max_symbol_word_ratio:
        return "gopher_ellipsis_ratio"
    # Blank lines only separate paragraphs: counting them would dilute the line fractions
    # (datatrove counts them, but its text, trafilatura's, has no blank lines).
    lines = [ln for ln in text.splitlines() if ln.strip()] or [""]
    if sum(ln.lstrip().startswith(_BULLETS) for ln in lines) / len(lines) > cfg.max_bullet_lines_frac:
        return "gopher_bullet_lines"
    if sum(ln.rstrip().endswith(_ELLIPSES) for ln in lines) / len(lines) > cfg.max_ellipsis_lines_frac:
        return "gopher_ellipsis_lines"
    if n_alpha / n < cfg.min_alpha_words_frac:
        return "gopher_alpha_words"
    if language in cfg.stop_words_languages:
        # "At least two of the following English words" (Gopher A.1.1): distinct words, as datatrove
        # counts them (a page saying "the" twice has one of them).
        if len(set(cfg.stop_words).intersection(words)) < cfg.min_stop_words:
            return "gopher_stop_words"
    return None


STEP = Step("gopher_quality", filter_step(lambda page, cfg: gopher_quality(page.text, cfg, page.language)),
            GopherQualityConfig, "Gopher quality rules (Rae et al. 2021, A.1.1)")
