"""Exact shingle-set confirmation of LSH candidates."""
from __future__ import annotations

from pipelines.corpus.dedup import exact_jaccard, shingle_hashes, shingles

TEXT = ("We will support our users who develop and run non-free works on Debian, but we will never make "
        "the system depend on an item of non-free software. We will give back to the free software community.")


def test_exact_jaccard_matches_set_jaccard():
    other = TEXT.replace("never make", "not make").replace("give back", "contribute")
    a, b = set(shingles(TEXT)), set(shingles(other))
    assert abs(exact_jaccard(shingle_hashes(TEXT), shingle_hashes(other)) - len(a & b) / len(a | b)) < 1e-12
    assert exact_jaccard(shingle_hashes(TEXT), shingle_hashes(TEXT)) == 1.0
    h = shingle_hashes(TEXT)
    assert (h[1:] > h[:-1]).all() and h.dtype.name == "uint64"


def test_character_shingles_for_languages_without_spaces():
    import pytest

    # Real Japanese (the opening of Natsume Soseki's "I Am a Cat", public domain).
    ja = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。"
    edited = ja.replace("薄暗い", "明るい")
    # \w+ sees 4 "words" (whole sentences), fewer than 5: one shingle, useless for similarity
    assert shingle_hashes(ja).size == 1
    char = shingle_hashes(ja, 5, "char")
    assert char.size > 50
    j = exact_jaccard(char, shingle_hashes(edited, 5, "char"))
    assert 0.7 < j < 1.0
    with pytest.raises(ValueError):
        shingle_hashes(ja, 5, "syllable")


def test_sign_shingles_by_language():
    import numpy as np

    from pipelines.corpus.beam_dedup import sign_records
    from pipelines.corpus.config import CorpusConfig

    ja = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
    cfg = CorpusConfig(input=["-"], output="-", char_shingle_languages=["ja"])
    (h_ja, keys_ja), (h_en, keys_en) = sign_records([{"text": ja, "language": "ja"}, {"text": TEXT, "language": "en"}], cfg, 16, 8)
    assert np.array_equal(h_ja, shingle_hashes(ja, 5, "char")) and np.array_equal(h_en, shingle_hashes(TEXT, 5))
    assert len(keys_ja) == len(keys_en) == 16 and keys_ja != keys_en


def test_shingle_hashes_are_the_documented_polynomial_of_xxh64_units():
    """The band index stores these hashes (scheme in MINHASH_SCHEME), so an implementation change
    must not move a single value: compare with the definition, n-gram by n-gram in Python ints."""
    import xxhash

    from pipelines.corpus.dedup import _units, shingle_hashes

    text = ("Debian will remain 100% free. We will give back to the free software community; "
            "Всё смешалось в доме Облонских. Жена узнала, что муж был в связи с гувернанткой. free software")
    for n in (1, 3, 5):
        units = _units(text, "word")
        want = set()
        for i in range(len(units) - n + 1):
            h = 0
            for u in units[i:i + n]:
                h = (h * 0x100000001B3 + xxhash.xxh64_intdigest(u.encode())) % 2**64
            want.add(h)
        assert shingle_hashes(text, n).tolist() == sorted(want)


def test_batched_signatures_are_datasketchs_minhash_bit_for_bit():
    """signatures_from_hashes computes datasketch's affine32 MinHash for a whole batch in numpy;
    every value must equal MinHash.bulk's on the same 32-bit inputs, for an empty document too."""
    import numpy as np
    from datasketch import MinHash

    from pipelines.corpus import dedup

    texts = [" ".join(f"w{(i * 7 + j) % 97}" for j in range(20 + 13 * i)) for i in range(40)] + ["", "two words"]
    hashes = [dedup.shingle_hashes(t, 5) for t in texts] + [np.zeros(0, np.uint64)]
    inputs = [(h >> np.uint64(32)).astype(np.uint32) if h.size else np.zeros(1, np.uint32) for h in hashes]
    for seed, num_perm in ((1, 128), (7, 64)):
        want = np.stack([m.hashvalues for m in MinHash.bulk(inputs, num_perm=num_perm, seed=seed,
                                                            hashfunc=lambda x: x, scheme="affine32")])
        got = dedup.signatures_from_hashes(hashes, num_perm, seed)
        # the permutations are drawn without importing datasketch: the same draws as its own
        for mine, theirs in zip(dedup.minhash_permutations(num_perm, seed), MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations):
            assert np.array_equal(mine, theirs)
        assert got.dtype == np.uint32 and np.array_equal(got, want)
        assert np.array_equal(dedup.signatures_from_hashes(hashes[5:9], num_perm, seed), want[5:9])
