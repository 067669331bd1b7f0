"""The FineWeb family (Penedo et al. 2024): its config, its rules and its step.

`fineweb_quality(text, cfg)` returns None to keep, else the first rule the text fails. The rules
and their order follow datatrove's FineWebQualityFilter; the defaults are Penedo et al. 2024,
arXiv:2406.17557 ("custom filters"), as datatrove's FineWebQualityFilter defaults, which FineWeb's
own pipeline script uses (for the duplicated-line characters the write-up states 0.1; the datatrove
default is 0.01). Words are counted as datatrove counts them (the package docstring,
pipelines/corpus/steps).

One difference from datatrove remains, deliberate and measured by `bench corpus`: the line-break
ratio counts line breaks between non-blank lines (blank lines separate paragraphs in lmforge's text;
datatrove's text has none).
"""
from __future__ import annotations

from dataclasses import dataclass

from common.config import opt, require
from pipelines.corpus.steps.base import Step, duplicates, filter_step, fraction
from pipelines.corpus.words import english


@dataclass
class FineWebConfig:
    enabled: bool = opt(True, "apply the FineWeb quality rules")
    min_line_punct_frac: float = opt(0.12, "FineWeb: drop documents where a smaller fraction of lines ends in line_end_chars")
    line_end_chars: str = opt(".'\"!?", "FineWeb: the characters that count as a line's terminal punctuation "
                                        "(FineWeb's release set; newer datatrove uses a wider multilingual set)")
    max_short_line_frac: float = opt(0.67, "FineWeb: drop documents where a larger fraction of lines is short")
    short_line_chars: int = opt(30, "FineWeb: a line of at most this many characters is short")
    max_char_dup_frac: float = opt(0.01, "FineWeb (datatrove default; the paper states 0.1): max fraction of "
                                         "characters (newlines excluded) in lines that repeat an earlier line")
    max_newline_word_ratio: float = opt(0.3, "FineWeb: max ratio of line breaks to words (list-like pages); "
                                             "blank lines between paragraphs are not counted")

    def __post_init__(self) -> None:
        for name in ("min_line_punct_frac", "max_short_line_frac", "max_char_dup_frac"):
            fraction(name, getattr(self, name))
        require(bool(self.line_end_chars), "fineweb: line_end_chars must not be empty")
        require(self.short_line_chars >= 0 and self.max_newline_word_ratio >= 0, "fineweb thresholds must be >= 0")


def fineweb_quality(text: str, cfg: FineWebConfig) -> str | None:
    """None to keep, else fineweb_<rule>. Inequalities as current datatrove: a document at a
    threshold is kept (the FineWeb release dropped at equality for the first three rules)."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return "fineweb_line_punct_ratio"  # nothing to measure; datatrove says "empty"
    ends = tuple(cfg.line_end_chars)
    if sum(ln.endswith(ends) for ln in lines) / len(lines) < cfg.min_line_punct_frac:
        return "fineweb_line_punct_ratio"
    if sum(len(ln) <= cfg.short_line_chars for ln in lines) / len(lines) > cfg.max_short_line_frac:
        return "fineweb_short_line_ratio"
    if duplicates(lines)[1] / len(text.replace("\n", "")) > cfg.max_char_dup_frac:
        return "fineweb_char_dup_ratio"
    words = english().tokens(text)
    # Line breaks, not "\n" characters: FineWeb measured this on trafilatura's text, which
    # separates paragraphs with one newline; ours keeps a blank line between them.
    if not words or (len(lines) - 1) / len(words) > cfg.max_newline_word_ratio:
        return "fineweb_newline_ratio"
    return None


STEP = Step("fineweb", filter_step(lambda page, cfg: fineweb_quality(page.text, cfg)),
            FineWebConfig, "FineWeb quality rules (Penedo et al. 2024)")
