"""training.compression.distill and training.models.model: student init, the loss, and a few real steps."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from schemas.manifest import Manifest, read_manifest, verify_outputs, write_manifest
from tests.fixtures import make_shards, make_tokenizer
from training.compression.distill import (
    DistillConfig,
    distill_step,
    loss_at,
    main,
    student_from_teacher,
    student_layers,
)
from training.models.export import load_tokenizer, save_hf
from training.models.model import ModelConfig, SparseMLM, bert_config, build_model, preset
from training.pretraining.data import RankLoader, ShardSet


def _teacher(layers: int = 4, vocab: int = 100):
    torch.manual_seed(0)
    cfg = ModelConfig(hidden_size=32, num_layers=layers, num_heads=2, intermediate_size=64)
    return build_model(bert_config(cfg, vocab_size=vocab, pad_id=0, max_position=16))


def test_student_layers():
    assert student_layers(12) == [0, 2, 4, 7, 9, 11]  # DistilBERT's extract_distilbert.py
    assert student_layers(4) == [0, 3]
    assert student_layers(3) == [0, 2]
    assert student_layers(6, 3) == [0, 3, 5] and student_layers(6, 6) == list(range(6))
    assert student_layers(12, 1) == [0] and student_layers(2) == [0]
    with pytest.raises(ValueError, match="does not fit"):
        student_layers(4, 5)


def test_student_copies_spread_layers_with_the_last_and_embeddings():
    teacher = _teacher(layers=4)
    student = student_from_teacher(teacher)
    assert student.config.num_hidden_layers == 2 and student.config.hidden_size == teacher.config.hidden_size
    t, s = teacher.state_dict(), student.state_dict()
    for si, ti in enumerate([0, 3]):
        for key in [k for k in s if k.startswith(f"bert.encoder.layer.{si}.")]:
            assert torch.equal(s[key], t[key.replace(f"layer.{si}.", f"layer.{ti}.", 1)]), key
    # Layer 1 of the student is teacher layer 3 (the last), not teacher layer 1.
    q = "bert.encoder.layer.{}.attention.self.query.weight"
    assert not torch.equal(s[q.format(1)], t[q.format(1)])
    for key in [k for k in s if not k.startswith("bert.encoder.layer.")]:
        assert torch.equal(s[key], t[key]), key  # embeddings, MLM head
    # The decoder is still tied to the word embeddings, and not to the teacher's.
    assert student.cls.predictions.decoder.weight.data_ptr() == student.bert.embeddings.word_embeddings.weight.data_ptr()
    assert student.bert.embeddings.word_embeddings.weight.data_ptr() != teacher.bert.embeddings.word_embeddings.weight.data_ptr()


def test_bad_layer_choice_raises():
    with pytest.raises(ValueError, match="do not fit"):
        student_from_teacher(_teacher(layers=2), layers=[0, 2])


def _full_loss(s_logits, t_logits, s_hidden, t_hidden, labels, mask, cfg):
    """The loss from full (batch, seq, vocab) logits, selected as distill_step selects: (loss, parts as floats)."""
    sel = (labels != -100) if cfg.restrict_ce_to_mask else mask.bool()
    att = mask.bool()
    loss, parts = loss_at(s_logits[sel], t_logits[sel], labels[sel], s_hidden[att], t_hidden[att], cfg)
    return loss, {k: v.item() for k, v in parts.items()}


def test_loss_parts_are_zero_for_identical_models():
    teacher = _teacher(layers=2).eval()
    ids = torch.randint(5, 100, (2, 16))
    mask = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    cfg = DistillConfig(teacher="t", shards="s", output="o")
    with torch.no_grad():
        o = teacher(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    loss, parts = _full_loss(o.logits, o.logits, o.hidden_states[-1], o.hidden_states[-1], labels, mask, cfg)
    assert parts["ce"] == pytest.approx(0.0, abs=1e-5) and parts["cos"] == pytest.approx(0.0, abs=1e-5)
    assert loss.item() == pytest.approx(cfg.alpha_mlm * parts["mlm"], rel=1e-5)


@pytest.mark.parametrize("restrict", [False, True])
def test_step_with_heads_at_selected_positions_equals_the_full_logits_loss(restrict):
    torch.manual_seed(0)
    teacher = _teacher(layers=2).eval()
    student = student_from_teacher(teacher, [1]).eval()  # eval: no dropout, so both paths see the same network
    ids = torch.randint(5, 100, (3, 16))
    mask = torch.ones_like(ids)
    mask[2, 9:] = 0
    labels = torch.full_like(ids, -100)
    labels[:, [2, 5, 8]] = ids[:, [2, 5, 8]]
    cfg = DistillConfig(teacher="t", shards="s", output="o", restrict_ce_to_mask=restrict)
    with torch.no_grad():
        t = teacher(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        s = student(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        full, parts_full = _full_loss(s.logits, t.logits, s.hidden_states[-1], t.hidden_states[-1], labels, mask, cfg)
        step, parts_step = distill_step(student, teacher, {"input_ids": ids, "attention_mask": mask, "labels": labels}, cfg)
    assert step.item() == pytest.approx(full.item(), rel=1e-5)
    assert {k: v.item() for k, v in parts_step.items()} == pytest.approx(parts_full, rel=1e-4, abs=1e-6)
    assert parts_full["ce"] > 0  # the student differs from the teacher, so the KL term is measured, not trivially 0


def test_sparse_mlm_equals_hf_loss():
    model = _teacher(layers=2).eval()
    ids = torch.randint(5, 100, (3, 16))
    mask = torch.ones_like(ids)
    mask[2, 10:] = 0
    labels = torch.full_like(ids, -100)
    labels[:, [1, 4, 7]] = ids[:, [1, 4, 7]]
    with torch.no_grad():
        hf = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        sparse = SparseMLM(model)(ids, mask, labels)
    assert sparse.item() == pytest.approx(hf.item(), rel=1e-5)


def test_presets():
    assert preset("tiny").hidden_size == 64 and preset("demo").num_layers == 4
    with pytest.raises(ValueError, match="unknown model preset"):
        preset("huge")
    with pytest.raises(ValueError, match="multiple of num_heads"):
        ModelConfig(hidden_size=30, num_layers=1, num_heads=4, intermediate_size=8)


def test_distill_runs_end_to_end(tmp_path, monkeypatch):
    tok_dir = make_tokenizer(tmp_path / "tokenizer")
    shards_dir = make_shards(tmp_path / "shards", tok_dir, seq_len=32, num_variants=2, train_rows=24, valid_rows=4)
    shards = ShardSet.open(shards_dir)
    torch.manual_seed(0)
    teacher = build_model(bert_config(preset("tiny"), shards.vocab_size, shards.pad_id, shards.seq_len))
    teacher_hf = tmp_path / "pretrain" / "hf"
    save_hf(teacher, load_tokenizer(tok_dir), teacher_hf)
    write_manifest(teacher_hf.parent, Manifest(stage="pretrain", config={}))

    # A few steps through the core, checking the loss is finite and gradients reach the student.
    cfg = DistillConfig(teacher=str(teacher_hf), shards=str(shards_dir), output=str(tmp_path / "d"))
    student = student_from_teacher(teacher.eval())
    batch = next(RankLoader(shards.read("train"), 0, 1, 4, 0, 2).epoch(0))
    loss, parts = distill_step(student, teacher, batch, cfg)
    loss.backward()
    assert torch.isfinite(loss) and all(abs(v) < 1e6 for v in parts.values())
    assert student.bert.encoder.layer[0].attention.self.query.weight.grad is not None
    assert teacher.bert.encoder.layer[0].attention.self.query.weight.grad is None

    # And the entry point, which writes hf/, metrics.json and the manifest (to a relative path).
    monkeypatch.chdir(tmp_path)
    out = main(["--teacher", str(teacher_hf.parent), "--shards", str(shards_dir), "--output", "distill",
                "--epochs", "1", "--batch-size", "4", "--log-every", "3", "--eval-batches", "1"])  # 24 rows / 4 = 6 steps
    manifest = read_manifest(out)
    verify_outputs(out)
    assert manifest["stage"] == "distill" and manifest["counts"]["steps"] == 6
    assert manifest["inputs"][0]["path"] == str(tmp_path / "pretrain")  # the stage, pinned by its manifest
    assert manifest["inputs"][0]["manifest_sha256"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["loss_curve"]) == 6
    assert all(torch.isfinite(torch.tensor(p["loss"])) for p in metrics["loss_curve"])
    assert AutoModelForMaskedLM.from_pretrained(out / "hf").config.num_hidden_layers == 1
    assert AutoTokenizer.from_pretrained(out / "hf").mask_token == "[MASK]"


def test_a_pre_ln_teacher_keeps_its_class_and_weights(tmp_path):
    """lmforge's --prenorm models are RobertaPreLayerNormForMaskedLM: distill loads them as such (read as a BERT,
    every weight would be 'unexpected' and the teacher random) and copies layers under their own prefix."""
    from transformers import RobertaPreLayerNormForMaskedLM

    from training.compression.distill import load_teacher
    from training.models.model import prenorm_config

    torch.manual_seed(0)
    cfg = ModelConfig(hidden_size=32, num_layers=4, num_heads=2, intermediate_size=64, prenorm=True)
    RobertaPreLayerNormForMaskedLM(prenorm_config(cfg, 100, 0, 16)).save_pretrained(tmp_path / "t")
    teacher = load_teacher(tmp_path / "t")
    assert isinstance(teacher, RobertaPreLayerNormForMaskedLM) and not any(p.requires_grad for p in teacher.parameters())
    ids = torch.randint(5, 100, (2, 12))
    mask = torch.ones_like(ids)
    with torch.no_grad():  # every layer copied: the same function as the teacher
        same = student_from_teacher(teacher, [0, 1, 2, 3]).eval()
        assert torch.allclose(same(input_ids=ids, attention_mask=mask).logits,
                              teacher(input_ids=ids, attention_mask=mask).logits, atol=1e-5)
    student = student_from_teacher(teacher)
    assert student.config.num_hidden_layers == 2 and isinstance(student, RobertaPreLayerNormForMaskedLM)
    last = "roberta_prelayernorm.encoder.layer.{}.attention.self.query.weight"
    assert torch.equal(student.state_dict()[last.format(1)], teacher.state_dict()[last.format(3)])
    # a model without an MLM head is refused with what to do
    from transformers import RobertaPreLayerNormModel

    RobertaPreLayerNormModel(prenorm_config(cfg, 100, 0, 16)).save_pretrained(tmp_path / "bare")
    with pytest.raises(ValueError, match="not a complete masked LM .*--freeze-encoder"):
        load_teacher(tmp_path / "bare")


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_a_decoder_distils_on_causal_shards_with_distilgpt2s_recipe(tmp_path_factory, family):
    """What causal shards train distils into a decoder of half its blocks (DistilGPT2): the same class, the
    teacher's blocks copied under its own prefix (Llama's model.layers., GPT-2's transformer.h.), the loss on every
    position's next token; the student opens in pipeline("text-generation")."""
    import dataclasses

    from transformers import pipeline

    from tests.fixtures import make_objective_shards
    from training.compression.distill import layer_prefix, load_teacher
    from training.models.model import build_for_objective

    root = tmp_path_factory.mktemp("causal")
    shards_dir = make_objective_shards(root, "causal")
    s = ShardSet.open(shards_dir)
    tok = load_tokenizer(root / "byte_bpe")
    torch.manual_seed(0)
    m = dataclasses.replace(preset("tiny"), num_layers=4, dropout=0.0, family=family)
    teacher_hf = root / "pretrain" / "hf"
    save_hf(build_for_objective("causal", m, s.vocab_size, s.pad_id, s.eos_id, s.seq_len).hf, tok, teacher_hf)
    write_manifest(teacher_hf.parent, Manifest(stage="pretrain", config={}))
    teacher = load_teacher(teacher_hf, "causal_lm")
    assert layer_prefix(teacher) == {"llama": "model.layers.", "gpt2": "transformer.h."}[family]
    ids = torch.randint(5, s.vocab_size, (2, 12))
    with torch.no_grad():  # every block copied: the teacher's function
        same = student_from_teacher(teacher, [0, 1, 2, 3]).eval()
        assert torch.allclose(same(input_ids=ids).logits, teacher(input_ids=ids).logits, atol=1e-5)
    batch = next(RankLoader(s.read("train"), 0, 1, 4, 0, s.num_variants).epoch(0))
    cfg = DistillConfig(teacher=str(teacher_hf), shards=str(shards_dir), output=str(root / "d"))
    loss, parts = distill_step(same.train(), teacher, batch, cfg, causal=True)
    assert parts["ce"].abs() < 1e-4 and parts["cos"].abs() < 1e-4  # the same model: no KL, no cosine distance
    out = main(["--teacher", str(teacher_hf), "--shards", str(shards_dir), "--output", str(root / "distill"),
                "--steps", "4", "--batch-size", "4", "--log-every", "2", "--eval-batches", "1"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["student_layers"] == 2 and metrics["copied_layers"] == [0, 3]
    assert metrics["student_valid_mlm_loss"] > 0 and metrics["teacher_valid_mlm_loss"] > 0
    gen = pipeline("text-generation", model=str(out / "hf"))
    assert type(gen.model).__name__ == type(teacher).__name__
    assert gen("The movie", max_new_tokens=4, do_sample=False)[0]["generated_text"].startswith("The movie")


def test_a_t5_distils_on_t5_span_shards_into_half_of_each_stack(tmp_path_factory):
    """What t5_span shards train distils into a T5 of half its encoder and half its decoder blocks, each stack's
    first block (the one holding T5's relative position bias) kept; the loss at every span-target position; the
    student is a T5ForConditionalGeneration that opens in transformers and scores the same targets."""
    import dataclasses

    from transformers import AutoModelForSeq2SeqLM

    from tests.fixtures import make_objective_shards
    from training.compression.distill import block_stacks, load_teacher
    from training.models.model import build_for_objective

    root = tmp_path_factory.mktemp("t5")
    shards_dir = make_objective_shards(root, "t5_span")
    s = ShardSet.open(shards_dir)
    tok = load_tokenizer(root / "unigram")
    torch.manual_seed(0)
    m = dataclasses.replace(preset("tiny"), num_layers=4, dropout=0.0)
    teacher_hf = root / "pretrain" / "hf"
    save_hf(build_for_objective("t5_span", m, s.vocab_size, s.pad_id, s.eos_id, s.seq_len).hf, tok, teacher_hf)
    write_manifest(teacher_hf.parent, Manifest(stage="pretrain", config={}))
    teacher = load_teacher(teacher_hf, "seq2seq")
    assert [p for p, _, _ in block_stacks(teacher)] == ["encoder.block.", "decoder.block."]
    batch = next(RankLoader(s.read("train"), 0, 1, 4, 0, s.num_variants).epoch(0))
    feed = {k: batch[k] for k in ("input_ids", "attention_mask", "decoder_input_ids")}
    with torch.no_grad():  # every block copied: the teacher's function
        same = student_from_teacher(teacher, [0, 1, 2, 3]).eval()
        assert torch.allclose(same(**feed).logits, teacher(**feed).logits, atol=1e-5)
    cfg = DistillConfig(teacher=str(teacher_hf), shards=str(shards_dir), output=str(root / "d"))
    loss, parts = distill_step(same.train(), teacher, batch, cfg)
    assert parts["ce"].abs() < 1e-4 and parts["cos"].abs() < 1e-4 and parts["mlm"] > 0
    half = student_from_teacher(teacher)
    assert (half.config.num_layers, half.config.num_decoder_layers) == (2, 2)
    bias = "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    assert torch.equal(half.state_dict()[bias], teacher.state_dict()[bias])
    last = "encoder.block.1.layer.1.DenseReluDense.wi.weight"
    assert torch.equal(half.state_dict()[last], teacher.state_dict()[last.replace("block.1", "block.3")])
    out = main(["--teacher", str(teacher_hf), "--shards", str(shards_dir), "--output", str(root / "distill"),
                "--steps", "4", "--batch-size", "4", "--log-every", "2", "--eval-batches", "1"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["student_layers"] == 2 and metrics["copied_layers"] == [0, 3]
    assert metrics["student_valid_mlm_loss"] > 0 and metrics["teacher_valid_mlm_loss"] > 0
    assert type(AutoModelForSeq2SeqLM.from_pretrained(out / "hf")).__name__ == "T5ForConditionalGeneration"
