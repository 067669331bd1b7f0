"""Probing per layer: what each layer's mean-pooled states say about a sentence (SentEval's raw-text
probing tasks, Conneau et al. 2018, "What you can cram into a single vector").

Sentences come from held-out corpus documents (those the shards stage put in its valid split, so the
model never trained on them), in each language asked for. Three tasks need no annotation:
- SentLen: the sentence's length in words, in SentEval's 6 bins (5-8, 9-12, 13-16, 17-20, 21-25, 26-28);
- WC (word content): which of K mid-frequency words the sentence holds (each probing sentence holds
  exactly one of them; SentEval uses 1,000 words over 100k sentences, a held-out sample affords fewer);
- BShift (bigram shift): whether two adjacent words (not the first pair) were swapped; half are.
Classes are balanced by down-sampling to the rarest (as SentEval's data are balanced); a task whose
rarest class has fewer than `min_per_class` sentences is refused, naming the counts.

For every layer (0 = the embedding output) a logistic-regression probe is trained on 75% of the
sentences (a hash split) and scored on the rest, next to three controls: chance (1 / classes), the
majority class of the test part, and a bag-of-embeddings probe on the mean of the model's input token
embeddings (no positions, no layers), which is what the words alone give.

RuSentEval (Mikhailov et al., BSNLP 2021) extends this to 14 Russian tasks. Besides the surface tasks
(SentLen, WC) and word-order shift, most of its tasks label morphosyntax: the number and gender of the
subject and the object, the person, tense and other grammatical properties of the predicate, tree depth
and the like. Labelling those needs a morphological tagger or a dependency parser over the sentences;
lmforge ships neither (no tagged Russian corpus was found on this machine), so it runs only the three
tasks above, in Russian as in English.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path
from typing import Any

SENTLEN_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"«(A-ZА-ЯЁ])")


class TooSmall(ValueError):
    """Too few held-out sentences for a probing task's classes (the card skips the language and says why)."""


def _h(s: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha1(f"{salt}:{s}".encode()).digest()[:8], "big")


def sentences(texts: list[str], min_words: int = 5, max_words: int = 28) -> list[str]:
    """Sentences of `texts` (split after . ! ? before a capital or a quote), one line each, deduplicated,
    `min_words`..`max_words` words long."""
    out, seen = [], set()
    for t in texts:
        for line in t.splitlines():
            for s in _SPLIT.split(line.strip()):
                s = " ".join(s.split())
                n = len(s.split())
                if min_words <= n <= max_words and s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


def _balance(items: list[tuple[str, int]], min_per_class: int, task: str, names: list[str]) -> list[tuple[str, int]]:
    counts = Counter(y for _, y in items)
    if len(counts) < len(names) or min(counts.values()) < min_per_class:
        have = ", ".join(f"{names[c]}: {counts.get(c, 0)}" for c in range(len(names)))
        raise TooSmall(f"probing data too small for {task}: each class needs >= {min_per_class} held-out sentences "
                         f"({have}); give more held-out text or lower --probe-min-per-class")
    n = min(counts.values())
    kept, taken = [], Counter()
    for x, y in sorted(items, key=lambda it: _h(it[0], task)):
        if taken[y] < n:
            kept.append((x, y))
            taken[y] += 1
    return kept


def sentlen_task(sents: list[str], min_per_class: int) -> tuple[list[tuple[str, int]], list[str]]:
    names = [f"{a}-{b}" for a, b in SENTLEN_BINS]
    items = [(s, i) for s in sents for i, (a, b) in enumerate(SENTLEN_BINS) if a <= len(s.split()) <= b]
    return _balance(items, min_per_class, "SentLen", names), names


def wc_task(sents: list[str], words: int, min_per_class: int) -> tuple[list[tuple[str, int]], list[str]]:
    """K words from the middle of the held-out frequency ranking (not function words, not hapaxes) that
    enough sentences hold exactly one of."""
    tok = [[w.lower().strip(".,;:!?\"'«»()") for w in s.split()] for s in sents]
    freq = Counter(w for ws in tok for w in set(ws) if len(w) > 3 and w.isalpha())
    ranked = [w for w, c in freq.most_common() if c >= min_per_class]
    middle = ranked[len(ranked) // 10:]  # skip the most frequent tenth (function-like words)
    chosen: list[str] = []
    for w in middle:
        if len(chosen) == words:
            break
        chosen.append(w)
    if len(chosen) < 2:
        raise TooSmall(f"probing data too small for WC: fewer than 2 words occur in >= {min_per_class} held-out "
                         "sentences; give more held-out text")
    index = {w: i for i, w in enumerate(chosen)}
    items = []
    for s, ws in zip(sents, tok):
        hits = {index[w] for w in ws if w in index}
        if len(hits) == 1:
            items.append((s, hits.pop()))
    counts = Counter(y for _, y in items)
    keep = [i for i in range(len(chosen)) if counts[i] >= min_per_class]  # words too rare once exclusive go
    if len(keep) < 2:
        raise TooSmall(f"probing data too small for WC: fewer than 2 words with >= {min_per_class} sentences "
                         "holding only them")
    remap = {old: new for new, old in enumerate(keep)}
    items = [(s, remap[y]) for s, y in items if y in remap]
    names = [chosen[i] for i in keep]
    return _balance(items, min_per_class, "WC", names), names


def bshift_task(sents: list[str], min_per_class: int) -> tuple[list[tuple[str, int]], list[str]]:
    items = []
    for s in sents:
        ws = s.split()
        if _h(s, "bshift") % 2 and len(ws) >= 4:
            i = 1 + _h(s, "where") % (len(ws) - 2)  # swap words i and i+1, never the first pair
            ws[i], ws[i + 1] = ws[i + 1], ws[i]
            items.append((" ".join(ws), 1))
        else:
            items.append((s, 0))
    return _balance(items, min_per_class, "BShift", ["original", "inverted"]), ["original", "inverted"]


def features(model, tok, texts: list[str], max_length: int, batch_size: int = 32):
    """Mean-pooled states of every layer (layers x sentences x width) and the bag-of-embeddings control."""
    import numpy as np
    import torch

    encoder = model.get_encoder() if hasattr(model, "get_encoder") and model.config.is_encoder_decoder else model
    emb = model.get_input_embeddings()
    layers, boe = None, []
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            enc = tok(texts[i:i + batch_size], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            m = enc["attention_mask"].unsqueeze(-1).float()
            hs = encoder(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                         output_hidden_states=True).hidden_states
            pooled = [((h.float() * m).sum(1) / m.sum(1)).numpy() for h in hs]
            layers = [p for p in pooled] if layers is None else [np.concatenate([a, p]) for a, p in zip(layers, pooled)]
            boe.append(((emb(enc["input_ids"]).float() * m).sum(1) / m.sum(1)).numpy())
    return layers, np.concatenate(boe)


def _probe(x_train, y_train, x_test, y_test) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    clf.fit(x_train, y_train)
    return float((clf.predict(x_test) == y_test).mean())


def run_task(model, tok, items: list[tuple[str, int]], names: list[str], max_length: int) -> dict[str, Any]:
    import numpy as np

    texts = [x for x, _ in items]
    y = np.array([c for _, c in items])
    test = np.array([_h(t, "probe-split") % 4 == 0 for t in texts])
    if test.sum() < len(names) or (~test).sum() < 2 * len(names):
        raise TooSmall(f"probing data too small: {len(items)} sentences for {len(names)} classes")
    layers, boe = features(model, tok, texts, max_length)
    majority = Counter(y[test]).most_common(1)[0][1] / test.sum()
    return {"classes": names, "train": int((~test).sum()), "test": int(test.sum()),
            "layers": [round(_probe(f[~test], y[~test], f[test], y[test]), 4) for f in layers],
            "chance": round(1 / len(names), 4), "majority": round(float(majority), 4),
            "bag_of_embeddings": round(_probe(boe[~test], y[~test], boe[test], y[test]), 4)}


def held_out_texts(corpus: str | Path, lang: str, valid_per_mille: int, limit: int = 400) -> list[str]:
    """Texts of the corpus documents in `lang` that the shards stage held out (its valid split)."""
    import pyarrow.parquet as pq

    from pipelines.shards.rows import split_of

    files = sorted(Path(corpus, "data", lang).glob("*.parquet"))
    if not files:
        raise ValueError(f"{corpus}/data/{lang}: no {lang} documents to probe with")
    out = []
    for f in files:
        for r in pq.read_table(f, columns=["id", "text"]).to_pylist():
            if split_of(r["id"], valid_per_mille) == "valid":
                out.append(r["text"])
                if len(out) >= limit:
                    return out
    return out


MIN_PROBE_DOCUMENTS = 20
"""Kept documents a language needs before the card probes in it by default: with 5% held out (the shards'
valid split), 20 documents give one or two held-out pages, about the fewest that can fill SentLen's classes."""


def probe_languages(corpus: str | Path, asked: list[str], min_documents: int = MIN_PROBE_DOCUMENTS
                    ) -> tuple[list[str], dict[str, str]]:
    """(languages to probe in, {language: why not} for the others): the ones asked for, else every language the
    corpus kept at least `min_documents` documents of, most documents first. A language the corpus has no documents
    of is skipped with the reason, not an error: the card stands without it."""
    from schemas.manifest import read_manifest

    kept = {str(k): int(v) for k, v in (read_manifest(corpus)["counts"].get("kept_by_language") or {}).items()}
    have = {d.name for d in Path(corpus, "data").iterdir() if d.is_dir()} if Path(corpus, "data").is_dir() else set()
    counts = {lang: kept.get(lang, 0) for lang in have | set(kept)}
    held = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"
    chosen, skipped = [], {}
    for lang in asked or sorted(counts, key=lambda k: (-counts[k], k)):
        if lang not in have:
            skipped[lang] = f"no {lang} documents in the corpus (it kept: {held})"
        elif not asked and counts[lang] < min_documents:
            skipped[lang] = f"{counts[lang]} {lang} documents kept, fewer than {min_documents}"
        else:
            chosen.append(lang)
    return chosen, skipped


def probe_model(model_dir: str, corpus: str, languages: list[str], valid_per_mille: int, wc_words: int = 20,
                min_per_class: int = 10, max_length: int = 64, model=None, tokenizer=None,
                skipped: dict[str, str] | None = None) -> dict[str, Any]:
    """{language: {"sentences": n, task: figures}} for each language the held-out documents can fill every task's
    classes in; a language they cannot is left out and its reason put into `skipped`."""
    from transformers import AutoTokenizer

    from training.models.model_formats import load_model
    from training.models.model_kinds import max_tokens

    model = model if model is not None else load_model(model_dir)[0]
    tok = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(model_dir)
    max_length = min(max_length, max_tokens(model.config) or max_length)
    out: dict[str, Any] = {}
    for lang in languages:
        sents = sentences(held_out_texts(corpus, lang, valid_per_mille, limit=100000))
        try:
            tasks = {"SentLen": sentlen_task(sents, min_per_class), "WC": wc_task(sents, wc_words, min_per_class),
                     "BShift": bshift_task(sents, min_per_class)}
            out[lang] = {"sentences": len(sents), **{name: run_task(model, tok, items, names, max_length)
                                                     for name, (items, names) in tasks.items()}}
        except ValueError as e:  # too few held-out sentences in this language for a task's classes or its split
            if skipped is None or not isinstance(e, TooSmall):
                raise
            skipped[lang] = f"{len(sents)} held-out sentences: {e}"
    return out
