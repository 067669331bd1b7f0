"""What lmforge saves loads in transformers 4.x as well as 5.x: the tokenizer stage's output for each
tokenizer family and an exported masked LM with its tokenizer, loaded with a transformers 4.x release
in a throwaway virtualenv (cached in samples/.cache/transformers4; created from PyPI on first use),
giving the same token ids and the same logits as transformers 5 here; the same for a Llama-style decoder (what
causal shards train) with grouped-query attention and for a T5 (what t5_span shards train)."""
from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.fixtures import make_corpus, vader_texts

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / "samples" / ".cache" / "transformers4"
SPEC = "transformers>=4.57,<5"
TEXT = "The movie was not bad at all, naïve but fun!"

PROBE = r'''
import json, sys
import torch, transformers
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer
out = {"version": transformers.__version__}
for d in sys.argv[2:]:
    tok = AutoTokenizer.from_pretrained(d)
    entry = {"class": type(tok).__name__, "ids": tok(sys.argv[1])["input_ids"], "mask": tok.mask_token,
             "special": sorted(tok.additional_special_tokens)[:3]}
    if (__import__("pathlib").Path(d) / "model.safetensors").exists():
        arch = json.loads((__import__("pathlib").Path(d) / "config.json").read_text())["architectures"][0]
        auto = (AutoModelForCausalLM if arch.endswith("ForCausalLM") else
                AutoModelForSeq2SeqLM if arch.endswith("ForConditionalGeneration") else AutoModelForMaskedLM)
        model = auto.from_pretrained(d).eval()
        entry["class"] = type(model).__name__
        enc = tok(sys.argv[1], return_tensors="pt")
        if model.config.is_encoder_decoder:  # the decoder reads the first three tokens
            enc["decoder_input_ids"] = enc["input_ids"][:, :3]
        with torch.no_grad():
            entry["logits"] = model(**enc).logits[0, :3, :5].tolist()
    out[d] = entry
print(json.dumps(out))
'''


def transformers4_python() -> Path:
    python = VENV / "bin" / "python"
    if not (VENV / ".ready").exists():
        subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", SPEC], check=True, timeout=900)
        # torch from this environment (the CPU wheel pinned here), after the venv's own packages
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        Path(site, "lmforge-torch.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        (VENV / ".ready").write_text(SPEC + "\n")
    return python


@pytest.mark.slow
def test_saved_tokenizers_and_models_load_in_transformers_4(tmp_path):
    import dataclasses

    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForMaskedLM,
        AutoModelForSeq2SeqLM,
        AutoTokenizer,
        BertForMaskedLM,
    )

    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer
    from training.models.export import load_tokenizer, save_hf
    from training.models.model import bert_config, build_for_objective, preset

    corpus = make_corpus(tmp_path / "corpus", vader_texts("tweets", 300))
    dirs = [run_tokenizer(TokenizerConfig(corpus=str(corpus), output=str(tmp_path / m), model=m, vocab_size=500,
                                          min_frequency=1)) for m in ("wordpiece", "byte_bpe", "unigram")]
    tok = load_tokenizer(dirs[0])
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(preset("tiny"), len(tok), tok.pad_token_id, 64))
    hf = tmp_path / "hf"
    save_hf(model, tok, hf)
    decoder_tok = load_tokenizer(dirs[1])  # byte-level BPE, as a decoder's
    decoder = build_for_objective("causal", dataclasses.replace(preset("tiny"), num_heads=4, num_kv_heads=2),
                                  len(decoder_tok), decoder_tok.pad_token_id, None, 64).hf
    llama = tmp_path / "llama"
    save_hf(decoder, decoder_tok, llama)
    t5_tok = load_tokenizer(dirs[2])  # unigram with sentinels, as t5_span's
    t5 = tmp_path / "t5"
    save_hf(build_for_objective("t5_span", preset("tiny"), len(t5_tok), t5_tok.pad_token_id, t5_tok.eos_token_id,
                                64).hf, t5_tok, t5)
    for d in (*dirs, hf):
        assert json.loads((d / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"

    r = subprocess.run([str(transformers4_python()), "-c", PROBE, TEXT, *map(str, (*dirs, hf, llama, t5))],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["version"].startswith("4.")
    for d in (*dirs, hf):
        here = AutoTokenizer.from_pretrained(d)
        assert got[str(d)]["ids"] == here(TEXT)["input_ids"], d
        assert got[str(d)]["mask"] == here.mask_token
    assert got[str(dirs[2])]["special"] == ["<extra_id_0>", "<extra_id_10>", "<extra_id_11>"]  # T5's sentinels
    with torch.no_grad():
        mine = AutoModelForMaskedLM.from_pretrained(hf).eval()(**load_tokenizer(hf)(TEXT, return_tensors="pt")).logits
    assert torch.allclose(torch.tensor(got[str(hf)]["logits"]), mine[0, :3, :5], atol=1e-5)
    assert got[str(llama)]["class"] == "LlamaForCausalLM"
    with torch.no_grad():
        mine = AutoModelForCausalLM.from_pretrained(llama).eval()(**decoder_tok(TEXT, return_tensors="pt")).logits
    assert mine.shape[-1] == len(decoder_tok)
    assert torch.allclose(torch.tensor(got[str(llama)]["logits"]), mine[0, :3, :5], atol=1e-5)
    assert got[str(t5)]["class"] == "T5ForConditionalGeneration"
    with torch.no_grad():
        enc = t5_tok(TEXT, return_tensors="pt")
        mine = AutoModelForSeq2SeqLM.from_pretrained(t5).eval()(**enc, decoder_input_ids=enc["input_ids"][:, :3]).logits
    assert torch.allclose(torch.tensor(got[str(t5)]["logits"]), mine[0, :3, :5], atol=1e-5)
