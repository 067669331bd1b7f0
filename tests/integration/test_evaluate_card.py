"""`lmforge evaluate --model DIR`: the card of each model kind (tiny models built in the test), and the
bad inputs the issue lists, each a clear error naming what is missing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import make_shards, make_tokenizer

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--cost-inputs", "64", "--cost-repeats", "2", "--latency-inputs", "8"]


def _evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmforge.cli", "evaluate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import torch
    import transformers as tf

    from training.models.export import load_tokenizer, save_hf

    tmp = tmp_path_factory.mktemp("card")
    tok_dir = make_tokenizer(tmp / "tokenizer")
    shards = make_shards(tmp / "shards", tok_dir, seq_len=32, train_rows=16, valid_rows=24)
    tok = load_tokenizer(tok_dir)
    v = len(tok)
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    bert = tf.BertConfig(vocab_size=v, max_position_embeddings=64, pad_token_id=tok.pad_token_id, **small)
    torch.manual_seed(0)
    built = {
        "masked_lm": tf.BertForMaskedLM(bert),
        "classifier": tf.BertForSequenceClassification(tf.BertConfig(**{**bert.to_dict(), "num_labels": 3})),
        "encoder": tf.BertModel(bert),
        "causal_lm": tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=v, n_positions=64, n_embd=32, n_layer=2, n_head=2)),
        "seq2seq": tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=v, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                             num_heads=2, decoder_start_token_id=tok.pad_token_id,
                                                             pad_token_id=tok.pad_token_id)),
    }
    dirs = {}
    for kind, model in built.items():
        save_hf(model, tok, tmp / kind)
        dirs[kind] = tmp / kind
    return tmp, shards, dirs


@pytest.mark.slow
def test_card_for_each_model_kind(models, tmp_path):
    tmp, shards, dirs = models
    r = _evaluate("--model", *map(str, dirs.values()), "--shards", str(shards), "--output", str(tmp_path / "card"), *SMALL)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((tmp_path / "card" / "report.json").read_text())
    by_kind = {e["kind"]: e for e in report["models"]}
    assert set(by_kind) == set(dirs)
    q = by_kind["masked_lm"]["quality"]
    assert q["applies"] and q["value"] > 0 and 0 < q["standard_error"] < q["value"] and q["tokens"] > 10
    assert "causal shards" in by_kind["causal_lm"]["quality"]["why"]
    assert "task score" in by_kind["classifier"]["quality"]["why"]
    for kind, e in by_kind.items():
        c = e["cost"]
        assert c["parameters"]["total"] > c["parameters"]["without_embeddings"] > 0, kind
        assert c["disk_bytes"] > 0 and c["peak_rss_bytes"] > c["peak_rss_over_imports_bytes"] > 0, (kind, c)
        assert c["with_head"]["inputs_per_second_median"] > 0 and len(c["with_head"]["inputs_per_second_runs"]) == 2
        assert c["with_head"]["latency_ms_p95"] >= c["with_head"]["latency_ms_p50"] > 0
        assert c["threads"] == 2 and c["inputs"] == 64
    assert "encoder_only" in by_kind["masked_lm"]["cost"] and "encoder_only" in by_kind["seq2seq"]["cost"]
    # a tied output projection is counted once: the masked LM has the encoder's parameters plus its head's transform
    md = (tmp_path / "card" / "report.md").read_text()
    assert "| masked_lm |" in md and "MOROCCO" in md

    # cost on the user's own texts, tokenized with the model's tokenizer
    texts = tmp_path / "texts.txt"
    texts.write_text("a real sentence about the weather\nanother line of text\n")
    r = _evaluate("--model", str(dirs["classifier"]), "--texts", str(texts), "--max-length", "16",
                  "--output", str(tmp_path / "card2"), *SMALL)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((tmp_path / "card2" / "report.json").read_text())["models"][0]["cost"]["seq_len"] == 16


@pytest.mark.slow
def test_card_bad_inputs_name_what_is_missing(models, tmp_path):
    tmp, shards, dirs = models
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((dirs["masked_lm"] / "config.json").read_text())
    no_tok = tmp_path / "no-tokenizer"
    no_tok.mkdir()
    for f in ("config.json", "model.safetensors"):
        (no_tok / f).write_bytes((dirs["masked_lm"] / f).read_bytes())
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    cases = [
        (["--model", str(tmp_path / "nope")], "no such model directory"),
        (["--model", str(tmp_path)], "no config.json"),
        (["--model", str(no_weights), "--shards", str(shards)], "no weights"),
        (["--model", str(no_tok), "--shards", str(shards)], "no tokenizer"),
        (["--model", str(dirs["masked_lm"])], "cost needs real inputs"),
        (["--model", str(dirs["classifier"]), "--texts", str(empty)], "no text lines"),
    ]
    from concurrent.futures import ThreadPoolExecutor

    # each a process that is mostly start-up before it fails: three at a time overlap on two cores
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda c: _evaluate(*c[0], "--output", str(tmp_path / "out"), *SMALL), cases))
    for (args, message), r in zip(cases, answers, strict=True):
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr[-2000:])


@pytest.mark.slow
def test_int8_compression_is_scored_beside_its_source_and_refused_for_training(models, tmp_path):
    from tests.fixtures import vader_texts

    tmp, shards, dirs = models
    data = tmp_path / "labeled.jsonl"
    texts = vader_texts("tweets", 90)
    data.write_text("".join(json.dumps({"text": t, "label": f"LABEL_{i % 3}", "split": ("train", "validation", "test")[(i // 3) % 3]})
                            + "\n" for i, t in enumerate(texts)))
    task = tmp_path / "finetune.json"
    # the fine-tune's headline metric is what the card reports as the task score (here macro-F1, not accuracy)
    task.write_text(json.dumps({"data": [str(data)], "task": "classification", "select_metric": "macro_f1"}))
    # the two compressions of one model, at once (each a process, mostly start-up)
    compressions = [subprocess.Popen([sys.executable, "-m", "lmforge.cli", "compress", "--model", str(dirs["classifier"]),
                                      *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    for args in (["--output", str(tmp_path / "int8")],
                                 ["--output", str(tmp_path / "pruned"), "--method", "prune", "--shares", "0.25",
                                  "--task-config", str(task)])]
    for proc in compressions:
        err = proc.communicate(timeout=600)[1]
        assert proc.returncode == 0, err[-2000:]
    q = json.loads((tmp_path / "int8" / "quantization.json").read_text())
    assert q["quantized_modules"] > 0 and q["kind"] == "classifier"
    assert q["scheme"] == "per_channel" and q["quantized_embeddings"] == 3  # word, position and token-type tables
    assert not list((tmp_path / "int8").glob("*.safetensors"))
    spec = json.loads((tmp_path / "pruned" / "share-0.25" / "pruning.json").read_text())
    assert spec["heads_removed"] == 1 and spec["heads_total"] == 4  # 2 layers x 2 heads, one layer keeps both

    r = _evaluate("--model", str(dirs["classifier"]), str(tmp_path / "int8"), str(tmp_path / "pruned" / "share-0.25"),
                  "--task-config", str(task), "--shards", str(shards), "--output", str(tmp_path / "card"), *SMALL)
    assert r.returncode == 0, r.stderr[-3000:]
    fp32, int8, pruned = json.loads((tmp_path / "card" / "report.json").read_text())["models"]
    assert pruned["cost"]["parameters"]["total"] < fp32["cost"]["parameters"]["total"]
    # rows named by what each model is (the compress manifests), the paths in their own column
    assert [e["name"] for e in (fp32, int8, pruned)] == ["classifier", "int8", "pruned 25%"]
    md = (tmp_path / "card" / "report.md").read_text()
    assert "| int8 | classifier |" in md and "| `int8` |" in md and "| pruned 25% |" in md  # relative to the run folder
    # and whether the cost columns were measured on a quiet machine
    assert all(e["cost"]["machine"]["wall_seconds"] > 0 for e in (fp32, int8, pruned))
    assert "Cost measured on a quiet machine" in md or "The machine was busy while cost was measured" in md
    # the card's picture of quality against cost, and its HTML with it
    assert json.loads((tmp_path / "card" / "report.json").read_text())["images"] == ["quality_cost.png"]
    html = (tmp_path / "card" / "report.html").read_text()
    assert "<table>" in html and 'src="quality_cost.png"' in html
    for e in (fp32, int8, pruned):
        assert e["quality"]["task"]["test_examples"] == 30 and e["quality"]["task"]["primary"] == "macro_f1"
        assert 0 <= e["quality"]["task"]["metrics"]["accuracy"] <= 1 and 0 <= e["quality"]["task"]["metrics"]["macro_f1"] <= 1
    # the same architecture: the same parameter count, int8 weights on disk in less space
    assert int8["cost"]["parameters"]["total"] == fp32["cost"]["parameters"]["total"]
    assert int8["cost"]["disk_bytes"] < fp32["cost"]["disk_bytes"]

    # an int8 model is for inference: training from it is refused with what to do instead (both asked at once)
    refused = [subprocess.Popen([sys.executable, "-m", "lmforge.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
               for args in (["finetune", "--model", str(tmp_path / "int8"), "--config", str(task), "--output",
                             str(tmp_path / "ft")],
                            ["distill", "--teacher", str(tmp_path / "int8"), "--shards", str(shards), "--output",
                             str(tmp_path / "d")])]
    for proc in refused:
        err = proc.communicate(timeout=600)[1]
        assert proc.returncode == 2 and "int8 dynamic-quantized model, for inference only" in err, err[-2000:]
