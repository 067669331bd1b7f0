"""Every bench's options come from its typed config (bench/kit/options.py over common.config): a misspelt option is one
line naming the closest known one, `--config FILE` sets a field, and the flags other code passes still parse."""
from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# module, the options it cannot run without, a misspelt option, the option it means, a field and a value for --config
BENCHES = [
    ("bench.train.attention", [], "--stesp", "--steps", "steps", 7),
    ("bench.corpus.cleaning", [], "--dosc", "--docs", "docs", 50),
    ("bench.corpus.extraction", [], "--gold-dri", "--gold", "gold", "some/gold"),
    ("bench.corpus.hostile", [], "--peer-secnods", "--peer-seconds", "size", 200_000),
    ("bench.corpus.langid", [], "--per-sorce", "--per-source", "per_source", 9),
    ("bench.corpus.scale", [], "--szies", "--sizes", "sizes", [10, 20]),
    ("bench.data.tokenizer", [], "--vocab-szie", "--vocab-size", "vocab_size", 4000),
    ("bench.train.hf_trainer", ["--shards", "s", "--tokenizer", "t", "--model", "demo", "--steps", "3", "--warmup", "1",
                        "--out", "r.json"], "--micro-bacth-size", "--micro-batch-size", "lr", 0.5),
    ("bench.train.step_peers", ["--system", "plain", "--shards", "s", "--tokenizer", "t", "--model", "tiny",
                          "--micro-batch-size", "4", "--out", "r.json"], "--warmpu", "--warmup", "profile", 3),
    ("bench.train.gpu", [], "--varients", "--variants", "variants", ["plain", "lmforge"]),
    ("bench.train.throughput", [], "--presest", "--presets", "presets", ["tiny"]),
    ("bench.transfer.payoff", [], "--seesd", "--seeds", "seeds", [4]),
]
IDS = [b[0] for b in BENCHES]


@pytest.mark.parametrize(("module", "needed", "typo", "meant", "field", "value"), BENCHES, ids=IDS)
def test_a_misspelt_option_is_one_line_naming_the_closest(module, needed, typo, meant, field, value, capsys):
    parse = importlib.import_module(module).parse
    with pytest.raises(SystemExit) as e:
        parse([*needed, typo, "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"unknown option {typo}; did you mean {meant}?" in err, err


@pytest.mark.parametrize(("module", "needed", "typo", "meant", "field", "value"), BENCHES, ids=IDS)
def test_config_file_sets_a_field(module, needed, typo, meant, field, value, tmp_path):
    parse = importlib.import_module(module).parse
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({field: value}))
    cfg, _ = parse([*needed, "--config", str(path)])
    assert getattr(cfg, field) == value
    path.write_text(json.dumps({field + "_typo": value}))
    with pytest.raises(SystemExit):  # a key the config does not have is an error, never ignored
        parse([*needed, "--config", str(path)])


def test_the_flags_other_code_passes_still_parse():
    """bench.train.gpu and bench.train.host_work run bench.train.step_peers with these flags, bench.train.throughput
    runs bench.train.hf_trainer, the Makefile and infra/gpu/run.sh run the others; old store_true flags keep their
    spelling (and gain --no-)."""
    from bench.corpus import scale
    from bench.train import gpu, hf_trainer, step_peers

    cfg, ns = step_peers.parse(["--system", "hf_trainer", "--shards", "s", "--tokenizer", "t", "--model", "bert_base",
                                "--micro-batch-size", "64", "--warmup", "10", "--profile", "3", "--steps", "20",
                                "--out", "o.json", "--bf16", "--compile"])
    assert (cfg.system, cfg.micro_batch_size, cfg.bf16, cfg.compile, cfg.device, ns.out) == (
        "hf_trainer", 64, True, True, "auto", "o.json")
    cfg, _ = step_peers.parse(["--system", "plain", "--shards", "s", "--tokenizer", "t", "--model", "tiny",
                               "--micro-batch-size", "4", "--bf16", "--dropout", "0", "--device", "cpu", "--out", "o",
                               "--no-bf16"])
    assert (cfg.bf16, cfg.compile, cfg.dropout, cfg.device, cfg.steps, cfg.warmup) == (False, False, 0.0, "cpu", 20, 5)
    cfg, ns = hf_trainer.parse(["--shards", "s", "--tokenizer", "t", "--model", "demo", "--micro-batch-size", "16",
                              "--steps", "60", "--warmup", "10", "--out", "r.json", "--dropout", "-1.0"])
    assert (cfg.steps, cfg.warmup, cfg.lr, ns.out) == (60, 10, 1e-3, "r.json")
    cfg, ns = gpu.parse(["--corpus", ".carry/c", "--work", "/tmp/bg", "--minutes", "7.5", "--variants", "plain"])
    assert (cfg.variants, cfg.minutes, ns.no_report) == (["plain"], 7.5, False)
    cfg, ns = scale.parse(["--incremental-sizes", "--check-modes", "3", "--resume"])
    assert (cfg.incremental_sizes, cfg.check_modes, cfg.sizes, ns.resume) == ([], 3, [10_000, 100_000, 1_000_000], True)


@pytest.mark.parametrize(("module", "argv", "says"), [
    ("bench.train.step_peers", ["--system", "plain", "--shards", "s", "--tokenizer", "t", "--model", "m",
                          "--micro-batch-size", "4"], "missing required option(s): --out"),
    ("bench.train.step_peers", ["--system", "other", "--shards", "s", "--tokenizer", "t", "--model", "m",
                          "--micro-batch-size", "4", "--out", "o"], "--system other: choose from plain, hf_trainer"),
    ("bench.train.hf_trainer", ["--shards", "s", "--out", "o"], "missing required option(s): --tokenizer, --model"),
    ("bench.train.gpu", ["--variants", "plain", "fast"], "--variants: unknown fast"),
    ("bench.data.tokenizer", ["--vocab-size", "10"], "--vocab-size 10 is too small"),
    ("bench.train.attention", ["--steps", "0"], "--steps must be >= 1"),
])
def test_a_bad_value_is_one_line(module, argv, says, capsys):
    with pytest.raises(SystemExit):
        importlib.import_module(module).parse(argv)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


def test_no_two_bench_classes_share_a_name():
    seen: dict[str, str] = {}
    for path in sorted((ROOT / "bench").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                assert node.name not in seen, f"{node.name} in {name} and {seen[node.name]}"
                seen[node.name] = name
