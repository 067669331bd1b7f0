"""The corpus stage's typed config."""
from __future__ import annotations

from dataclasses import dataclass, field

from common.config import opt, require
from pipelines.corpus.filters import C4Config
from pipelines.corpus.quality import FineWebConfig, GopherQualityConfig, GopherRepetitionConfig


@dataclass
class CorpusConfig:
    input: list[str] = opt(help="input files, directories or globs (WARC/WET .gz, JSONL, Parquet)")
    output: str = opt(help="stage directory to write (data/, duplicates/, dropped/, quarantine/, manifest.json)")
    language_id: bool = opt(True, "identify the language (py3langid) and keep only --languages; off: every document goes to data/und/ and the language-dependent rules (bad words, Gopher stop words) see 'und'")
    languages: list[str] = opt(["en", "ru"], "languages to keep (ISO 639-1); others are dropped as language_not_kept")
    min_language_score: float = opt(0.5, "drop documents whose language probability is lower")
    exact_dedup: bool = opt(True, "drop documents whose normalised text hash was seen (kept: indexed, else best quality, else smallest id)")
    near_dedup: bool = opt(True, "drop MinHash near-duplicates")
    jaccard_threshold: float = opt(0.8, "near-duplicate if estimated Jaccard of word shingles >= this")
    num_perm: int = opt(128, "MinHash permutations")
    shingle_words: int = opt(5, "words per shingle")
    shingle_chars: int = opt(5, "characters per shingle for languages written without spaces")
    char_shingle_languages: list[str] = opt(["zh", "ja", "th", "my", "km", "lo"], "languages shingled by characters, not words (keep them with --languages)")
    line_dedup: bool = opt(False, "C4 line-level dedup (TFDS remove_duplicate_text): a line repeated across pages stays on one page (chosen by hash of id); pages left too short are dropped as line_dedup_<rule>")
    index: str = opt("", "band index directory shared by recurring runs (incremental refresh): deduplicate against every snapshot it holds, then add this run's kept documents atomically; empty = no index")
    snapshot: str = opt("", "a name for this crawl snapshot, recorded with its generation in the band index (a refresh takes the snapshots not yet there)")
    index_wait: float = opt(0.0, "seconds to wait for another run that holds --index's lock (one run writes an index at a time); 0 = fail at once naming the holder")
    cc_rounds: int = opt(6, "large-star/small-star rounds for near-duplicate clusters; nodes not settled after them are counted in the manifest (cc_unconverged_nodes)")
    num_shards: int = opt(2, "Parquet files per language")
    # Quality filters, applied in this order by clean.process_document; each has `enabled`.
    c4: C4Config = field(default_factory=C4Config, metadata={"help": "C4 line and page rules (tfds or paper variant)"})
    gopher_repetition: GopherRepetitionConfig = field(default_factory=GopherRepetitionConfig,
                                                      metadata={"help": "Gopher repetition rules (Rae et al. 2021, Table A1)"})
    gopher_quality: GopherQualityConfig = field(default_factory=GopherQualityConfig,
                                                metadata={"help": "Gopher quality rules (Rae et al. 2021, A.1.1)"})
    fineweb: FineWebConfig = field(default_factory=FineWebConfig, metadata={"help": "FineWeb quality rules (Penedo et al. 2024)"})

    def __post_init__(self) -> None:
        require(bool(self.input), "corpus: --input needs at least one file, directory or glob")
        require(0.0 < self.jaccard_threshold <= 1.0, "jaccard_threshold must be in (0, 1]")
        require(self.num_perm >= 16, "num_perm must be >= 16")
        require(self.num_shards >= 1, "num_shards must be >= 1")
        require(self.index_wait >= 0, "index_wait must be >= 0 seconds")
        require(not self.index or self.near_dedup, "--index needs near_dedup: the index stores MinHash band keys")
        require(all(len(x) == 2 for x in self.languages), f"languages must be ISO 639-1 codes, got {self.languages}")
        for name, cls in (("c4", C4Config), ("gopher_repetition", GopherRepetitionConfig),
                          ("gopher_quality", GopherQualityConfig), ("fineweb", FineWebConfig)):
            if isinstance(getattr(self, name), dict):
                setattr(self, name, cls(**getattr(self, name)))
