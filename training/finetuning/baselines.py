"""The controls a user could get without a pretrained model: majority class and TF-IDF + logistic regression.

- `majority`: classification predicts the train split's most frequent class; regression its
  mean; tokens the most frequent train tag of each word (the usual "most frequent tag"
  baseline of tagging), and the most frequent tag overall for words train never saw.
- `tfidf_lr`: TF-IDF of word 1-2 grams and character 2-5 grams (within word boundaries),
  sublinear tf, then logistic regression (regression: ridge regression). A text pair gets each
  text's features side by side. Tokens: a logistic regression on each word's features (the
  word, its prefixes and suffixes up to 3 characters, its shape, the words either side), the
  feature-based tagger that preceded neural ones. The regularisation strength is chosen on the
  validation split from a small grid, as the neural rows choose their checkpoint there; the
  test split is scored once.
This is the TF-IDF baseline of Russian SuperGLUE (Shavrina et al. 2020), with the char n-grams
that make it strong on short texts. scikit-learn does the work; nothing here is hand-written
beyond the feature dictionaries.
"""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

from training.finetuning.metrics import lower_is_better, score

GRID = (0.1, 1.0, 10.0)
"""C for logistic regression (alpha = 1/C for ridge)."""


def majority(data) -> tuple[dict[str, Any], dict[str, Any]]:
    """Predictions for validation and test, and what was predicted."""
    if data.task == "classification":
        top = Counter(e.label for e in data.train).most_common(1)[0][0]
        k = data.label2id[top]
        return {s: [k] * len(data.split(s)) for s in ("validation", "test")}, {"predicts": top}
    if data.task == "regression":
        mean = sum(e.label for e in data.train) / len(data.train)
        return {s: [mean] * len(data.split(s)) for s in ("validation", "test")}, {"predicts": mean}
    per_word: dict[str, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for e in data.train:
        for w, t in zip(e.tokens, e.tags):
            per_word[w][t] += 1
            overall[t] += 1
    default = overall.most_common(1)[0][0]
    best = {w: c.most_common(1)[0][0] for w, c in per_word.items()}
    preds = {s: [[best.get(w, default) for w in e.tokens] for e in data.split(s)] for s in ("validation", "test")}
    return preds, {"unknown_words_get": default, "known_words": len(best)}


def _text_features(data):
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer

    def vectorizers():
        return [TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True, min_df=1),
                TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2)]

    columns = [lambda e: e.text] + ([lambda e: e.text_pair] if data.train[0].text_pair is not None else [])
    fitted = [(col, vec) for col in columns for vec in vectorizers()]
    train = hstack([vec.fit_transform([col(e) for e in data.train]) for col, vec in fitted]).tocsr()
    other = {s: hstack([vec.transform([col(e) for e in data.split(s)]) for col, vec in fitted]).tocsr()
             for s in ("validation", "test")}
    return train, other


def _word_features(tokens, i: int) -> dict[str, Any]:
    w = tokens[i]
    lw = w.lower()
    shape = "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in w[:6])
    f = {"w=" + lw: 1, "p1=" + lw[:1]: 1, "p2=" + lw[:2]: 1, "p3=" + lw[:3]: 1, "s1=" + lw[-1:]: 1,
         "s2=" + lw[-2:]: 1, "s3=" + lw[-3:]: 1, "shape=" + shape: 1, "title": int(w.istitle()),
         "upper": int(w.isupper()), "digit": int(any(c.isdigit() for c in w)), "hyphen": int("-" in w)}
    for d in (-2, -1, 1, 2):
        j = i + d
        f[f"w{d:+d}=" + (tokens[j].lower() if 0 <= j < len(tokens) else ("<s>" if j < 0 else "</s>"))] = 1
    if i == 0:
        f["first"] = 1
    return f


def tfidf_lr(data, primary: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fit on train for each C of the grid, keep the best on validation; predictions for validation and test."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge

    t0 = time.time()
    if data.task == "tokens":
        vec = DictVectorizer()
        x_train = vec.fit_transform(_word_features(e.tokens, i) for e in data.train for i in range(len(e.tokens)))
        y_train = [t for e in data.train for t in e.tags]
        x_other = {s: vec.transform(_word_features(e.tokens, i) for e in data.split(s) for i in range(len(e.tokens)))
                   for s in ("validation", "test")}
    else:
        x_train, x_other = _text_features(data)
        y_train = [data.label2id[e.label] if data.task == "classification" else e.label for e in data.train]

    def predict(model, split):
        p = model.predict(x_other[split])
        if data.task != "tokens":
            return [int(v) for v in p] if data.task == "classification" else [float(v) for v in p]
        out, k = [], 0
        for e in data.split(split):
            out.append([str(t) for t in p[k:k + len(e.tokens)]])
            k += len(e.tokens)
        return out

    tried = {}
    best = None
    for c in GRID:
        model = (Ridge(alpha=1.0 / c) if data.task == "regression"
                 else LogisticRegression(C=c, max_iter=2000))
        model.fit(x_train, y_train)
        val = score(data, "validation", predict(model, "validation"))[primary]
        tried[str(c)] = val
        better = best is None or (val < best[0] if lower_is_better(primary) else val > best[0])
        if better:
            best = (val, c, model)
    _, c, model = best
    preds = {s: predict(model, s) for s in ("validation", "test")}
    return preds, {"model": "ridge" if data.task == "regression" else "logistic_regression", "C": c,
                   f"validation_{primary}_by_C": tried, "features": int(x_train.shape[1]),
                   "fit_seconds": round(time.time() - t0, 1)}
