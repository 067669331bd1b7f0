"""Probing tasks built from real sentences (VADER's movie-review snippets), and a probe run on a tiny model."""
from __future__ import annotations

from collections import Counter

import pytest

from tests.fixtures import vader_texts


def _sents():
    from training.evaluation.probing import sentences

    return sentences(vader_texts("movieReviewSnippets", 3000))


def test_sentences_are_split_deduplicated_and_bounded():
    from training.evaluation.probing import sentences

    got = sentences(["It rained. The match went on anyway, for hours and hours. Ok. It rained.",
                     "Он пришёл домой поздно вечером. Все уже спали крепким сном."])
    assert got == ["The match went on anyway, for hours and hours.", "Он пришёл домой поздно вечером.",
                   "Все уже спали крепким сном."]
    assert all(5 <= len(s.split()) <= 28 for s in _sents())


def test_sentlen_bins_are_senteval_s_and_balanced():
    from training.evaluation.probing import sentlen_task

    items, names = sentlen_task(_sents(), 20)
    assert names == ["5-8", "9-12", "13-16", "17-20", "21-25", "26-28"]
    counts = Counter(y for _, y in items)
    assert len(set(counts.values())) == 1 and len(counts) == 6
    lo, hi = 17, 20
    assert all(lo <= len(s.split()) <= hi for s, y in items if y == 3)


def test_wc_sentences_hold_exactly_one_target_word():
    from training.evaluation.probing import wc_task

    items, names = wc_task(_sents(), 10, 15)
    assert 2 <= len(names) <= 10
    for s, y in items:
        ws = {w.lower().strip(".,;:!?\"'«»()") for w in s.split()}
        assert names[y] in ws and len(ws & set(names)) == 1


def test_bshift_swaps_two_adjacent_words_in_half():
    from training.evaluation.probing import bshift_task

    sents = _sents()
    items, _ = bshift_task(sents, 20)
    originals = set(sents)
    assert all(s in originals for s, y in items if y == 0)
    shifted = [s for s, y in items if y == 1]
    # a swap of two equal words ("very very") leaves the sentence as it was; all others differ
    assert sum(s not in originals for s in shifted) >= 0.9 * len(shifted)
    by_words = {tuple(sorted(o.split())) for o in sents}
    assert all(tuple(sorted(s.split())) in by_words for s in shifted)  # same words, other order
    assert Counter(y for _, y in items)[0] == Counter(y for _, y in items)[1]


def test_too_little_data_names_the_counts():
    from training.evaluation.probing import sentlen_task

    with pytest.raises(ValueError, match=r"probing data too small for SentLen: each class needs >= 10 .*26-28: \d"):
        sentlen_task(_sents()[:40], 10)


def test_probe_per_layer_with_controls_on_a_tiny_model(tmp_path):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from tests.fixtures import make_tokenizer
    from training.evaluation.probing import run_task, sentlen_task
    from training.models.export import load_tokenizer

    tok = load_tokenizer(make_tokenizer(tmp_path / "tok", texts=vader_texts("movieReviewSnippets", 500)))
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=64, max_position_embeddings=64))
    items, names = sentlen_task(_sents(), 20)
    r = run_task(model, tok, items, names, 48)
    assert len(r["layers"]) == 3 and r["chance"] == round(1 / 6, 4)
    assert r["train"] + r["test"] == len(items) and r["test"] >= 6
    # sentence length is visible to a probe on mean-pooled states (padding is masked out, but the
    # [CLS]/[SEP] share of the mean shrinks with length): well above chance even at random init
    assert max(r["layers"]) > 0.3


def test_pseudo_perplexity_word_l2r_masks_the_rest_of_the_word(tmp_path):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from tests.fixtures import make_tokenizer
    from training.evaluation.pppl import pseudo_perplexity, sentence_pll
    from training.models.export import load_tokenizer

    tok = load_tokenizer(make_tokenizer(tmp_path / "tok", vocab_size=120, texts=vader_texts("movieReviewSnippets", 200)))
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=64, max_position_embeddings=64)).eval()
    seen = []
    real_forward = model.forward

    def spy(input_ids=None, attention_mask=None, **kw):
        seen.append(input_ids.clone())
        return real_forward(input_ids=input_ids, attention_mask=attention_mask, **kw)

    model.forward = spy
    sentence = "unbelievably extraordinary performances"  # long words: several pieces each with 120 pieces
    enc = tok(sentence)
    words = enc.word_ids()
    multi = [w for w in set(words) if w is not None and words.count(w) > 1]
    assert multi, "the test needs a word split into pieces"
    ll_o, n_o = sentence_pll(model, tok, sentence, "original", 64)
    ll_w, n_w = sentence_pll(model, tok, sentence, "word_l2r", 64)
    original, l2r = seen
    assert n_o == n_w == sum(w is not None for w in words)
    assert (original == tok.mask_token_id).sum(1).tolist() == [1] * n_o  # one mask per row
    first = words.index(multi[0])
    row = [i for i, w in enumerate(words) if w is not None].index(first)
    assert (l2r[row] == tok.mask_token_id).sum() == words.count(multi[0])  # the whole word from the first piece
    model.forward = real_forward
    r = pseudo_perplexity(model, tok, [sentence, "a fine film"])
    assert r["original"]["pppl"] > 1 and r["word_l2r"]["pppl"] > 1 and r["original"]["tokens"] == r["word_l2r"]["tokens"]
