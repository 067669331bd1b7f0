"""The masking core: rates, 80/10/10 splits and span lengths hold statistically over 2,000 packed
rows of real prose; specials and padding are never selected; masks are a pure function of
(seed, shard, row, k); T5 span corruption round-trips. Pure numpy, a few seconds."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.shards.mask_config import OBJECTIVES, MaskConfig, MaskVocab
from pipelines.shards.mask_words import row_words, span_lengths_pmf, span_plan
from pipelines.shards.masking import apply_mlm, apply_t5, mask_variants, t5_lengths, t5_noise_counts
from pipelines.tokenizer import special_ids

# Public-domain openings (Austen, Dickens, Melville, Twain), cut into WordPiece-like pieces below.
PROSE = """It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.
However little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered the rightful property of some one or other of their daughters.
It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness, it was the epoch of belief, it was the epoch of incredulity.
Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of the world.
It is a way I have of driving off the spleen and regulating the circulation.
You don't know about me without you have read a book by the name of The Adventures of Tom Sawyer; but that ain't no matter.
That book was made by Mr. Mark Twain, and he told the truth, mainly. There was things which he stretched, but mainly he told the truth.""".split("\n")
SENTENCES = [s.replace(",", " ,").replace(".", " .").replace(";", " ;").split() for s in PROSE]


def pieces(word: str) -> list[str]:
    """A word of up to 5 characters is one piece; longer ones split every 4 ("watery" -> "wate", "##ry")."""
    return [word] if len(word) <= 5 else [word[:4]] + ["##" + word[i:i + 4] for i in range(4, len(word), 4)]


PIECES = sorted({p for s in SENTENCES for w in s for p in pieces(w)})
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
UNUSED = [f"[unused{i}]" for i in range(8)]  # specials at the END of the vocabulary, like T5's sentinels
BERT_VOCAB = {t: i for i, t in enumerate(BERT_SPECIALS + PIECES + UNUSED)}
T5_VOCAB = {t: i for i, t in enumerate(["<pad>", "</s>", "<unk>"] + PIECES
                                       + [f"<extra_id_{i}>" for i in reversed(range(100))])}
PAD, CLS, SEP, MASK = 0, 2, 3, 4
BERT = MaskVocab(len(BERT_VOCAB), tuple(range(5)) + tuple(BERT_VOCAB[t] for t in UNUSED), MASK)
T5 = MaskVocab.from_special_ids(special_ids(T5_VOCAB), len(T5_VOCAB))
SEQ_LEN, K = 128, 10


def pack_rows(n: int, vocab: dict[str, int], t5: bool, seed: int = 0) -> list[tuple[np.ndarray, int, np.ndarray]]:
    """(ids, length, word_starts) of n rows packed from documents of 1-4 sentences: [CLS] doc [SEP] ... for BERT,
    doc </s> ... for T5; every 4th row is a shard's last, cut short and padded."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n):
        limit = SEQ_LEN if r % 4 else int(rng.integers(10, SEQ_LEN))
        ids: list[int] = []
        starts: list[bool] = []
        while len(ids) < limit:
            doc = [p for i in rng.integers(0, len(SENTENCES), rng.integers(1, 5)) for w in SENTENCES[i] for p in pieces(w)]
            toks = doc + ["</s>"] if t5 else ["[CLS]"] + doc + ["[SEP]"]
            ids += [vocab[t] for t in toks]
            starts += [not t.startswith("##") for t in toks]
        pad = SEQ_LEN - limit
        rows.append((np.array(ids[:limit] + [PAD] * pad, np.int32), limit, np.array(starts[:limit] + [True] * pad)))
    return rows


BERT_ROWS = pack_rows(2000, BERT_VOCAB, t5=False)  # mlm: all; whole_word and span: the first WORD_ROWS
T5_ROWS = pack_rows(600, T5_VOCAB, t5=True)
WORD_ROWS = 600


def budget_of(ids: np.ndarray, length: int, vocab: MaskVocab) -> tuple[int, int]:
    n = int((~vocab.is_special[ids[:length]]).sum())
    return n, max(1, round(0.15 * n)) if n else 0


def within(count: int, total: int, p: float, sigmas: float = 4.0) -> bool:
    """count / total is within `sigmas` binomial standard deviations of p."""
    return abs(count / total - p) <= sigmas * math.sqrt(p * (1 - p) / total)


@pytest.fixture(scope="module")
def masked():
    """objective -> [(row, positions, tokens)] over the rows of its family; computed once."""
    out = {}
    for obj, rows in (("mlm", BERT_ROWS), ("whole_word", BERT_ROWS[:WORD_ROWS]), ("span", BERT_ROWS[:WORD_ROWS])):
        cfg = MaskConfig(objective=obj)
        out[obj] = [(r, *mask_variants(r[0], r[1], BERT, cfg, 0, i, r[2])) for i, r in enumerate(rows)]
    cfg = MaskConfig(objective="t5_span")
    out["t5_span"] = [(r, *mask_variants(r[0], r[1], T5, cfg, 0, i)) for i, r in enumerate(T5_ROWS)]
    return out


# ---- config and vocabulary ------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [dict(objective="bart"), dict(rate=0.41), dict(rate=0.0), dict(span_p=0.0),
                                 dict(span_p=1.0), dict(span_max=0), dict(mean_span=0.5), dict(num_variants=0),
                                 dict(mask_fraction=0.9, random_fraction=0.2),
                                 dict(count="poisson")])
def test_mask_config_validates(bad):
    with pytest.raises(ValueError):
        MaskConfig(**bad)


def test_variants_and_causal():
    assert MaskConfig(objective="causal").variants() == 0 and MaskConfig(num_variants=7).variants() == 7
    ids, n, ws = BERT_ROWS[1]
    assert mask_variants(ids, n, BERT, MaskConfig(objective="causal"), 0, 1, ws) == ([], [])


def test_vocab_from_tokenizer_special_ids():
    bert = MaskVocab.from_special_ids(special_ids({**BERT_VOCAB}), len(BERT_VOCAB))
    assert bert.mask_id == MASK and bert.special_ids == (0, 1, 2, 3, 4) and bert.sentinel_ids == ()
    # T5: no mask token; sentinels last and reversed, <extra_id_0> the highest id; all of them special.
    top = len(T5_VOCAB) - 1
    assert T5.mask_id is None and T5.eos_id == 1 and T5.pad_id == 0
    assert T5.sentinel_ids[:2] == (top, top - 1) and len(T5.sentinel_ids) == 100
    assert T5.is_special[[0, 1, 2, top, top - 99]].all() and not T5.is_special[3:top - 99].any()
    assert T5.replaceable.tolist() == list(range(3, top - 99))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        MaskVocab(10, (0, 12), 1)


def test_objective_needs_its_tokens():
    ids, n, ws = T5_ROWS[1]
    with pytest.raises(ValueError, match="needs a mask token"):
        mask_variants(ids, n, T5, MaskConfig(objective="mlm"), 0, 1)
    with pytest.raises(ValueError, match="sentinel"):
        mask_variants(ids, n, BERT, MaskConfig(objective="t5_span"), 0, 1)
    for obj in ("whole_word", "span"):
        with pytest.raises(ValueError, match="needs word_starts"):
            mask_variants(*BERT_ROWS[1][:2], BERT, MaskConfig(objective=obj), 0, 1)
    with pytest.raises(ValueError, match="shard 3 row 9"):
        mask_variants(np.array([2, 5, len(BERT_VOCAB)]), 3, BERT, MaskConfig(), 3, 9)


# ---- every objective ------------------------------------------------------------------------------

@pytest.mark.parametrize("obj", [o for o in OBJECTIVES if o != "causal"])
def test_specials_and_padding_never_selected(masked, obj):
    vocab = T5 if obj == "t5_span" else BERT
    for (ids, length, _), positions, tokens in masked[obj]:
        assert len(positions) == len(tokens) == K
        for p, t in zip(positions, tokens):
            assert p.dtype == np.int16 and t.dtype == np.int32 and p.shape == t.shape
            assert (np.diff(p) > 0).all() and (p < length).all() and (p >= 0).all()
            assert not vocab.is_special[ids[p]].any()


@pytest.mark.parametrize("obj", [o for o in OBJECTIVES if o != "causal"])
def test_masks_are_a_pure_function_of_seed_shard_row_k(obj):
    vocab, rows = (T5, T5_ROWS) if obj == "t5_span" else (BERT, BERT_ROWS)
    cfg = MaskConfig(objective=obj)
    for row, (ids, n, ws) in enumerate(rows[:40]):
        pos, tok = mask_variants(ids, n, vocab, cfg, 2, row, ws)
        again = mask_variants(ids.copy(), n, vocab, MaskConfig(objective=obj), 2, row, ws.copy())
        assert [a.tobytes() for a in pos + tok] == [b.tobytes() for b in again[0] + again[1]]
        if n < SEQ_LEN:
            continue  # a short row may repeat a variant by chance (T5's last noise span always ends the row)
        assert len({p.tobytes() for p in pos}) == K  # variants differ across k
        other_seed = mask_variants(ids, n, vocab, MaskConfig(objective=obj, seed=1), 2, row, ws)[0]
        other_shard = mask_variants(ids, n, vocab, cfg, 3, row, ws)[0]
        assert not np.array_equal(other_seed[0], pos[0]) and not np.array_equal(other_shard[0], pos[0])


def test_row_without_maskable_tokens():
    ids = np.array([CLS, SEP, CLS, SEP, PAD], np.int32)
    for obj in ("mlm", "whole_word", "span"):
        pos, tok = mask_variants(ids, 4, BERT, MaskConfig(objective=obj), 0, 0, np.ones(5, bool))
        assert len(pos) == K and all(p.size == 0 and p.dtype == np.int16 and t.dtype == np.int32
                                     for p, t in zip(pos, tok))
    pos, tok = mask_variants(np.array([1, 1, 0]), 2, T5, MaskConfig(objective="t5_span"), 0, 0)
    assert all(p.size == 0 for p in pos)


# ---- mlm -----------------------------------------------------------------------------------------

def classify(masked_rows, vocab: MaskVocab) -> tuple[int, int, int, np.ndarray]:
    """(selected, [MASK], unchanged, the random replacements) over all variants."""
    selected = n_mask = n_same = 0
    randoms = []
    for (ids, _, _), positions, tokens in masked_rows:
        for p, t in zip(positions, tokens):
            selected += p.size
            n_mask += int((t == vocab.mask_id).sum())
            n_same += int((t == ids[p]).sum())
            randoms.append(t[(t != vocab.mask_id) & (t != ids[p])])
    return selected, n_mask, n_same, np.concatenate(randoms)


def test_mlm_rate_split_and_random_ids(masked):
    for (ids, length, _), positions, _ in masked["mlm"]:
        assert all(p.size == budget_of(ids, length, BERT)[1] for p in positions)
    selected, n_mask, n_same, randoms = classify(masked["mlm"], BERT)
    assert selected > 300_000
    # A random id equals the original 1 time in m (m = the non-special ids), and then looks unchanged.
    m = BERT.replaceable.size
    assert within(n_mask, selected, 0.8)
    assert within(n_same, selected, 0.1 + 0.1 / m)
    assert within(randoms.size, selected, 0.1 * (1 - 1 / m))
    # Drawn from the complement of the specials, all of it: the [unusedN] at the top are never drawn.
    assert not BERT.is_special[randoms].any()
    assert set(np.unique(randoms).tolist()) == set(BERT.replaceable.tolist())


def test_apply_mlm():
    ids = np.array([CLS, 10, 11, 12, SEP, PAD])
    inputs, labels = apply_mlm(ids, np.array([1, 3], np.int16), np.array([MASK, 40], np.int32))
    assert inputs.tolist() == [CLS, MASK, 11, 40, SEP, PAD] and inputs.dtype == np.int64
    assert labels.tolist() == [-100, 10, -100, 12, -100, -100]
    with pytest.raises(ValueError, match="apply_t5"):
        apply_mlm(ids, np.array([1], np.int16), np.array([-1], np.int32))


# ---- whole_word ----------------------------------------------------------------------------------

def test_whole_word_takes_whole_words_up_to_the_budget(masked):
    counts = budgets = mixed_words = 0
    for (ids, length, ws), positions, tokens in masked["whole_word"]:
        words = row_words(ws[:length].copy(), BERT.is_special[ids[:length]])
        _, budget = budget_of(ids, length, BERT)
        for p, t in zip(positions, tokens):
            assert p.size <= budget
            counts, budgets = counts + p.size, budgets + budget
            selected = np.zeros(length, bool)
            selected[p] = True
            per_word = np.add.reduceat(selected, words.start)
            assert ((per_word == 0) | (per_word == words.size)).all()  # never splits a word
            is_mask = np.zeros(length, bool)
            is_mask[p[t == MASK]] = True
            masks = np.add.reduceat(is_mask, words.start)
            mixed_words += int(((masks > 0) & (masks < words.size)).sum())
    assert counts >= 0.99 * budgets  # the skip-or-take walk nearly always fills the budget exactly
    # 80/10/10 per token as Google's code: some multi-piece words are part [MASK], part not.
    assert mixed_words > 100
    selected, n_mask, n_same, randoms = classify(masked["whole_word"], BERT)
    assert within(n_mask, selected, 0.8) and within(n_same, selected, 0.1 + 0.1 / BERT.replaceable.size)
    assert not BERT.is_special[randoms].any()


def test_row_words_make_each_special_a_word():
    # "[CLS] wate ##ry [SEP] ##ry": a special is a word even if word_starts says otherwise, and so is what follows it.
    ids = np.array([CLS, 20, 21, SEP, 21])
    words = row_words(np.array([False, True, False, False, False]), BERT.is_special[ids])
    assert words.start.tolist() == [0, 1, 3, 4] and words.size.tolist() == [1, 2, 1, 1]
    assert words.ok.tolist() == [False, True, False, True] and words.of_token.tolist() == [0, 1, 1, 2, 3]
    assert words.runs == [(1, 2), (3, 4)]


# ---- span ----------------------------------------------------------------------------------------

def test_span_lengths_follow_the_truncated_geometric(masked):
    cfg = MaskConfig(objective="span")
    pmf = [0.2 * 0.8 ** (n - 1) for n in range(1, 11)]
    exact_mean = sum(n * w for n, w in zip(range(1, 11), pmf)) / sum(pmf)  # 3.797 words
    exact_sd = math.sqrt(sum(n * n * w for n, w in zip(range(1, 11), pmf)) / sum(pmf) - exact_mean ** 2)
    assert np.allclose(span_lengths_pmf(0.2, 10), np.array(pmf) / sum(pmf))
    drawn, cut = [], 0
    all_mask_spans = spans_total = 0
    for row, ((ids, length, ws), positions, tokens) in enumerate(masked["span"]):
        words = row_words(ws[:length].copy(), BERT.is_special[ids[:length]])
        _, budget = budget_of(ids, length, BERT)
        for k, (p, t) in enumerate(zip(positions, tokens)):
            plan = span_plan(np.random.default_rng([0, 0, row, k]), words, budget, cfg)
            drawn += [d for _, d, _ in plan]
            # Only the last span may be cut short, by the budget.
            cut += sum(taken != d for _, d, taken in plan[:-1])
            # The stored positions are the plan's spans, whole words, kept apart (so one run = one span),
            # reaching the budget and overshooting by less than one word.
            run_start = np.flatnonzero(np.concatenate([[True], np.diff(p) != 1])) if p.size else np.zeros(0, int)
            run_words = np.add.reduceat(words.start[words.of_token[p]] == p, run_start) if p.size else run_start
            assert sorted(run_words.tolist()) == sorted(taken for _, _, taken in plan)
            selected = np.zeros(length, bool)
            selected[p] = True
            per_word = np.add.reduceat(selected, words.start)
            assert ((per_word == 0) | (per_word == words.size)).all()
            assert budget <= p.size < budget + int(words.size.max())
            # 80/10/10 per span: a span is all [MASK] or has none.
            if p.size:
                masks = np.add.reduceat(t == MASK, run_start)
                assert ((masks == 0) | (masks == np.diff(np.append(run_start, p.size)))).all()
                all_mask_spans += int((masks > 0).sum())
            spans_total += run_start.size
    assert cut == 0
    assert abs(np.mean(drawn) - exact_mean) < 4 * exact_sd / math.sqrt(len(drawn))
    assert max(drawn) == 10 and min(drawn) == 1
    assert within(sum(d == 1 for d in drawn), len(drawn), pmf[0] / sum(pmf))
    assert within(all_mask_spans, spans_total, 0.8)


# ---- t5_span --------------------------------------------------------------------------------------

def test_t5_noise_density_spans_and_sentinels(masked):
    cfg = MaskConfig(objective="t5_span")
    noise_total = maskable_total = spans_total = ones = 0
    ones_expected = 0.0
    lengths = []
    for (ids, length, _), positions, tokens in masked["t5_span"]:
        maskable = np.flatnonzero(~T5.is_special[ids[:length]])
        noise, spans = t5_noise_counts(maskable.size, cfg)
        for p, t in zip(positions, tokens):
            assert p.size == noise == min(max(round(0.15 * maskable.size), 1), maskable.size - 1)
            noise_total, maskable_total = noise_total + noise, maskable_total + maskable.size
            # Laid end to end (specials out), the noise forms exactly round(noise / 3) spans, as T5 ...
            rank = np.searchsorted(maskable, p)
            compact_runs = np.split(rank, np.flatnonzero(np.diff(rank) != 1) + 1)
            assert len(compact_runs) == spans == max(1, round(noise / 3))
            lengths += [r.size for r in compact_runs]
            ones += sum(r.size == 1 for r in compact_runs)
            ones_expected += spans * (spans - 1) / (noise - 1) if noise > 1 else spans
            # ... and in the row a span never covers a special: cut there, each piece gets its own sentinel.
            first = t >= 0
            starts = np.concatenate([[True], np.diff(p) != 1])
            assert (first == starts).all() and (t[~first] == -1).all()
            assert t[first].tolist() == list(T5.sentinel_ids[:int(first.sum())])
            spans_total += spans
    assert abs(noise_total / maskable_total - 0.15) < 0.005
    # Mean span length noise / round(noise / 3): 3 up to the rounding of the span count.
    assert abs(noise_total / spans_total - 3.0) < 0.2
    # T5's random segmentation of N noise tokens into S spans: a span has 1 token with probability
    # (S - 1) / (N - 1) (the gap after it is one of the S - 1 splits among N - 1 gaps).
    assert min(lengths) == 1 and max(lengths) >= 8
    assert abs(ones - ones_expected) < 4 * math.sqrt(ones_expected)


def test_apply_t5_round_trips_within_bounds(masked):
    enc_max, tgt_max = t5_lengths(SEQ_LEN, MaskConfig(objective="t5_span"))
    sentinel_of = {s: i for i, s in enumerate(T5.sentinel_ids)}
    for (ids, length, _), positions, tokens in masked["t5_span"]:
        for p, t in zip(positions, tokens):
            enc, tgt = apply_t5(ids, length, p, t, T5)
            assert enc.dtype == tgt.dtype == np.int64 and enc.size <= enc_max and tgt.size <= tgt_max
            assert tgt[-1] == T5.eos_id and enc.size == length - p.size + int((t >= 0).sum())
            # Sentinels in order in both; substituting each one's target span back rebuilds the row.
            in_enc = [sentinel_of[x] for x in enc.tolist() if x in sentinel_of]
            in_tgt = [sentinel_of[x] for x in tgt.tolist() if x in sentinel_of]
            assert in_enc == in_tgt == list(range(len(in_enc)))
            bounds = [i for i, x in enumerate(tgt.tolist()) if x in sentinel_of] + [tgt.size - 1]
            span = {tgt[a]: tgt[a + 1:b].tolist() for a, b in zip(bounds, bounds[1:])}
            rebuilt = [y for x in enc.tolist() for y in (span[x] if x in sentinel_of else [x])]
            assert rebuilt == ids[:length].tolist()


def test_t5_lengths_bound_holds_when_specials_cut_spans():
    cfg = MaskConfig(objective="t5_span")
    enc_max, tgt_max = t5_lengths(SEQ_LEN, cfg)
    assert enc_max == SEQ_LEN
    # A full row of 128 maskable tokens: noise round(19.2) = 19, spans round(19 / 3) = 6, target 19 + 6 + 1.
    word = T5_VOCAB[PIECES[0]]
    full = np.full(SEQ_LEN, word, np.int32)
    pos, tok = mask_variants(full, SEQ_LEN, T5, cfg, 0, 0)
    assert all(apply_t5(full, SEQ_LEN, p, t, T5)[1].size == 26 for p, t in zip(pos, tok))
    # Every other token </s>: the most cuts; still within the bound.
    alternating = full.copy()
    alternating[1::2] = T5.eos_id
    for row in range(50):
        for p, t in zip(*mask_variants(alternating, SEQ_LEN, T5, cfg, 0, row)):
            enc, tgt = apply_t5(alternating, SEQ_LEN, p, t, T5)
            assert enc.size <= enc_max and tgt.size <= tgt_max and (t >= 0).sum() == p.size  # each span cut to 1


def test_t5_more_spans_than_sentinels_is_an_error():
    few = MaskVocab(len(T5_VOCAB), T5.special_ids, None, T5.sentinel_ids[:3], 0, 1)
    full = np.full(SEQ_LEN, T5_VOCAB[PIECES[0]], np.int32)
    with pytest.raises(ValueError, match=r"shard 0 row 5: t5_span needs 6 sentinels .* has 3"):
        mask_variants(full, SEQ_LEN, few, MaskConfig(objective="t5_span"), 0, 5)


def test_mlm_block_equals_row_by_row_and_selects_every_position_alike(masked):
    """The shards stage masks a whole group with mlm_block (hashed keys, blocks of MLM_BLOCK_ROWS);
    each row must come out as mask_variants gives it alone, and the hashed keys must not favour
    any position (a key's low bits hold the position: a bias there would show up here)."""
    from pipelines.shards.masking import MLM_BLOCK_ROWS, mlm_block

    ids = np.stack([r[0] for r in BERT_ROWS])
    lengths = np.array([r[1] for r in BERT_ROWS])
    assert len(BERT_ROWS) > MLM_BLOCK_ROWS  # the block boundary is crossed
    pos, tok, counts = mlm_block(ids, lengths, BERT, MaskConfig(), 0, np.arange(len(BERT_ROWS)))
    assert counts.shape == (len(BERT_ROWS) * K,) and counts.sum() == pos.size == tok.size
    cuts = np.cumsum(counts)[:-1]
    flat = [(p, t) for row in masked["mlm"] for p, t in zip(row[1], row[2])]
    assert all(np.array_equal(p, bp) and np.array_equal(t, bt)
               for (p, t), bp, bt in zip(flat, np.split(pos, cuts), np.split(tok, cuts)))
    # per position: chosen / maskable ~ 0.15 everywhere (full rows have n = 126 maskable... or fewer
    # when a document boundary falls inside; the rate is budget / n per row, ~0.15 each)
    chosen, maskable = np.zeros(SEQ_LEN), np.zeros(SEQ_LEN)
    for (row_ids, length, _), positions, _ in masked["mlm"]:
        ok = ~BERT.is_special[row_ids[:length]]
        maskable[:length] += ok * K
        for p in positions:
            chosen[p] += 1
    live = maskable > 2000
    rate = chosen[live] / maskable[live]
    sd = np.sqrt(0.15 * 0.85 / maskable[live])
    assert np.all(np.abs(rate - 0.15) < 5 * sd + 0.005), np.flatnonzero(np.abs(rate - 0.15) >= 5 * sd + 0.005)


def test_mlm_block_rejects_ids_outside_the_vocabulary():
    from pipelines.shards.masking import mlm_block

    ids = np.stack([BERT_ROWS[0][0], BERT_ROWS[1][0]])
    ids[1, 5] = BERT.vocab_size
    with pytest.raises(ValueError, match="row 8: token ids"):
        mlm_block(ids, np.array([SEQ_LEN, SEQ_LEN]), BERT, MaskConfig(), 0, np.array([7, 8]))


def test_mlm_bernoulli_count_draws_each_token_at_the_rate():
    """count="bernoulli": per variant, each maskable token selected with probability 0.15 (a binomial count, as
    DataCollatorForLanguageModeling), never a special or padding; the block path equals row by row; the 80/10/10
    holds; a pure function of (seed, shard, row, k)."""
    from pipelines.shards.masking import mlm_block

    cfg = MaskConfig(count="bernoulli")
    rows = BERT_ROWS[:600]
    ids, lengths = np.stack([r[0] for r in rows]), np.array([r[1] for r in rows])
    pos, tok, counts = mlm_block(ids, lengths, BERT, cfg, 0, np.arange(len(rows)))
    assert counts.shape == (len(rows) * K,) and counts.sum() == pos.size == tok.size
    n = np.repeat([budget_of(i, n, BERT)[0] for i, n, _ in rows], K)
    # the counts are Binomial(n, 0.15): their mean, and a spread a fixed count (variance 0) would not have
    assert within(int(counts.sum()), int(n.sum()), 0.15)
    full = n == n.max()
    var = counts[full].var()
    assert 0.7 < var / (n.max() * 0.15 * 0.85) < 1.3, var
    cuts = np.cumsum(counts)[:-1]
    per_row = [mask_variants(i, length, BERT, cfg, 0, r, ws) for r, (i, length, ws) in enumerate(rows)]
    flat = [(p, t) for p_k, t_k in per_row for p, t in zip(p_k, t_k)]
    blocks = list(zip(np.split(pos, cuts), np.split(tok, cuts)))
    assert all(np.array_equal(p, bp) and np.array_equal(t, bt) for (p, t), (bp, bt) in zip(flat, blocks))
    for (row_ids, length, _), (p_k, _) in zip(rows, per_row):
        for p in p_k:
            assert (np.diff(p) > 0).all() and (p < length).all() and not BERT.is_special[row_ids[p]].any()
    selected, n_mask, _, randoms = classify([(r, *v) for r, v in zip(rows, per_row)], BERT)
    assert within(n_mask, selected, 0.8) and not BERT.is_special[randoms].any()
    again = mlm_block(ids.copy(), lengths, BERT, MaskConfig(count="bernoulli"), 0, np.arange(len(rows)))
    assert all(np.array_equal(a, b) for a, b in zip(again, (pos, tok, counts)))
    other = mlm_block(ids, lengths, BERT, MaskConfig(count="bernoulli", seed=1), 0, np.arange(len(rows)))
    assert not np.array_equal(other[2], counts)
