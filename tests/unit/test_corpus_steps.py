"""The cleaning chain as a list of steps (pipelines/corpus/steps): the registry defines the order and
CorpusConfig's family fields, and a family added as one step file plus one list entry is applied and
configured by its flags (its drops counted by their reason: test_beam_transforms.py)."""
from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass

import pytest
from test_corpus_core import EN  # same folder: pytest puts it on sys.path

from common.config import add_config_args, config_from_args, opt
from pipelines.corpus import clean
from pipelines.corpus.clean import DROPPED, KEPT, process_document
from pipelines.corpus.config import CorpusConfig, with_step_options
from pipelines.corpus.decont import DecontConfig
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
from pipelines.corpus.steps.base import Page, Step, filter_step
from pipelines.corpus.steps.registry import STEPS, step_configs
from schemas.records import RawDocument

# What a new family's file holds: its config (with `enabled`), its rule as a pure function, its step.


@dataclass
class ToyConfig:
    enabled: bool = opt(True, "apply the toy rule")
    word: str = opt("spam", "drop pages containing this word")


def toy_rule(text: str, cfg: ToyConfig) -> str | None:
    return "toy_word" if cfg.word in text.split() else None


TOY = Step("toy", filter_step(lambda page, cfg: toy_rule(page.text, cfg)), ToyConfig, "a toy rule family")

# ... and its one entry in the list. The steps before it are switched off: a bare sentence passes.
TOY_STEPS = (*STEPS, TOY)
OTHERS_OFF = ["--no-language-id", "--no-c4-enabled", "--no-gopher-repetition-enabled", "--no-gopher-quality-enabled",
              "--no-fineweb-enabled", "--no-url-filter-enabled", "--no-pii-enabled"]


@dataclass
@with_step_options(TOY_STEPS)
class ToyCorpusConfig(CorpusConfig):
    """CorpusConfig as it reads with TOY in the list."""


def toy_config(*argv: str) -> ToyCorpusConfig:
    p = argparse.ArgumentParser()
    add_config_args(p, ToyCorpusConfig)
    return config_from_args(ToyCorpusConfig, p.parse_args(["--input", "x", "--output", "y", *OTHERS_OFF, *argv]))


def doc(text: str) -> RawDocument:
    return RawDocument("d", "https://a.invalid/d", "f", 0, text=text, content_type="text/plain")


def test_the_list_is_the_chain_and_names_the_config_fields():
    assert STEPS == (url_filter.STEP, c4.CLEAN, language.STEP, c4.BAD_WORDS, gopher_repetition.STEP, gopher_quality.STEP,
                     fineweb.STEP, decontaminate.STEP, pii.STEP)
    families = {name: s.config for name, s in step_configs().items()}
    assert families == {"url_filter": url_filter.UrlFilterConfig, "c4": c4.C4Config,
                        "gopher_repetition": gopher_repetition.GopherRepetitionConfig,
                        "gopher_quality": gopher_quality.GopherQualityConfig, "fineweb": fineweb.FineWebConfig,
                        "decontaminate": DecontConfig, "pii": pii.PiiConfig}
    fields = {f.name: f for f in dataclasses.fields(CorpusConfig)}
    assert list(fields)[-len(families):] == list(families)  # after the stage's own options, in chain order
    assert all(isinstance(getattr(CorpusConfig(input=["x"], output="y"), n), cls) for n, cls in families.items())
    assert fields["gopher_repetition"].metadata["help"] == "Gopher repetition rules (Rae et al. 2021, Table A1)"
    with pytest.raises(ValueError, match="disagree"):
        step_configs((c4.CLEAN, Step("c4", c4.CLEAN.apply, ToyConfig)))
    with pytest.raises(ValueError, match="replace the option CorpusConfig.languages"):
        with_step_options((Step("languages", TOY.apply, ToyConfig),))(CorpusConfig)


def test_a_step_appended_to_the_list_is_applied_and_configured_by_its_flags(tmp_path, monkeypatch):
    monkeypatch.setattr(clean, "STEPS", TOY_STEPS)
    cfg = toy_config()
    assert isinstance(cfg.toy, ToyConfig) and cfg.toy.word == "spam"
    assert process_document(doc("buy spam now"), cfg) == (DROPPED, (doc("buy spam now"), "toy_word", None))
    status, rec = process_document(doc("buy eggs now"), cfg)
    assert status == KEPT and rec["text"] == "buy eggs now"
    # its options: flags --toy-<option>, and the --config key "toy"
    assert process_document(doc("buy spam now"), toy_config("--no-toy-enabled"))[0] == KEPT
    assert process_document(doc("buy eggs now"), toy_config("--toy-word", "eggs"))[1][1] == "toy_word"
    (tmp_path / "c.json").write_text(json.dumps({"toy": {"word": "now"}}))
    assert toy_config("--config", str(tmp_path / "c.json")).toy == ToyConfig(word="now")


def test_an_appended_step_sees_what_the_steps_before_it_left(monkeypatch):
    seen: list[Page] = []
    spy = Step("c4", filter_step(lambda page, cfg: seen.append(page)), c4.C4Config)  # shares C4's switch
    monkeypatch.setattr(clean, "STEPS", (*STEPS, spy))
    status, rec = process_document(doc("One line that C4 removes\n" + EN), CorpusConfig(input=["x"], output="y"))
    assert status == KEPT and seen == [Page(EN, "en", rec["language_score"], url="https://a.invalid/d")] and rec["language_score"] > 0.9



def test_a_family_given_as_an_object_becomes_its_flags():
    """A Prefect override {"corpus": {"c4": {...}}} reaches the stage as --c4-<option> flags, not as one --c4 flag."""
    from common.config import options_to_argv, parse_config
    from pipelines.corpus.config import CorpusConfig

    argv = options_to_argv({"input": ["x.jsonl"], "output": "out", "c4": {"variant": "paper", "bad_words": False},
                            "fineweb": {"enabled": False}})
    assert argv == ["--input", "x.jsonl", "--output", "out", "--c4-variant", "paper", "--no-c4-bad-words",
                    "--no-fineweb-enabled"]
    cfg = parse_config(CorpusConfig, "corpus", None, argv)
    assert cfg.c4.variant == "paper" and not cfg.c4.bad_words and not cfg.fineweb.enabled
