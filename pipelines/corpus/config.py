"""The corpus stage's typed config: its own options, then one field per cleaning rule family.

The families' fields come from the chain (steps/registry.py STEPS): a step's options dataclass
becomes the field named after it (`c4`, `gopher_repetition`, ...), so its flags are
`--<name>-<option>` and its `--config` key is `<name>`, and adding a family needs no edit here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from typing import TypeVar

from common.config import opt, require
from pipelines.corpus.readers import MAX_RECORD_BYTES, MAX_ROW_GROUP_BYTES
from pipelines.corpus.steps.base import Step
from pipelines.corpus.steps.registry import STEPS, step_configs

T = TypeVar("T")

AUTO = "auto"
"""`languages: [auto]`: the languages come from the crawl (auto_languages, beam_corpus.ChooseLanguages)."""

APPLICABLE = tuple(dict.fromkeys(s.name for s in STEPS if s.name != "language_id"))
"""The steps `applied_steps` may name: every step but language id, whose language and score a kept record needs
(deterministic: run again on the same text it gives the same answer)."""


def with_step_options(steps: tuple[Step, ...]) -> Callable[[type[T]], type[T]]:
    """Add to a class, before @dataclass reads it, one field per rule family of `steps`, in chain
    order after the fields it declares: `<step.name>: <step.config>` with the step's help."""
    def add(cls: type[T]) -> type[T]:
        annotations = cls.__dict__.get("__annotations__")
        if annotations is None:
            annotations = {}
            cls.__annotations__ = annotations
        for name, step in step_configs(steps).items():
            if name in annotations:
                raise ValueError(f"step {name!r} would replace the option {cls.__name__}.{name}")
            annotations[name] = step.config
            setattr(cls, name, field(default_factory=step.config, metadata={"help": step.help}))
        return cls
    return add


@dataclass
@with_step_options(STEPS)  # c4, gopher_repetition, gopher_quality, fineweb: each has `enabled`
class CorpusConfig:
    input: list[str] = opt(help="input files, directories or globs (WARC/WET .gz, JSONL, Parquet)", path=True)
    output: str = opt(help="stage directory to write (data/, duplicates/, dropped/, quarantine/, manifest.json)", path=True)
    language_id: bool = opt(True, "identify the language (py3langid) and keep only --languages; off: every document goes to data/und/ and the language-dependent rules (bad words, Gopher stop words) see 'und'")
    languages: list[str] = opt([AUTO], "languages to keep (ISO 639-1 codes), or 'auto': every language the crawl has enough of "
                                       "(--auto-language-share of the documents that pass cleaning, or --auto-language-documents of them), "
                                       "chosen after cleaning and before dedup; the others are dropped as language_not_kept")
    auto_language_share: float = opt(0.05, "with --languages auto: keep a language holding at least this share of the documents that pass cleaning")
    auto_language_documents: int = opt(1000, "with --languages auto: keep a language with at least this many documents that pass cleaning, whatever its share")
    min_language_score: float = opt(0.5, "drop documents whose language probability is lower")
    exact_dedup: bool = opt(True, "drop documents whose normalised text hash was seen (kept: indexed, else best quality, else smallest id)")
    near_dedup: bool = opt(True, "drop MinHash near-duplicates")
    jaccard_threshold: float = opt(0.8, "near-duplicate if estimated Jaccard of word shingles >= this")
    num_perm: int = opt(128, "MinHash permutations")
    shingle_words: int = opt(5, "words per shingle")
    shingle_chars: int = opt(5, "characters per shingle for languages written without spaces")
    char_shingle_languages: list[str] = opt(["zh", "ja", "th", "my", "km", "lo"], "languages shingled by characters, not words (keep them with --languages)")
    line_dedup: bool = opt(False, "C4 line-level dedup (TFDS remove_duplicate_text): a line repeated across pages stays on one page (chosen by hash of id); pages left too short are dropped as line_dedup_<rule>")
    index: str = opt("", "band index directory shared by recurring runs (incremental refresh): deduplicate against every snapshot it holds, then add this run's kept documents atomically; empty = no index", path=True)
    snapshot: str = opt("", "a name for this crawl snapshot, recorded with its generation in the band index (a refresh takes the snapshots not yet there)")
    index_wait: float = opt(0.0, "seconds to wait for another run that holds --index's lock (one run writes an index at a time); 0 = fail at once naming the holder")
    cc_rounds: int = opt(6, "large-star/small-star rounds for near-duplicate clusters; nodes not settled after them are counted in the manifest (cc_unconverged_nodes)")
    num_shards: int = opt(2, "Parquet files per language")
    max_record_bytes: int = opt(MAX_RECORD_BYTES, "quarantine as payload_too_large a record whose payload is over this many bytes (a WARC record's decoded payload, a JSON line, a Parquet text cell), read no further than that; the default 4 MiB passes every Common Crawl record (truncated at 1 MiB) and real pages up to 4 MiB")
    max_row_group_bytes: int = opt(MAX_ROW_GROUP_BYTES, "quarantine unread, as one payload_too_large record, a Parquet row group whose text column is over this many bytes uncompressed (Arrow decodes a page whole: reading a row group costs about 4 times its size)")
    document_seconds: float = opt(10.0, "quarantine as too_slow a document whose cleaning steps take longer than this many seconds (a page crafted to make a rule slow; pipelines/corpus/budget.py); real pages take well under a second; 0: no budget")
    applied_steps: list[str] = opt([], "cleaning steps the input has been through already, skipped here (an ablation's arms that differ only in deduplication read one shared cleaning: flows/ablation/ablate.py); their options still count where a later step reads them (C4's page rules after line dedup). Any of " + ", ".join(APPLICABLE) + "; language id always runs")

    @property
    def auto_languages(self) -> bool:
        """Whether the kept languages are chosen from the crawl (--languages auto) rather than listed."""
        return self.language_id and self.languages == [AUTO]

    def __post_init__(self) -> None:
        require(bool(self.input), "corpus: --input needs at least one file, directory or glob")
        require(0.0 < self.jaccard_threshold <= 1.0, "jaccard_threshold must be in (0, 1]")
        require(self.num_perm >= 16, "num_perm must be >= 16")
        require(self.num_shards >= 1, "num_shards must be >= 1")
        require(self.index_wait >= 0, "index_wait must be >= 0 seconds")
        require(self.max_record_bytes >= 1, "max_record_bytes must be >= 1")
        require(self.document_seconds >= 0, f"document_seconds must be >= 0 (0: no budget), got {self.document_seconds}")
        require(self.max_row_group_bytes >= self.max_record_bytes,
                "max_row_group_bytes must be >= max_record_bytes (a row group holding one record of the cap must pass)")
        require(not self.index or self.near_dedup, "--index needs near_dedup: the index stores MinHash band keys")
        require(bool(self.languages), "languages: give ISO 639-1 codes or 'auto'")
        require(self.languages == [AUTO] or all(len(x) == 2 and x.isalpha() for x in self.languages),
                f"languages must be ISO 639-1 codes or 'auto' alone, got {self.languages}")
        require(0.0 <= self.auto_language_share <= 1.0, f"auto_language_share must be in [0, 1], got {self.auto_language_share}")
        require(self.auto_language_documents >= 1, f"auto_language_documents must be >= 1, got {self.auto_language_documents}")
        unknown = sorted(set(self.applied_steps) - set(APPLICABLE))
        require(not unknown, f"applied_steps: {', '.join(unknown)} not a step that can be skipped "
                             f"({', '.join(APPLICABLE)})")
        for f in fields(self):  # a family's options given as a JSON object: its field's default_factory is its class
            if isinstance(getattr(self, f.name), dict) and is_dataclass(f.default_factory):
                setattr(self, f.name, f.default_factory(**getattr(self, f.name)))
