"""Pure dedup helpers: exact hashes, MinHash signatures (datasketch), LSH band keys.

LSH banding: with b bands of r rows, two documents of Jaccard s share at least one band with
probability 1-(1-s^r)^b. datasketch's optimiser with equal false-positive/false-negative
weights picks b=9, r=13 for 128 permutations at threshold 0.8, which finds only
1-(1-0.8^13)^9 = 40% of pairs at s=0.8. Candidates are verified on their signatures anyway, so
a false positive costs one comparison while a false negative is a duplicate kept: we weight
false negatives 0.95, giving b=16, r=8:
    s=0.7: 1-(1-0.7^8)^16 = 0.613    s=0.8: 1-(1-0.8^8)^16 = 0.947    s=0.9: 0.99998
The probabilities for the chosen (b, r) are recorded in the corpus manifest.

A bucket links each new member to one anchor (its smallest indexed id, else its smallest id),
so a bucket of k documents yields k-1 candidates, never k^2; candidates are then confirmed on the
exact shingle sets (`exact_jaccard`), so a pair joins a cluster only if its true Jaccard reaches
the threshold. Sharing a whole band (8 equal rows) is itself the screen: at s=0.5 two documents
share one of 16 bands with probability 1-(1-0.5^8)^16 = 6%. Buckets carry ids only, no
signatures: at 16 bands a 512-byte signature per band member was 94% of the banding shuffle.
"""
from __future__ import annotations

import functools
import hashlib
import re
import struct
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)

MINHASH_SCHEME = "datasketch-affine32 over top-32-bit xxh64-word-polynomial n-gram hashes"
"""Recorded in the corpus manifest: signatures from another scheme do not compare."""



def exact_key(text: str) -> str:
    """sha1 of the text with case, punctuation and spacing folded: catches copies that differ only in those."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).lower())
    return hashlib.sha1(" ".join(words).encode()).hexdigest()


def shingles(text: str, n: int = 5) -> list[bytes]:
    """Distinct word n-grams of the normalised text (the whole text if it has fewer than n words)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).lower())
    if len(words) < n:
        return [" ".join(words).encode()]
    return list({" ".join(words[i : i + n]).encode() for i in range(len(words) - n + 1)})


def signatures(texts: Sequence[str], num_perm: int, n: int, seed: int = 1) -> np.ndarray:
    """MinHash signatures, shape (len(texts), num_perm), via datasketch's batched `MinHash.bulk`."""
    return signatures_from_hashes([shingle_hashes(t, n) for t in texts], num_perm, seed)


_FMIX32 = (np.uint32(16), np.uint32(0x85EBCA6B), np.uint32(13), np.uint32(0xC2B2AE35), np.uint32(16))


@functools.lru_cache(maxsize=8)
def minhash_permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's own affine32 permutation parameters (a odd, b) for (num_perm, seed), drawn as
    datasketch 2.0's MinHash._init_permutations draws them (tests/unit/test_dedup_exact.py compares).
    Not imported from datasketch: `import datasketch` pulls in scipy, 0.35 s of every corpus
    worker's start."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser, datasketch's pre-mix for scheme affine32 (wrapping uint32)."""
    s1, m1, s2, m2, s3 = _FMIX32
    h = (h ^ (h >> s1)) * m1
    h = (h ^ (h >> s2)) * m2
    return h ^ (h >> s3)


def signatures_from_hashes(hashes: Sequence[np.ndarray], num_perm: int, seed: int = 1) -> np.ndarray:
    """MinHash of precomputed shingle hashes: datasketch's scheme affine32 (its permutations, its
    fmix32 pre-mix, min of a * h + b mod 2^32) over the top 32 bits of our 64-bit shingle
    hashes: the pre-mix once for the whole batch, then one numpy expression per document. The
    values are exactly those of datasketch's `MinHash.bulk(..., scheme="affine32")` on the same
    32-bit inputs (a test compares them); `MinHash.bulk` spends about half its time in a
    per-shingle Python loop (hashfunc, then a list to array), which this skips.
    Signatures compare only with signatures made the same way (the manifest records the scheme)."""
    if not hashes:
        return np.zeros((0, num_perm), np.uint32)
    a, b = minhash_permutations(num_perm, seed)
    # datasketch hashes an empty document's one stand-in value 0, as MinHash.bulk was given before
    inputs = [(h >> np.uint64(32)).astype(np.uint32) if h.size else np.zeros(1, np.uint32) for h in hashes]
    mixed = _fmix32(np.concatenate(inputs))
    ends = np.cumsum([x.size for x in inputs])
    out = np.empty((len(inputs), num_perm), np.uint32)
    start = 0
    for k, end in enumerate(ends):  # one (shingles x permutations) block per document: it stays in cache
        np.min(mixed[start:end, None] * a + b, axis=0, out=out[k])
        start = end
    return out


def lsh_params(threshold: float, num_perm: int, fn_weight: float = 0.95) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive + false negative area (datasketch's optimiser).
    Remembered per machine (common/cache.py) by the arguments and datasketch's version: `import
    datasketch` pulls in scipy, and the optimiser integrates numerically, 0.45 s of the corpus stage's
    start."""
    from importlib.metadata import version

    from common.cache import remembered

    def optimise() -> list[int]:
        from datasketch.lsh import _optimal_param

        b, r = _optimal_param(threshold, num_perm, 1.0 - fn_weight, fn_weight)
        return [int(b), int(r)]

    b, r = remembered("lsh_params", f"{threshold!r} {num_perm} {fn_weight!r} datasketch {version('datasketch')}", optimise)
    return int(b), int(r)


def detection_probability(s: float, bands: int, rows: int) -> float:
    return 1.0 - (1.0 - s**rows) ** bands


BAND_KEY_BYTES = 14


def split_band_keys(blob: bytes) -> list[bytes]:
    """band_keys joined into one bytes object (one Python object instead of 16 in flight)."""
    return [blob[i : i + BAND_KEY_BYTES] for i in range(0, len(blob), BAND_KEY_BYTES)]


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[bytes]:
    """One key per band (BAND_KEY_BYTES): the band index plus a 12-byte hash of its rows' values."""
    return [
        struct.pack(">H", i) + hashlib.blake2b(sig[i * rows : (i + 1) * rows].tobytes(), digest_size=12).digest()
        for i in range(bands)
    ]


def estimated_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a == b))


def bucket_candidates(members: Iterable[tuple[str, bool]]) -> list[tuple[str, str]]:
    """One LSH bucket of (node, indexed) -> candidate edges (new member, anchor). The anchor is
    the smallest indexed node (published earlier) if any, else the smallest node. A bucket of
    indexed nodes only yields nothing: they were compared when they were new."""
    members = list(members)
    new = sorted(n for n, indexed in members if not indexed)
    if not new:
        return []
    old = [n for n, indexed in members if indexed]
    anchor = min(old) if old else new[0]
    return [(n, anchor) for n in new if n != anchor]


_POLY = np.uint64(0x100000001B3)  # FNV-1a's 64-bit prime, as the polynomial base


def _units(text: str, unit: str) -> list[str]:
    norm = unicodedata.normalize("NFKC", text).lower()
    if unit == "word":
        return _WORD.findall(norm)
    if unit == "char":  # scripts written without spaces: characters, spacing and punctuation dropped
        return [c for c in norm if c.isalnum()]
    raise ValueError(f"shingle unit must be 'word' or 'char', got {unit!r}")


def shingle_hashes(text: str, n: int = 5, unit: str = "word") -> np.ndarray:
    """Sorted distinct 64-bit hashes of the n-grams of words (or characters, for languages
    written without spaces): the exact shingle set, compactly.

    Each unit is hashed with xxh64; an n-gram's hash is the polynomial
    sum(h(u_i+k) * P^(n-1-k)) mod 2^64, computed for all n-grams at once with numpy. That is
    ~8 bytes per shingle, and no n-gram string is ever built.
    """
    import xxhash

    units = _units(text, unit)
    if len(units) < n:
        return np.array([xxhash.xxh64_intdigest(" ".join(units).encode())], np.uint64)
    # every unit hashed in C-level iteration: faster here than hashing the distinct ones via a dict
    unit_hash = np.fromiter(map(xxhash.xxh64_intdigest, map(str.encode, units)), np.uint64, len(units))
    m = len(units) - n + 1
    h = np.zeros(m, np.uint64)
    with np.errstate(over="ignore"):  # wrap-around is the point: arithmetic mod 2^64
        for k in range(n):
            h = h * _POLY + unit_hash[k : k + m]
    return np.unique(h)


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard of two sorted distinct hash arrays (64-bit collisions are negligible at page sizes)."""
    inter = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - inter
    return inter / union if union else 1.0


# --- Which document of a duplicate group is kept ---------------------------------------------
# Rule (documented in the corpus README and the manifest): a document already published by an
# earlier run (in the band index) beats any new one; then best quality, then smallest id.
# Quality is (language-id probability rounded to 0.01, word count): a page that language id is
# sure of is cleaner text, and among near-copies the longer one carries the more complete
# content (the shorter is usually the same page with a section cut). Rounding keeps tiny
# score differences from overriding length.


def quality(doc: dict) -> tuple[float, float]:
    return (round(float(doc.get("language_score") or 0.0), 2), float(len(_WORD.findall(doc["text"]))))


def rank_key(doc_id: str, q: Sequence[float], indexed: bool) -> tuple:
    """Smaller is better: indexed first, then higher quality, then smaller id."""
    return (0 if indexed else 1, *(-x for x in q), doc_id)


def quality_of_rank(rank: Sequence) -> list[float]:
    return [-x for x in rank[1:-1]]
