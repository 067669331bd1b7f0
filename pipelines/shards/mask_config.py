"""The shards stage's masking options (`MaskConfig`), the tokenizer ids masking needs (`MaskVocab`), and the check
that a tokenizer can serve an objective; the masking itself is in pipelines/shards/masking.py."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.config import opt, require
from schemas.objectives import OBJECTIVES, help_text, objective, tokenizer_problem

MASK_COUNTS = ("fixed", "bernoulli")
MAX_SEQ_LEN = int(np.iinfo(np.int16).max) + 1  # positions are int16: rows up to 32,768 tokens


@dataclass
class MaskConfig:
    objective: str = opt("mlm", help_text())
    num_variants: int = opt(10, "K mask variants per row; the loader uses variant epoch % K (BERT's dupe factor is 10)")
    rate: float = opt(0.15, "mlm/whole_word/span: fraction of maskable tokens selected per variant; "
                            "t5_span: noise density")
    count: str = opt("fixed", "mlm: how many positions a variant masks. fixed: exactly max(1, round(rate x the row's "
                              "maskable tokens)) (Google's BERT), so a compiled run's masked-positions head is sized to "
                              "the mean; bernoulli: each maskable token with probability rate (HF's "
                              "DataCollatorForLanguageModeling), a binomial count whose largest row sizes that head "
                              "(the bench corpus at seq 128: 41 a row against fixed's 19); its loss against fixed: "
                              "docs/BENCHMARKS.md, bench learn")
    mask_fraction: float = opt(0.8, "of the selected, the fraction replaced by [MASK]")
    random_fraction: float = opt(0.1, "of the selected, the fraction replaced by a random token (the rest stay)")
    span_p: float = opt(0.2, "span: p of the geometric span length in words (SpanBERT 0.2: mean 3.8 words)")
    span_max: int = opt(10, "span: longest span in words (SpanBERT: 10)")
    mean_span: float = opt(3.0, "t5_span: mean noise span length in tokens (T5: 3)")
    seed: int = opt(0, "masks are a pure function of (seed, shard, row, k)")

    def __post_init__(self) -> None:
        require(self.objective in OBJECTIVES, f"objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        require(self.num_variants >= 1, "num_variants must be >= 1")
        require(0.0 < self.rate <= 0.4, f"rate must be in (0, 0.4], got {self.rate}")
        require(self.count in MASK_COUNTS, f"count {self.count!r} is not one of {', '.join(MASK_COUNTS)}")
        require(0.0 <= self.mask_fraction and 0.0 <= self.random_fraction and self.mask_fraction + self.random_fraction <= 1.0,
                "mask_fraction + random_fraction must be within [0, 1]")
        require(0.0 < self.span_p < 1.0, f"span_p must be in (0, 1), got {self.span_p}")
        require(self.span_max >= 1, f"span_max must be >= 1, got {self.span_max}")
        require(self.mean_span >= 1.0, f"mean_span must be >= 1 token, got {self.mean_span}")

    def variants(self) -> int:
        """How many variants the stage stores per row: none for causal."""
        return self.num_variants if objective(self.objective).stores_variants else 0


@dataclass(frozen=True)
class MaskVocab:
    """What masking needs to know of a tokenizer. special_ids ∪ {pad, mask, eos} ∪ sentinels are never
    masked and never drawn as a random replacement."""

    vocab_size: int
    special_ids: tuple[int, ...]
    mask_id: int | None
    """None for T5 tokenizers; required by mlm, whole_word and span."""
    sentinel_ids: tuple[int, ...] = ()
    """T5's <extra_id_i> ids in order of i; span i of a row gets sentinel_ids[i]; required by t5_span."""
    pad_id: int = 0
    eos_id: int | None = None
    """Appended to T5 targets by apply_t5 when set."""
    is_special: np.ndarray = field(init=False, repr=False, compare=False)
    replaceable: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "special_ids", tuple(int(i) for i in self.special_ids))
        object.__setattr__(self, "sentinel_ids", tuple(int(i) for i in self.sentinel_ids))
        never = set(self.special_ids) | set(self.sentinel_ids) | {
            i for i in (self.mask_id, self.pad_id, self.eos_id) if i is not None}
        require(self.vocab_size > 0, f"vocab_size must be > 0, got {self.vocab_size}")
        bad = sorted(i for i in never if not 0 <= i < self.vocab_size)
        require(not bad, f"special ids {bad} are outside the vocabulary [0, {self.vocab_size})")
        require(len(never) < self.vocab_size, "every id is special: no random replacement left to draw")
        # A lookup table beats np.isin on 128 ids (one gather); 250k ids cost 250 KB.
        is_special = np.zeros(self.vocab_size, bool)
        is_special[list(never)] = True
        object.__setattr__(self, "is_special", is_special)
        object.__setattr__(self, "replaceable", np.flatnonzero(~is_special).astype(np.int32))

    @classmethod
    def from_special_ids(cls, ids: Mapping[str, Any], vocab_size: int) -> MaskVocab:
        """From what pipelines.tokenizer.special_ids(tok) returns.

        vocab_size = tok.get_vocab_size() (added tokens, such as T5's sentinels, included)."""
        roles = {ids.get(r) for r in ("pad", "unk", "mask", "cls", "sep", "bos", "eos")} - {None}
        sentinels = tuple(ids.get("sentinels") or ())
        pad = ids.get("pad")
        return cls(vocab_size, tuple(sorted(roles | set(sentinels))), ids.get("mask"), sentinels,
                   0 if pad is None else pad, ids.get("eos"))


def check_objective(cfg: MaskConfig, vocab: MaskVocab) -> None:
    """Fail before the first row if the tokenizer cannot serve the objective (schemas.objectives' one check)."""
    problem = tokenizer_problem(cfg.objective, vocab.mask_id is not None, bool(vocab.sentinel_ids))
    if problem:
        raise ValueError(problem)
