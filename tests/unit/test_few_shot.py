"""A decoder's and a T5's few-shot accuracy on a labelled task (training/evaluation/few_shot.py): the prompt fits the
model's positions, the batched scores are each sequence's own, and the prediction is the label word scored highest."""
from __future__ import annotations

import pytest
import torch

from tests.fixtures import make_objective_shards, tweets_csv
from training.evaluation.few_shot import SENTINEL, few_shot, label_log_probs, prompts
from training.models.export import load_tokenizer


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """VADER's tweets as a user's labelled file (3 classes), and a byte-level BPE trained on VADER text."""
    from training.finetuning.dataset import Columns, load_task

    root = tmp_path_factory.mktemp("few-shot")
    tweets_csv(root / "tweets.csv")
    make_objective_shards(root, "causal")
    data = load_task("classification", Columns(text="tweet", label="sentiment"), data=[str(root / "tweets.csv")],
                     split_seed=0)
    return data, load_tokenizer(root / "byte_bpe")


def _llama(vocab: int, positions: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, max_position_embeddings=positions)).eval()


def test_the_prompt_holds_one_demonstration_per_class_and_fits_the_positions(task):
    data, tok = task
    contexts, words, demos = prompts(data, tok, 96, max_test=40)
    by_uid = {e.uid: e.label for e in data.train}
    assert sorted(by_uid[u] for u in demos) == sorted(data.labels)  # one of each class, from train
    assert len(contexts) == 40 and all(len(c) + max(len(w) for w in words) <= 96 for c in contexts)
    label_colon = tok("\nLabel:", add_special_tokens=False)["input_ids"]
    assert all(c[-len(label_colon):] == label_colon for c in contexts)
    assert words == [tok(f" {label}", add_special_tokens=False)["input_ids"] for label in data.labels]
    with pytest.raises(ValueError, match="too few for a few-shot prompt"):
        prompts(data, tok, 24)


def test_batched_scores_are_each_sequences_own(task):
    """Right-padded batches score each continuation as that sequence alone does."""
    data, tok = task
    contexts, words, _ = prompts(data, tok, 96, max_test=5)
    model = _llama(len(tok), 96)
    batched = label_log_probs(model, contexts, words, tok.pad_token_id, batch_size=7)
    for i, ctx in enumerate(contexts):
        for c, w in enumerate(words):
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=torch.tensor([ctx + w])).logits[0], -1)
            alone = sum(float(logp[len(ctx) - 1 + k, t]) for k, t in enumerate(w))
            assert batched[i][c] == pytest.approx(alone, abs=1e-4)


def test_a_model_that_always_says_one_label_scores_that_labels_share(task):
    """A decoder whose every next-token guess is the first token of ' positive' predicts positive for every item:
    its accuracy is positive's share of the test items, beside the majority class on the same items."""
    data, tok = task
    target = tok(" positive", add_special_tokens=False)["input_ids"]
    model = _llama(len(tok), 128)
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        bias = torch.zeros(len(tok))
        bias[target] = 50.0  # every token of the word: a multi-token word scores its whole continuation
        model.lm_head.register_forward_hook(lambda m, i, out: out + bias)
    got = few_shot(model, tok, data, 128, max_test=60)
    gold = [e.label for e in data.test[:60]]
    assert got["applies"] and got["test_examples"] == 60 and got["predicted"]["positive"] == 60
    assert got["accuracy"] == pytest.approx(gold.count("positive") / 60, abs=1e-4)
    majority = max(data.labels, key=[e.label for e in data.train].count)
    assert got["majority_label"] == majority and got["majority"] == pytest.approx(gold.count(majority) / 60, abs=1e-4)
    lo, hi = got["interval"]
    assert lo <= got["accuracy"] <= hi and "Label:" in got["template"]


@pytest.fixture(scope="module")
def t5_task(tmp_path_factory, task):
    """The same tweets, and the unigram tokenizer (with T5's sentinels) the t5_span shards are built with."""
    root = tmp_path_factory.mktemp("few-shot-t5")
    make_objective_shards(root, "t5_span")
    return task[0], load_tokenizer(root / "unigram")


def _t5(vocab: int):
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(vocab_size=vocab, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                               num_heads=2, decoder_start_token_id=0, pad_token_id=0)).eval()


def test_t5_reads_the_prompt_closed_by_its_sentinel_and_scores_each_label_word_as_the_spans_target(t5_task):
    data, tok = t5_task
    sentinel = tok.convert_tokens_to_ids(SENTINEL)
    assert sentinel != tok.unk_token_id
    closing = [sentinel, tok.eos_token_id]
    contexts, words, _ = prompts(data, tok, 200, max_test=4, closing=closing)
    assert all(c[-2:] == closing and len(c) + max(len(w) for w in words) <= 200 for c in contexts)
    model = _t5(len(tok))
    batched = label_log_probs(model, contexts, words, tok.pad_token_id, batch_size=5, prefix=[sentinel])
    for i, ctx in enumerate(contexts):
        for c, w in enumerate(words):
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ctx]), labels=torch.tensor([[sentinel] + w])).logits[0]
            logp = torch.log_softmax(logits, -1)
            alone = sum(float(logp[1 + k, t]) for k, t in enumerate(w))
            assert batched[i][c] == pytest.approx(alone, abs=1e-4)


def test_a_t5_that_always_fills_one_label_scores_that_labels_share(t5_task, task):
    data, tok = t5_task
    target = tok(" negative", add_special_tokens=False)["input_ids"]
    model = _t5(len(tok))
    with torch.no_grad():
        model.lm_head.weight.zero_()
        bias = torch.zeros(len(tok))
        bias[target] = 50.0
        model.lm_head.register_forward_hook(lambda m, i, out: out + bias)
    got = few_shot(model, tok, data, 512, max_test=60)
    gold = [e.label for e in data.test[:60]]
    assert got["applies"] and got["predicted"]["negative"] == 60
    assert got["accuracy"] == pytest.approx(gold.count("negative") / 60, abs=1e-4)
    assert got["closing"] == f"{SENTINEL}{tok.eos_token}"
    # a tokenizer without sentinels (the decoder's byte-level BPE) cannot prompt it: said, not scored
    refused = few_shot(model, task[1], data, 512, max_test=60)
    assert not refused["applies"] and SENTINEL in refused["why"]
