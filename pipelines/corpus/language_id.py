"""py3langid's classifier with its feature walk in numpy: the same scores, bit for bit, in a third of
the time (the walk was the corpus stage's largest single cost, measured on bench corpus's
end-to-end input).

py3langid finds its byte n-gram features by walking an Aho-Corasick automaton over the page's UTF-8
bytes, one Python step per byte (`visit_counts`). In such an automaton the state after byte i is the
longest suffix of the bytes read that is a node of the trie, so it depends on the last DEPTH bytes
only (DEPTH = the trie's depth, 6 for py3langid 0.4's model, found by a breadth-first walk at load).
Here every position's state is computed at once: DEPTH vector steps, each reading one byte of every
position's window. The features are then counted in their order of first appearance, as py3langid's
Counter holds them, so its sparse score sums the same terms in the same order.
`tests/unit/test_language_id.py` checks the counts and the scores against py3langid's own walk on
real pages of both languages; a py3langid whose internals differ is used as it is. The unpacked model
and its depth are kept in lmforge's cache, so a worker starts in 0.1 s, not 0.7 s.
"""
from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from common.cache import cache_dir, remembered
from schemas.manifest import sha256_file


def trie_depth(nextmove: np.ndarray, rowbase: np.ndarray) -> int:
    """The deepest state's distance from the start state (its trie depth): a breadth-first walk, one
    vector step per level."""
    seen = np.zeros(len(rowbase), bool)
    seen[0] = True
    frontier, depth = np.array([0]), 0
    while True:
        reached = np.zeros(len(rowbase), bool)
        reached[nextmove[(rowbase[frontier][:, None] + np.arange(256)).ravel()]] = True
        nxt = np.flatnonzero(reached & ~seen)
        if not len(nxt):
            return depth
        seen[nxt] = True
        frontier, depth = nxt, depth + 1


def _model(path: Path) -> tuple[tuple, str]:
    """py3langid's model as its modelio.load_model returns it, and the packed file's sha256. The
    unpacked npz is kept in the lmforge cache (common/cache.py): unpacking the xz costs 0.3 s of
    every corpus worker's start, reading the npz 0.04 s."""
    from py3langid import modelio

    digest = sha256_file(path)
    cached = cache_dir("py3langid") / f"model-{digest[:16]}.npz"
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        with lzma.open(path) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
        os.replace(tmp, cached)  # two workers unpacking at once each leave a whole file
    with np.load(cached, allow_pickle=False) as d:
        return (d["ptc"], d["pc"], d["classes"].tolist(), modelio._to_array(d["nextmove"]),
                modelio._to_array(d["nextmove_row"]), d["out_feat"].tolist()), digest


def load() -> Any:
    """py3langid's identifier (normalised probabilities), its walk replaced where its internals are
    the ones this module was checked against."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    class Identifier(LanguageIdentifier):
        def _prepare(self, digest: str) -> bool:
            try:
                self._nm = np.frombuffer(self.tk_nextmove, dtype=np.dtype(self.tk_nextmove.typecode))  # a view: no copy
                self._rb = np.asarray(self._rowbase, dtype=np.int64)
                self._out = np.asarray(self.tk_output, dtype=np.int64)
                self._depth = remembered("py3langid_depth", digest, lambda: trie_depth(self._nm, self._rb))
                # float32 rows: numpy multiplies float32 by the model's float16 outside BLAS, and
                # casting the gathered rows per page cost more than the walk (+57 MB per process)
                self._ptc32 = np.asarray(self.nb_ptc, dtype=np.float32)
            except (AttributeError, TypeError, ValueError):
                return False
            return True

        def set_languages(self, langs=None):  # noqa: ANN001 - py3langid's signature
            super().set_languages(langs)
            if hasattr(self, "_ptc32"):
                self._ptc32 = np.asarray(self.nb_ptc, dtype=np.float32)

        def feature_counts(self, data: bytes) -> tuple[np.ndarray, np.ndarray]:
            """(feature indexes in order of first appearance, their counts) of encoded text."""
            b = np.frombuffer(data, np.uint8)
            n = len(b)
            s = np.zeros(n, np.int64)
            for k in range(min(self._depth, n) - 1, -1, -1):  # position i reads b[i - k]; i < k reads nothing yet
                s[k:] = self._nm[self._rb[s[k:]] + b[:n - k]]
            f = self._out[s]
            f = f[f >= 0]
            uniq, first, counts = np.unique(f, return_index=True, return_counts=True)
            order = np.argsort(first, kind="stable")
            return uniq[order], counts[order]

        def _raw_score(self, text: bytes) -> np.ndarray:
            idx, counts = self.feature_counts(text)
            if not len(idx):
                return super()._raw_score(text)  # no feature: py3langid's own fill
            return np.log1p(counts.astype(np.float32)) @ self._ptc32[idx] + self.nb_pc

    path = MODEL_FILE if Path(MODEL_FILE).is_absolute() else Path(MODEL_DIR) / MODEL_FILE
    try:
        (ptc, pc, classes, nextmove, row, output), digest = _model(Path(path))
        ident = Identifier(np.asarray(ptc), np.asarray(pc), classes, nextmove, output, norm_probs=True, tk_row=row)
        if ident._prepare(digest):
            return ident
    except (AttributeError, KeyError, TypeError, ValueError):  # another py3langid layout: its own loader
        pass
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
