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

It stands beside the majority class on the same test items, each with Wilson's 95% interval over them; a decoder
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


def prompts(data, tok, max_positions: int, shots_per_class: int = SHOTS_PER_CLASS, seed: int = 0,
            max_test: int = MAX_TEST) -> tuple[list[list[int]], list[list[int]], list[str]]:
    """(context ids per test item, continuation ids per class, the demonstrations' uids). The demonstrations are
    the first `shots_per_class` train items of each class after a seeded shuffle, then shuffled together."""
    rng = random.Random(seed)
    train = list(data.train)
    rng.shuffle(train)
    demos = [ex for label in data.labels for ex in [e for e in train if e.label == label][:shots_per_class]]
    rng.shuffle(demos)
    words = [_ids(tok, f" {label}") for label in data.labels]
    parts = [_ids(tok, TEXT_PREFIX), _ids(tok, LABEL_PREFIX), _ids(tok, SEPARATOR)]
    frame = len(parts[0]) + len(parts[1])
    per_demo = frame + max(len(w) for w in words) + len(parts[2])
    # every text's share of the positions: what the frames and the longest label leave, over demonstrations + 1
    share = (max_positions - len(demos) * per_demo - frame - max(len(w) for w in words)) // (len(demos) + 1)
    if share < 4:
        raise ValueError(f"a {max_positions}-position model leaves {share} tokens per text for {len(demos)} "
                         "demonstrations and the item; too few for a few-shot prompt")
    head = []
    for ex in demos:
        head += parts[0] + _ids(tok, ex.text)[:share] + parts[1] + _ids(tok, f" {ex.label}") + parts[2]
    contexts = [head + parts[0] + _ids(tok, ex.text)[:share] + parts[1] for ex in data.test[:max_test]]
    return contexts, words, [ex.uid for ex in demos]


def label_log_probs(model, contexts: list[list[int]], words: list[list[int]], pad_id: int,
                    batch_size: int = 16) -> list[list[float]]:
    """Summed log-probability of each continuation after each context: [item][class]."""
    import torch

    seqs = [(i, c, ctx + w) for i, ctx in enumerate(contexts) for c, w in enumerate(words)]
    out = [[0.0] * len(words) for _ in contexts]
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        for b in range(0, len(seqs), batch_size):
            chunk = seqs[b:b + batch_size]
            width = max(len(s) for _, _, s in chunk)
            ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            att = torch.zeros_like(ids)
            for j, (_, _, s) in enumerate(chunk):  # right-padded: positions count from each sequence's start
                ids[j, :len(s)] = torch.tensor(s)
                att[j, :len(s)] = 1
            logp = torch.log_softmax(model(input_ids=ids.to(device), attention_mask=att.to(device)).logits.float(), -1)
            for j, (i, c, s) in enumerate(chunk):
                n, start = len(words[c]), len(s) - len(words[c])
                targets = torch.tensor(s[start:], device=logp.device)
                out[i][c] = float(logp[j, start - 1:start - 1 + n].gather(-1, targets[:, None]).sum())
    return out


def few_shot(model, tok, data, max_positions: int, shots_per_class: int = SHOTS_PER_CLASS, seed: int = 0,
             max_test: int = MAX_TEST) -> dict[str, Any]:
    """The decoder's few-shot accuracy on `data`'s test split beside the majority class (the train split's most
    frequent label), both with Wilson's interval; or why it does not apply."""
    if data.task != "classification":
        return {"applies": False, "why": f"few-shot scoring takes a classification task; this one is {data.task}"}
    contexts, words, demos = prompts(data, tok, max_positions, shots_per_class, seed, max_test)
    scores = label_log_probs(model, contexts, words, tok.pad_token_id if tok.pad_token_id is not None else 0)
    gold = [ex.label for ex in data.test[:len(contexts)]]
    pred = [data.labels[max(range(len(s)), key=s.__getitem__)] for s in scores]
    n = len(gold)
    majority = max(data.labels, key=[ex.label for ex in data.train].count)
    acc = sum(p == g for p, g in zip(pred, gold)) / n
    maj = sum(g == majority for g in gold) / n
    return {"applies": True, "accuracy": round(acc, 4), "interval": [round(x, 4) for x in proportion_interval(acc, n)],
            "majority": round(maj, 4), "majority_interval": [round(x, 4) for x in proportion_interval(maj, n)],
            "majority_label": majority, "test_examples": n, "shots": len(demos), "shots_per_class": shots_per_class,
            "demonstrations": demos, "template": TEMPLATE, "label_words": [f" {label}" for label in data.labels],
            "predicted": {label: pred.count(label) for label in data.labels}}
