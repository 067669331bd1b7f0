"""Few-shot accuracy of a decoder on a labelled classification task, as the published data ablations judge decoders
(GPT-3, Brown et al. 2020; FineWeb and DCLM through lm-evaluation-harness's multiple-choice scoring).

The prompt and the label words, written down here and on the card:

    Text: <demonstration 1>
    Label: <its label>

    ... (SHOTS_PER_CLASS demonstrations of each class, from the train split, in a seeded order)

    Text: <the test item>
    Label:

Each class's name is a candidate continuation (" positive", with the leading space a word has inside text); the
prediction is the class whose continuation has the highest summed log-probability given the prompt. Context and
continuation are tokenized apart and joined, as the harness does. Every text is cut to an equal share of the
model's positions (in tokens, so the prompt always fits: no item is dropped), the same cut for every class.

An encoder-decoder (T5) is prompted as its span-corruption pretraining taught it: the same prompt, then its first
sentinel and eos, is the encoder's input (`Label: <extra_id_0></s>`), and each label word is scored as the decoder's
target after that sentinel (`<extra_id_0> positive`), as T5 fills a dropped span.

It stands beside the majority class on the same test items, each with Wilson's 95% interval over them; a model
that learnt nothing usable scores about the majority or below it (it picks one label word for every item).
"""
from __future__ import annotations

import random
from typing import Any

from common.stats import proportion_interval

SHOTS_PER_CLASS = 1
"""Demonstrations of each class in the prompt (3 for VADER's 3 classes)."""
TEXT_PREFIX, LABEL_PREFIX, SEPARATOR = "Text: ", "\nLabel:", "\n\n"
TEMPLATE = f"{TEXT_PREFIX}{{text}}{LABEL_PREFIX} {{label}}{SEPARATOR}"
"""One demonstration; the query is the same up to and including `Label:`."""
MAX_TEST = 500
"""Test items scored at most (the first ones, in the split's order): each costs one forward pass per class."""


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


SENTINEL = "<extra_id_0>"
"""The span an encoder-decoder fills: the label word's place in its prompt."""


def prompts(data, tok, max_positions: int, shots_per_class: int = SHOTS_PER_CLASS, seed: int = 0,
            max_test: int = MAX_TEST, closing: list[int] = ()) -> tuple[list[list[int]], list[list[int]], list[str]]:
    """(context ids per test item, continuation ids per class, the demonstrations' uids). The demonstrations are
    the first `shots_per_class` train items of each class after a seeded shuffle, then shuffled together. `closing`
    ends every context (an encoder-decoder's sentinel and eos) and counts against the positions."""
    rng = random.Random(seed)
    train = list(data.train)
    rng.shuffle(train)
    demos = [ex for label in data.labels for ex in [e for e in train if e.label == label][:shots_per_class]]
    rng.shuffle(demos)
    words = [_ids(tok, f" {label}") for label in data.labels]
    parts = [_ids(tok, TEXT_PREFIX), _ids(tok, LABEL_PREFIX), _ids(tok, SEPARATOR)]
    frame = len(parts[0]) + len(parts[1]) + len(closing)
    per_demo = frame + max(len(w) for w in words) + len(parts[2])
    # every text's share of the positions: what the frames and the longest label leave, over demonstrations + 1
    share = (max_positions - len(demos) * per_demo - frame - max(len(w) for w in words)) // (len(demos) + 1)
    if share < 4:
        raise ValueError(f"a {max_positions}-position model leaves {share} tokens per text for {len(demos)} "
                         "demonstrations and the item; too few for a few-shot prompt")
    head = []
    for ex in demos:
        head += parts[0] + _ids(tok, ex.text)[:share] + parts[1] + _ids(tok, f" {ex.label}") + parts[2]
    contexts = [head + parts[0] + _ids(tok, ex.text)[:share] + parts[1] + list(closing) for ex in data.test[:max_test]]
    return contexts, words, [ex.uid for ex in demos]


def _right_padded(seqs: list[list[int]], fill: int):
    """(ids, attention mask): the sequences right-padded with `fill` to the longest, so positions count from each
    sequence's start."""
    import torch

    ids = torch.full((len(seqs), max(len(s) for s in seqs)), fill, dtype=torch.long)
    att = torch.zeros_like(ids)
    for j, s in enumerate(seqs):
        ids[j, :len(s)] = torch.tensor(s)
        att[j, :len(s)] = 1
    return ids, att


def label_log_probs(model, contexts: list[list[int]], words: list[list[int]], pad_id: int, batch_size: int = 16,
                    prefix: list[int] | None = None) -> list[list[float]]:
    """Summed log-probability of each label word after each context: [item][class]. `prefix` None: a decoder, the
    word continues the context; a list: an encoder-decoder, the context is the encoder's input and the word the
    decoder's target after `prefix` (the sentinel)."""
    import torch

    pairs = [(i, c) for i in range(len(contexts)) for c in range(len(words))]
    out = [[0.0] * len(words) for _ in contexts]
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        for b in range(0, len(pairs), batch_size):
            chunk = pairs[b:b + batch_size]
            if prefix is None:
                ids, att = _right_padded([contexts[i] + words[c] for i, c in chunk], pad_id)
                logits = model(input_ids=ids.to(device), attention_mask=att.to(device)).logits
                starts = [len(contexts[i]) - 1 for i, _ in chunk]  # position t predicts token t + 1
            else:
                ids, att = _right_padded([contexts[i] for i, _ in chunk], pad_id)
                labels, _ = _right_padded([prefix + words[c] for _, c in chunk], -100)  # -100: no target
                logits = model(input_ids=ids.to(device), attention_mask=att.to(device), labels=labels.to(device)).logits
                starts = [len(prefix)] * len(chunk)
            logp = torch.log_softmax(logits.float(), -1)
            for j, ((i, c), start) in enumerate(zip(chunk, starts)):
                targets = torch.tensor(words[c], device=logp.device)
                out[i][c] = float(logp[j, start:start + len(words[c])].gather(-1, targets[:, None]).sum())
    return out


def few_shot(model, tok, data, max_positions: int, shots_per_class: int = SHOTS_PER_CLASS, seed: int = 0,
             max_test: int = MAX_TEST) -> dict[str, Any]:
    """The decoder's few-shot accuracy on `data`'s test split beside the majority class (the train split's most
    frequent label), both with Wilson's interval; or why it does not apply."""
    if data.task != "classification":
        return {"applies": False, "why": f"few-shot scoring takes a classification task; this one is {data.task}"}
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    if getattr(model.config, "is_encoder_decoder", False):
        sentinel = tok.convert_tokens_to_ids(SENTINEL)
        if sentinel is None or sentinel == tok.unk_token_id or tok.eos_token_id is None:
            return {"applies": False, "why": f"the encoder-decoder's tokenizer has no {SENTINEL} sentinel or no eos "
                                             "to prompt it with"}
        contexts, words, demos = prompts(data, tok, max_positions, shots_per_class, seed, max_test,
                                         closing=[sentinel, tok.eos_token_id])
        scores = label_log_probs(model, contexts, words, pad, prefix=[sentinel])
        closing = f"{SENTINEL}{tok.eos_token}"
    else:
        contexts, words, demos = prompts(data, tok, max_positions, shots_per_class, seed, max_test)
        scores = label_log_probs(model, contexts, words, pad)
        closing = ""
    gold = [ex.label for ex in data.test[:len(contexts)]]
    pred = [data.labels[max(range(len(s)), key=s.__getitem__)] for s in scores]
    n = len(gold)
    majority = max(data.labels, key=[ex.label for ex in data.train].count)
    acc = sum(p == g for p, g in zip(pred, gold)) / n
    maj = sum(g == majority for g in gold) / n
    return {"applies": True, "accuracy": round(acc, 4), "interval": [round(x, 4) for x in proportion_interval(acc, n)],
            "majority": round(maj, 4), "majority_interval": [round(x, 4) for x in proportion_interval(maj, n)],
            "majority_label": majority, "test_examples": n, "shots": len(demos), "shots_per_class": shots_per_class,
            "demonstrations": demos, "template": TEMPLATE, "closing": closing, "label_words": [f" {label}" for label in data.labels],
            "predicted": {label: pred.count(label) for label in data.labels}}
