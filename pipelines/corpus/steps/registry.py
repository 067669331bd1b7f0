"""The cleaning chain: STEPS, in the order process_document applies them.

A page goes through every enabled step in turn and is dropped by the first that gives a reason.
A step that rewrites the page (C4's line cleaning) hands the later steps its rewritten text, so
order matters: C4 cleans before language id reads the page, and the steps that need the language
come after it. To add a rule family: one file in this package with its config dataclass (a field
`enabled` among its options) and its `Step`, then one entry here. CorpusConfig gets a field named
after the step, with flags `--<name>-<option>` and the `--config` key `<name>`; its drop reasons
are recorded and counted (`dropped_<reason>`) as every other's.
"""
from __future__ import annotations

from pipelines.corpus.steps import (
    c4,
    decontaminate,
    fineweb,
    gopher_quality,
    gopher_repetition,
    language,
    pii,
    url_filter,
)
from pipelines.corpus.steps.base import Step

STEPS: tuple[Step, ...] = (
    url_filter.STEP,         # FineWeb's URL filter: judges where the page came from, before its text
    c4.CLEAN,                # C4 line cleaning and page rules: rewrites the page
    language.STEP,           # py3langid: sets the page's language
    c4.BAD_WORDS,            # C4's LDNOOBW list of that language
    gopher_repetition.STEP,  # Gopher Table A1
    gopher_quality.STEP,     # Gopher A.1.1 (its stop-word rule reads the language)
    fineweb.STEP,            # FineWeb's custom filters
    decontaminate.STEP,      # evaluation sets' n-grams, on the text that is kept (runs when files are given)
    pii.STEP,                # FineWeb's PII formatter: rewrites what is kept, so it comes last
)


def step_configs(steps: tuple[Step, ...] = STEPS) -> dict[str, Step]:
    """The steps that own a CorpusConfig field, by field name, in chain order (the first step of a
    family names it). A ValueError if two steps give one name different config classes."""
    out: dict[str, Step] = {}
    for step in steps:
        if step.config is None:
            continue
        first = out.setdefault(step.name, step)
        if first.config is not step.config:
            raise ValueError(f"steps named {step.name!r} disagree on their config: "
                             f"{first.config.__name__} and {step.config.__name__}")
    return out
