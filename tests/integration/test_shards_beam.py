"""The shards stage on Beam (DirectRunner, 2 processes): byte-identical across runs and equal to the
stage without Beam, on a tiny corpus and tokenizer made inside the test."""
from __future__ import annotations

import pytest

from tests.fixtures import make_corpus, vader_texts


@pytest.mark.slow
def test_beam_shards_are_deterministic_and_match_the_local_run(tmp_path):
    from pipelines.shards.mask_config import MaskConfig
    from pipelines.shards.stage import ShardsConfig, run, run_local
    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer
    from schemas.manifest import read_manifest, verify_outputs
    from training.pretraining.data import ShardSet

    corpus = make_corpus(tmp_path / "corpus", vader_texts("tweets", 200) + vader_texts("movieReviewSnippets", 100))
    tok = run_tokenizer(TokenizerConfig(corpus=str(corpus), output=str(tmp_path / "tok"), model="wordpiece",
                                        vocab_size=400, min_frequency=1))

    def cfg(name: str) -> ShardsConfig:
        return ShardsConfig(corpus=str(corpus), tokenizer=str(tok), output=str(tmp_path / name), seq_len=32,
                            num_shards=3, valid_per_mille=100, target_shard_mb=0.02,
                            mask=MaskConfig(objective="whole_word", num_variants=3))

    beam_args = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    outs = [run(cfg("beam-1"), beam_args), run(cfg("beam-2"), beam_args), run_local(cfg("local"))]
    manifests = [read_manifest(o) for o in outs]
    digests = [[(o["path"], o["sha256"]) for o in m["outputs"]] for m in manifests]
    assert digests[0] == digests[1] == digests[2] and len(digests[0]) > 4  # 3 train groups cut into parts + valid
    for m in manifests:
        assert m["counts"]["train_documents"] + m["counts"]["valid_documents"] == 300
    # Beam's counters agree with the files (the stage raises if rows were lost).
    assert manifests[0]["extra"]["run_counters"]["train_rows"] == manifests[0]["counts"]["train_rows"]
    verify_outputs(outs[0])
    assert ShardSet.open(outs[0]).read("train").num_rows == manifests[0]["counts"]["train_rows"]


@pytest.mark.slow
def test_replay_mixes_in_the_same_hash_sample_of_earlier_corpora(tmp_path):
    """A refresh's shards mix in a fraction of an earlier snapshot's corpus: the same documents on
    Beam and without it, counted in the manifest, the earlier corpus pinned among the inputs."""
    from pipelines.shards.mask_config import MaskConfig
    from pipelines.shards.rows import replay_mask
    from pipelines.shards.stage import ShardsConfig, run, run_local
    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer
    from schemas.manifest import read_manifest

    earlier = make_corpus(tmp_path / "earlier", vader_texts("tweets", 200), prefix="old")
    new = make_corpus(tmp_path / "new", vader_texts("movieReviewSnippets", 120), prefix="new")
    tok = run_tokenizer(TokenizerConfig(corpus=str(earlier), output=str(tmp_path / "tok"), model="wordpiece",
                                        vocab_size=400, min_frequency=1))

    def cfg(name: str, fraction: float) -> ShardsConfig:
        return ShardsConfig(corpus=str(new), tokenizer=str(tok), output=str(tmp_path / name), seq_len=32, num_shards=2,
                            valid_per_mille=100, replay=[str(earlier)], replay_fraction=fraction,
                            mask=MaskConfig(num_variants=2))

    want = sum(replay_mask([f"old-{i:05d}" for i in range(200)], 0.25))
    assert 20 < want < 80
    outs = [run(cfg("beam", 0.25), ["--direct_running_mode=in_memory"]), run_local(cfg("local", 0.25))]
    ms = [read_manifest(o) for o in outs]
    assert [(o["path"], o["sha256"]) for o in ms[0]["outputs"]] == [(o["path"], o["sha256"]) for o in ms[1]["outputs"]]
    for m in ms:
        assert m["counts"]["replayed_documents"] == want
        assert m["counts"]["train_documents"] + m["counts"]["valid_documents"] == 120 + want
        assert any(i["path"] == str(earlier) and i["manifest_sha256"] for i in m["inputs"])
    none = read_manifest(run_local(cfg("none", 0.0)))
    assert none["counts"]["replayed_documents"] == 0
    assert none["counts"]["train_documents"] + none["counts"]["valid_documents"] == 120
