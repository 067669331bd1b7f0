"""Pure masking, precomputed: K variants per packed row for five objectives, stored as (positions, tokens).

Each variant k of a row is a pair of arrays: `positions` (int16, strictly ascending, < length) and
`tokens` (int32, one per position). Every draw is a pure function of (seed, shard, row, k): mlm
hashes counters (splitmix64 over (seed, shard, row, k, position), `counter_bits`), so a whole
group of rows is masked in a few numpy calls (`mlm_block`); the other objectives draw from
np.random.default_rng([seed, shard, row, k]). The same input gives byte-identical shards on any
machine, and the loader picks
variant epoch % K (BERT's dupe factor). Ids in the vocabulary's special set (pad, unk, cls, sep,
bos, eos, mask and the T5 sentinels) and padding (positions >= length) are never selected;
random replacements are drawn uniformly from the complement of that set (T5 puts its sentinels
at the END of the vocabulary, so the specials are not a prefix).

n = the row's maskable tokens, budget = max(1, round(rate * n)); costs are for seq_len 128 with
n = 126 (128 minus [CLS] and [SEP]), rate 0.15 and 10 variants, next to 128 * 4 = 512 bytes of ids:

- mlm (BERT): `budget` positions drawn uniformly without replacement (the `budget` smallest
  hashed keys among the maskable positions); per position 80% [MASK],
  10% a random id, 10% unchanged. round(0.15 * 126) = 19 positions * (2 + 4) bytes * 10 = 1,140 bytes.
  With count="bernoulli" (MaskConfig.count) a variant instead selects each maskable position with probability
  rate (the hashed key's uniform under rate), as HF's DataCollatorForLanguageModeling draws: 19 positions on
  average, a binomial spread around it, none at times.
- whole_word (BERT whole-word masking, Google's create_pretraining_data.py --do_whole_word_mask):
  shuffle the words, walk them and take a word whole if the total stays <= budget, else skip it
  (a later, shorter word may still fit); stop at the budget. The 80/10/10 is decided per token,
  as Google's code does. Google's budget also counts [CLS]/[SEP] and is capped by
  max_predictions_per_seq; here it is the same as mlm's. Never more than the budget: <= 1,140 bytes.
- span (SpanBERT): draw a length L in words from Geometric(span_p) truncated to [1, span_max]
  (mean 3.80 words at p = 0.2, max 10), put it at a word start from which all L words are
  maskable, unselected and not adjacent to an earlier span, and add its words one at a time until
  the budget is reached; the word that reaches it is kept whole, so a row overshoots the budget
  by less than one word and only the last span can be cut short. Spans never overlap, touch or
  cross a special token, so the drawn lengths survive (SpanBERT lets a span run into earlier ones
  and merges them). If no start fits L words, L shrinks; if not even one word fits, the row stops
  short of the budget. 80/10/10 per span, as SpanBERT's default: the whole span becomes [MASK],
  random ids, or stays. About 19-20 positions: ~1.2 KB.
- t5_span (T5 span corruption, t5.data.preprocessors.random_spans_noise_mask): over the row's n
  maskable tokens laid end to end (specials taken out), noise = round(rate * n) clipped to
  [1, n - 1], spans = max(1, round(noise / mean_span)), noise and non-noise counts each split at
  random into `spans` parts and interleaved non-noise first; rows with n < 2 get no noise (T5
  pads such a row to 2 and noises only the missing second token). Back in the row, a span that
  had a special token inside it is cut there, so a row has round(noise / mean_span) + (cuts)
  spans and no span ever covers a special (packed rows have a special only between documents,
  so cuts are rare). Stored: every noise position; tokens = span i's sentinel (sentinel_ids[i])
  at its first position, -1 at the others. round(0.15 * 126) = 19 positions, round(19 / 3) = 6
  sentinels: 19 * 6 * 10 = 1,140 bytes. More spans than sentinels is a ValueError naming both.
  `t5_lengths` bounds the encoder and target lengths: (128, 36) at seq_len 128, (512, 141) at 512.
- causal: no masks, 0 variants, 0 bytes; the loader shifts the labels.

`apply_mlm` and `apply_t5` turn a stored variant into model inputs; `t5_lengths` bounds T5's
encoder and target lengths so a loader can pad to fixed shapes. No library does this over a
precomputed storage: transformers' DataCollatorForLanguageModeling / ForWholeWordMask mask on
the fly in torch, and T5's noise mask lives in TensorFlow (t5, seqio) or in HF's
run_t5_mlm_flax example script. The T5 code below follows that algorithm; its random split
ranks random keys instead of shuffling an indicator (the same distribution, one draw).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipelines.shards.mask_config import MAX_SEQ_LEN, MaskConfig, MaskVocab, check_objective
from pipelines.shards.mask_words import Words, row_words, span_plan, whole_word_positions
from schemas.objectives import objective

# ---- one row, K variants --------------------------------------------------------------------------

class Row(NamedTuple):
    """One row as a masking function sees it: the ids up to its length, which are special, which maskable, the
    budget of positions, and where it is (for errors and the per-variant generators)."""

    input_ids: np.ndarray
    length: int
    ids: np.ndarray
    special: np.ndarray
    maskable: np.ndarray
    budget: int
    shard: int
    row: int
    word_starts: np.ndarray | None
    where: str

    def rngs(self, cfg: MaskConfig) -> list[np.random.Generator]:
        return [np.random.default_rng([cfg.seed, self.shard, self.row, k]) for k in range(cfg.num_variants)]

    def words(self, cfg: MaskConfig) -> Words:
        if self.word_starts is None or len(self.word_starts) < self.length:
            raise ValueError(f"{self.where}: objective {cfg.objective} needs word_starts for the row's "
                             f"{self.length} tokens")
        return row_words(np.asarray(self.word_starts, bool)[:self.length], self.special)


Variants = tuple[list[np.ndarray], list[np.ndarray]]


def mask_variants(input_ids: np.ndarray, length: int, vocab: MaskVocab, cfg: MaskConfig, shard: int, row: int,
                  word_starts: np.ndarray | None = None) -> Variants:
    """K (positions int16, tokens int32) pairs for one row ([], [] for an objective that stores none).

    word_starts: bool per token of input_ids, True where a token begins a word (from tokenizers'
    Encoding.word_ids); required by objectives that mask words (schemas.objectives `needs_word_starts`).
    Special tokens count as their own word.
    """
    if not objective(cfg.objective).stores_variants:
        return [], []
    check_objective(cfg, vocab)
    where = f"shard {shard} row {row}"
    if len(input_ids) > MAX_SEQ_LEN:
        raise ValueError(f"{where}: {len(input_ids)} tokens; int16 positions hold rows of at most {MAX_SEQ_LEN}")
    ids = np.asarray(input_ids)[:length]
    if ids.size and (ids.min() < 0 or ids.max() >= vocab.vocab_size):
        raise ValueError(f"{where}: token ids {ids.min()}..{ids.max()} fall outside the vocabulary [0, {vocab.vocab_size})")
    special = vocab.is_special[ids]
    maskable = np.flatnonzero(~special)
    budget = max(1, round(cfg.rate * maskable.size)) if maskable.size else 0
    r = Row(np.asarray(input_ids), length, ids, special, maskable, budget, shard, row, word_starts, where)
    return MASKERS[cfg.objective](r, vocab, cfg)


def _mask_tokens(r: Row, vocab: MaskVocab, cfg: MaskConfig) -> Variants:
    """mlm: one row through `mlm_block`, the group path (so a row alone and in its group mask alike)."""
    pos, tok, counts = mlm_block(r.input_ids[None, :], np.array([r.length]), vocab, cfg, r.shard, np.array([r.row]))
    cuts = np.cumsum(counts)[:-1]
    return np.split(pos, cuts), np.split(tok, cuts)


def _mask_t5(r: Row, vocab: MaskVocab, cfg: MaskConfig) -> Variants:
    pairs = [_t5_noise(rng, r.maskable, vocab, cfg, r.where) for rng in r.rngs(cfg)]
    return [p for p, _ in pairs], [t for _, t in pairs]


def _mask_whole_words(r: Row, vocab: MaskVocab, cfg: MaskConfig) -> Variants:
    words = r.words(cfg)
    positions, tokens = [], []
    for rng in r.rngs(cfg):
        pos = whole_word_positions(rng, words, r.budget)
        u = rng.random(pos.size)  # 80/10/10 per token
        positions.append(pos.astype(np.int16))
        tokens.append(_replace(r.ids[pos], u, rng.random(pos.size), vocab, cfg))
    return positions, tokens


def _mask_spans(r: Row, vocab: MaskVocab, cfg: MaskConfig) -> Variants:
    words = r.words(cfg)
    positions, tokens = [], []
    for rng in r.rngs(cfg):
        spans = span_plan(rng, words, r.budget, cfg)
        span_of_word = np.full(len(words.start), -1)
        for i, (first, _, taken) in enumerate(spans):
            span_of_word[first:first + taken] = i
        unit = span_of_word[words.of_token]
        pos = np.flatnonzero(unit >= 0)
        u = rng.random(len(spans))[unit[pos]]  # one decision per span
        positions.append(pos.astype(np.int16))
        tokens.append(_replace(r.ids[pos], u, rng.random(pos.size), vocab, cfg))
    return positions, tokens


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_U_STREAM, _V_STREAM = 1 << 16, 2 << 16  # counters of the 80/10/10 draws: past any position (< 2**15)
_POS_BITS = 15  # positions < MAX_SEQ_LEN = 2**15 fill a key's low bits, so keys of a row never tie
MLM_BLOCK_ROWS = 256  # rows hashed at once: K x 256 x seq_len uint64 (2.6 MB at K=10, seq 128: in cache; 1024 was 1.6x slower)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _mix_inplace(z: np.ndarray) -> np.ndarray:
    """`_mix` overwriting `z` (a fresh uint64 array): one scratch array instead of six temporaries."""
    t = np.empty_like(z)
    with np.errstate(over="ignore"):
        for shift, mult in ((30, _MIX1), (27, _MIX2), (31, None)):
            np.right_shift(z, np.uint64(shift), out=t)
            np.bitwise_xor(z, t, out=z)
            if mult is not None:
                np.multiply(z, mult, out=z)
    return z


def variant_states(seed: int, shard: int, rows: np.ndarray, k: int) -> np.ndarray:
    """(len(rows), k) uint64: the hash state of each (seed, shard, row, variant); counter c of a
    variant draws _mix(state + c * golden), splitmix64's stream."""
    with np.errstate(over="ignore"):
        h = _mix(np.array([seed % 2**64], np.uint64) + _GOLDEN)
        h = _mix(h + np.uint64(shard % 2**64) * _GOLDEN)
        h = _mix(h + np.asarray(rows, np.uint64) * _GOLDEN)
        return _mix(h[:, None] + np.arange(1, k + 1, dtype=np.uint64)[None, :] * _GOLDEN)


def counter_bits(states: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """64 hashed bits per (state, counter), broadcasting."""
    with np.errstate(over="ignore"):
        return _mix(states + np.asarray(counters, np.uint64) * _GOLDEN)


def _unit(bits: np.ndarray) -> np.ndarray:
    """Uniform float64 in [0, 1) from the top 53 bits."""
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def mlm_block(input_ids: np.ndarray, lengths: np.ndarray, vocab: MaskVocab, cfg: MaskConfig, shard: int,
              rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BERT mlm for a block of rows at once: (positions int16, tokens int32, counts) flat in (row,
    variant, position) order, counts[i * K + k] the size of row i's variant k.

    Variant k of row r keeps the `budget` maskable positions with the smallest keys, a key being
    the top 49 hashed bits of (seed, shard, r, k, position) with the position in the low 15 bits
    (distinct within a row, so exactly `budget` are taken: uniform without replacement). The
    80/10/10 draws u and v hash counters of their own per selected position. A row's masks do not
    depend on the other rows of the block: `mask_variants` on one row gives the same arrays."""
    ids = np.asarray(input_ids)
    if ids.ndim != 2:
        raise ValueError(f"mlm_block wants a (rows, seq_len) block, got shape {ids.shape}")
    n_rows, seq_len = ids.shape
    lengths = np.asarray(lengths, np.int64)
    rows = np.asarray(rows, np.int64)
    k = cfg.num_variants
    if seq_len > MAX_SEQ_LEN:
        raise ValueError(f"rows of {seq_len} tokens; int16 positions hold rows of at most {MAX_SEQ_LEN}")
    if lengths.shape != (n_rows,) or rows.shape != (n_rows,):
        raise ValueError(f"mlm_block: {n_rows} rows but {lengths.shape} lengths and {rows.shape} row numbers")
    if n_rows == 0:
        return np.zeros(0, np.int16), np.zeros(0, np.int32), np.zeros(0, np.int64)
    if lengths.min() < 0 or lengths.max() > seq_len:
        raise ValueError(f"lengths {lengths.min()}..{lengths.max()} fall outside [0, {seq_len}]")
    real = np.arange(seq_len)[None, :] < lengths[:, None]
    live = ids[real]
    if live.size and (live.min() < 0 or live.max() >= vocab.vocab_size):
        bad = np.flatnonzero(((ids < 0) | (ids >= vocab.vocab_size)).any(axis=1) & real.any(axis=1))
        raise ValueError(f"shard {shard} row {int(rows[bad[0]])}: token ids {live.min()}..{live.max()} fall outside "
                         f"the vocabulary [0, {vocab.vocab_size})")
    maskable = real & ~vocab.is_special[np.clip(ids, 0, vocab.vocab_size - 1)]
    if cfg.count == "bernoulli":
        return _bernoulli_block(ids, maskable, vocab, cfg, shard, rows)
    n = maskable.sum(axis=1)
    budget = np.where(n > 0, np.maximum(1, np.round(cfg.rate * n)), 0).astype(np.int64)
    positions, tokens = [np.zeros(0, np.int16)], [np.zeros(0, np.int32)]
    with np.errstate(over="ignore"):
        steps = np.arange(seq_len, dtype=np.uint64) * _GOLDEN  # counter c adds c * golden
    position = np.arange(seq_len, dtype=np.uint64)
    high = np.uint64(~np.uint64((1 << _POS_BITS) - 1))
    for a in range(0, n_rows, MLM_BLOCK_ROWS):
        b = min(a + MLM_BLOCK_ROWS, n_rows)
        states = variant_states(cfg.seed, shard, rows[a:b], k)  # (R, K)
        with np.errstate(over="ignore"):  # counter_bits(states, positions), in place
            keys = _mix_inplace(states[:, :, None] + steps)
        # high bits hashed, low bits the position; all bits set (the largest key) where not maskable
        low = np.where(maskable[a:b], position, np.iinfo(np.uint64).max)  # (R, L): every variant alike
        np.bitwise_and(keys, high, out=keys)
        np.bitwise_or(keys, low[:, None, :], out=keys)
        bud = budget[a:b]
        # the bud smallest keys of each (row, variant): the first max(bud) keys in key order, the
        # first bud of them used; their low bits are positions, then put in ascending order
        top = int(bud.max())
        if top == 0:
            continue
        picked = np.partition(keys, top - 1, axis=2)[:, :, :top] if top < seq_len else keys
        picked.sort(axis=2)
        used = np.broadcast_to(np.arange(top)[None, None, :] < bud[:, None, None], picked.shape)
        cand = np.where(used, picked & np.uint64((1 << _POS_BITS) - 1), np.uint64(seq_len))
        cand.sort(axis=2)  # a row's used positions first (ascending), then the past-the-end fillers
        pos = cand[used].astype(np.int64)
        r_i = np.broadcast_to(np.arange(b - a)[:, None, None], used.shape)[used]
        k_i = np.broadcast_to(np.arange(k)[None, :, None], used.shape)[used]
        st = states[r_i, k_i]
        u = _unit(counter_bits(st, pos.astype(np.uint64) + np.uint64(_U_STREAM)))
        v = _unit(counter_bits(st, pos.astype(np.uint64) + np.uint64(_V_STREAM)))
        tok = _replace(ids[a + r_i, pos], u, v, vocab, cfg)
        positions.append(pos.astype(np.int16))
        tokens.append(tok)
    return np.concatenate(positions), np.concatenate(tokens), np.repeat(budget, k)


def _bernoulli_block(ids: np.ndarray, maskable: np.ndarray, vocab: MaskVocab, cfg: MaskConfig, shard: int,
                     rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mlm_block with count="bernoulli": each maskable position of variant k is selected when its hashed uniform
    (the same key `fixed` ranks) is under `rate`, as DataCollatorForLanguageModeling's per-token draw; a variant may
    select none. The 80/10/10 draws as `fixed`'s."""
    n_rows, seq_len = ids.shape
    k = cfg.num_variants
    positions, tokens, counts = [np.zeros(0, np.int16)], [np.zeros(0, np.int32)], [np.zeros(0, np.int64)]
    with np.errstate(over="ignore"):
        steps = np.arange(seq_len, dtype=np.uint64) * _GOLDEN
    for a in range(0, n_rows, MLM_BLOCK_ROWS):
        b = min(a + MLM_BLOCK_ROWS, n_rows)
        states = variant_states(cfg.seed, shard, rows[a:b], k)  # (R, K)
        with np.errstate(over="ignore"):
            keys = _mix_inplace(states[:, :, None] + steps)
        selected = (_unit(keys) < cfg.rate) & maskable[a:b, None, :]  # (R, K, L)
        r_i, k_i, pos = np.nonzero(selected)  # row-major: (row, variant, ascending position) order
        st = states[r_i, k_i]
        u = _unit(counter_bits(st, pos.astype(np.uint64) + np.uint64(_U_STREAM)))
        v = _unit(counter_bits(st, pos.astype(np.uint64) + np.uint64(_V_STREAM)))
        positions.append(pos.astype(np.int16))
        tokens.append(_replace(ids[a + r_i, pos], u, v, vocab, cfg))
        counts.append(selected.sum(axis=2).reshape(-1).astype(np.int64))
    return np.concatenate(positions), np.concatenate(tokens), np.concatenate(counts)


def _replace(original: np.ndarray, u: np.ndarray, v: np.ndarray, vocab: MaskVocab, cfg: MaskConfig) -> np.ndarray:
    """The 80/10/10 on the selected tokens `original` (any shape): u < mask_fraction -> [MASK];
    u < mask_fraction + random_fraction -> the non-special id number floor(v * m) (m of them;
    < m for every v < 1); else unchanged."""
    tok = original.astype(np.int32)
    tok[u < cfg.mask_fraction] = vocab.mask_id
    rnd = (u >= cfg.mask_fraction) & (u < cfg.mask_fraction + cfg.random_fraction)
    tok[rnd] = vocab.replaceable[(v[rnd] * vocab.replaceable.size).astype(np.intp)]
    return tok


# ---- T5 span corruption -------------------------------------------------------------------------------

def _segmentation(keys: np.ndarray, segments: int) -> np.ndarray:
    """len(keys) + 1 items in `segments` parts of >= 1: the segments - 1 gaps with the smallest keys split
    them, so every split is equally likely, as T5's _random_segmentation (a shuffled indicator)."""
    items = keys.size + 1
    cuts = np.sort(np.argpartition(keys, segments - 2)[:segments - 1]) + 1 if segments > 1 else np.zeros(0, int)
    return np.diff(np.concatenate([[0], cuts, [items]]))


def t5_noise_counts(n: int, cfg: MaskConfig) -> tuple[int, int]:
    """(noise tokens, spans before cuts) for n maskable tokens, as T5's random_spans_noise_mask."""
    if n < 2:
        return 0, 0
    noise = min(max(round(cfg.rate * n), 1), n - 1)
    return noise, max(1, round(noise / cfg.mean_span))


def _t5_noise(rng: np.random.Generator, maskable: np.ndarray, vocab: MaskVocab, cfg: MaskConfig,
              where: str) -> tuple[np.ndarray, np.ndarray]:
    n = maskable.size
    noise, spans = t5_noise_counts(n, cfg)
    if not noise:
        return maskable[:0].astype(np.int16), np.zeros(0, np.int32)
    # rate <= 0.4 and mean_span >= 1 give spans <= noise <= n - noise, so every part has >= 1 token.
    assert spans <= noise <= n - noise
    keys = rng.random(n - 2)  # noise - 1 gaps for the noise split, n - noise - 1 for the rest
    noise_len = _segmentation(keys[:noise - 1], spans)
    keep_len = _segmentation(keys[noise - 1:], spans)
    is_noise = np.repeat(np.tile([False, True], spans), np.stack([keep_len, noise_len], axis=1).ravel())
    pos = maskable[is_noise]
    # A span starts where the positions jump: after kept tokens, or across a special (a cut).
    first = np.concatenate([[True], np.diff(pos) != 1])
    n_spans = int(first.sum())
    if n_spans > len(vocab.sentinel_ids):
        raise ValueError(f"{where}: t5_span needs {n_spans} sentinels ({spans} spans + {n_spans - spans} cut at "
                         f"special tokens) but the vocabulary has {len(vocab.sentinel_ids)}; lower rate, raise "
                         "mean_span or train the tokenizer with more extra_ids")
    tok = np.full(pos.size, -1, np.int32)
    tok[first] = vocab.sentinel_ids[:n_spans]
    return pos.astype(np.int16), tok


def t5_lengths(seq_len: int, cfg: MaskConfig) -> tuple[int, int]:
    """Upper bounds of (encoder, target) lengths for any row of seq_len tokens, eos included.

    encoder = length - noise + spans <= seq_len, since a span holds >= 1 noise token; rows with
    fewer than 2 maskable tokens keep all seq_len. target = noise + spans + 1 (eos), where spans
    = round(noise / mean_span) + cuts, cuts <= the row's specials (seq_len - n) and spans <= noise;
    the worst n is found by trying every n. A full row at 512, rate 0.15, mean 3: noise 77, 26
    spans, target 77 + 26 + 1 = 104; the bound, 141, allows rows whose specials cut more spans.
    """
    target = 1
    for n in range(2, seq_len + 1):
        noise, spans = t5_noise_counts(n, cfg)
        target = max(target, noise + min(noise, spans + seq_len - n) + 1)
    return seq_len, target


# ---- a stored variant -> model inputs -----------------------------------------------------------------

def apply_mlm(input_ids: np.ndarray, positions: np.ndarray, tokens: np.ndarray,
              ignore_index: int = -100) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, labels) int64 for mlm/whole_word/span: tokens placed at positions; labels = original ids there."""
    if tokens.size and tokens.min() < 0:
        raise ValueError("tokens hold -1: a t5_span variant, which goes through apply_t5")
    inputs = np.array(input_ids, np.int64)
    labels = np.full(inputs.shape, ignore_index, np.int64)
    pos = positions.astype(np.intp)
    labels[pos] = inputs[pos]
    inputs[pos] = tokens
    return inputs, labels


def apply_t5(input_ids: np.ndarray, length: int, positions: np.ndarray, tokens: np.ndarray,
             vocab: MaskVocab) -> tuple[np.ndarray, np.ndarray]:
    """(encoder_ids, target_ids), unpadded int64, as T5's span corruption: each noise span of the input becomes
    its sentinel; the target is sentinel_0 span_0 sentinel_1 span_1 ... then eos if vocab.eos_id is set."""
    ids = np.array(input_ids[:length], np.int64)
    pos = positions.astype(np.intp)
    first = tokens >= 0
    keep = np.ones(length, bool)
    keep[pos[~first]] = False
    target = np.insert(ids[pos], np.flatnonzero(first), tokens[first])  # each sentinel before its span
    ids[pos[first]] = tokens[first]
    if vocab.eos_id is not None:
        target = np.append(target, vocab.eos_id)
    return ids[keep], target.astype(np.int64)


# ---- the masking functions of schemas.objectives' records --------------------------------------------

MASKERS = {"mlm": _mask_tokens, "whole_word": _mask_whole_words, "span": _mask_spans, "t5_span": _mask_t5}
"""One row's K variants, per objective that stores variants (schemas.objectives `stores_variants`)."""
BLOCK_MASKERS = {"mlm": mlm_block}
"""Objectives that mask a whole group of rows at once (pipelines/shards/rows.py takes that path for them)."""
