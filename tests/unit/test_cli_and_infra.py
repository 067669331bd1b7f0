"""Every stage has --help; configs validate; infra option files parse for their tools."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmforge.cli import STAGES, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("stage", [*STAGES, "run"])
def test_every_stage_has_help(stage, capsys):
    with pytest.raises(SystemExit) as e:
        main([stage, "--help"])
    assert e.value.code == 0
    assert "--" in capsys.readouterr().out


def test_missing_required_option_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["tokenizer", "--output", "x"])
    assert e.value.code == 2
    assert "corpus" in capsys.readouterr().err


def test_stage_flag_with_underscores_is_not_passed_to_beam(capsys):
    with pytest.raises(SystemExit) as e:
        main(["corpus", "--input", "x", "--output", "y", "--line_dedup"])
    assert e.value.code == 2 and "--line-dedup" in capsys.readouterr().err


@pytest.mark.parametrize("command,misspelt,meant", [
    *((stage, "--outptu", "--output") for stage in ("corpus", "tokenizer", "shards", "pretrain", "finetune", "distill", "evaluate")),
    ("corpus", "--line-dedupe", "--line-dedup"), ("shards", "--direct_num_worker=2", "--direct_num_workers"),
    ("run", "--runs-dri", "--runs-dir")])
def test_a_misspelt_option_fails_in_one_line_naming_the_closest(command, misspelt, meant, tmp_path, capsys):
    """Before, the Beam stages handed an option they did not know to Beam, which dropped it with a
    warning: `corpus --line-dedupe` wrote a corpus without line dedup. Now nothing runs."""
    with pytest.raises(SystemExit) as e:
        main([command, misspelt, "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and not (tmp_path / "o").exists()
    assert err.count("\n") == 1 and f"unknown option {misspelt.split('=')[0]}; did you mean {meant}?" in err, err


def test_beam_options_still_pass_through(tmp_path, capsys):
    assert main(["corpus", "--input", str(tmp_path / "none"), "--output", str(tmp_path / "o"), "--direct_num_workers", "1",
                 "--no_pipeline_type_check"]) == 2
    assert "matches no file" in capsys.readouterr().err  # the flags were Beam's: the input was what failed


def test_unknown_command_and_stray_word(capsys):
    with pytest.raises(SystemExit):
        main(["corpse"])
    assert "did you mean 'corpus'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["tokenizer", "stray", "--output", "x"])
    err = capsys.readouterr().err
    assert "unexpected argument 'stray'" in err and err.count("\n") == 1


def test_missing_input_is_one_line_not_a_traceback(tmp_path, capsys):
    assert main(["corpus", "--input", str(tmp_path / "nothing-here"), "--output", str(tmp_path / "o")]) == 2
    assert "matches no file" in capsys.readouterr().err


def test_config_file_and_flags(tmp_path):
    import argparse

    from common.config import add_config_args, config_from_args
    from pipelines.shards.stage import ShardsConfig

    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({"corpus": "c", "tokenizer": "t", "output": "o", "seq_len": 256, "mask": {"rate": 0.3}}))
    p = argparse.ArgumentParser()
    add_config_args(p, ShardsConfig)
    cfg = config_from_args(ShardsConfig, p.parse_args(["--config", str(cfg_file), "--mask-num-variants", "4"]))
    assert (cfg.seq_len, cfg.mask.rate, cfg.mask.num_variants) == (256, 0.3, 4)
    with pytest.raises(ValueError, match="rate"):
        config_from_args(ShardsConfig, p.parse_args(["--config", str(cfg_file), "--mask-rate", "0.9"]))


def test_config_file_keys_are_never_silently_ignored(tmp_path, capsys):
    """A stage's --config holding Beam options (or a misspelt key) is refused, naming the file and the keys;
    before, `corpus --config infra/beam/dataflow.json` ran on the DirectRunner without a word."""
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({"input": ["x"], "output": "o", "runner": "DataflowRunner", "num_shard": 3}))
    with pytest.raises(SystemExit):
        main(["corpus", "--config", str(cfg_file)])
    err = capsys.readouterr().err
    assert f"--config {cfg_file}: CorpusConfig has no option num_shard, runner" in err and "--beam-options" in err


@pytest.mark.parametrize("name", ["direct", "dataflow", "flink", "spark"])
def test_beam_runner_option_files_parse(name):
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    opts = json.loads((ROOT / "infra" / "beam" / f"{name}.json").read_text())
    args = []
    for k, v in opts.items():
        for item in v if isinstance(v, list) else [v]:
            args.append(f"--{k}={item}")
    po = PipelineOptions(args)
    assert po.view_as(StandardOptions).runner == opts["runner"]
    unknown = [a for a in args if a.split("=")[0][2:] not in po.get_all_options()]
    assert not unknown, f"options Beam does not know: {unknown}"


@pytest.mark.parametrize("name", ["zero2_cpu", "zero3_cpu", "zero2_cuda_bf16"])
def test_each_deepspeed_file_is_merged_over_the_defaults(name):
    """--deepspeed-config FILE: the file's values reach the engine's config unchanged, on top of lmforge's
    defaults, and its batch shape, stage and precision become the run's options."""
    from training.pretraining.pretrain import PretrainConfig
    from training.runtime.ds_config import deepspeed_config

    path = ROOT / "infra" / "deepspeed" / f"{name}.json"
    user = json.loads(path.read_text())
    cfg = PretrainConfig(shards="s", tokenizer="t", output="o", deepspeed_config=str(path))
    merged = deepspeed_config(cfg)

    def contains(big, small):
        return all(contains(big[k], v) if isinstance(v, dict) else big.get(k) == v for k, v in small.items())

    assert contains(merged, user)
    assert merged["zero_allow_untested_optimizer"] is True  # a default the file does not set survives
    assert cfg.micro_batch_size == user["train_micro_batch_size_per_gpu"]
    assert cfg.zero_stage == user["zero_optimization"]["stage"] and cfg.bf16 == user["bf16"]["enabled"]


@pytest.mark.parametrize("name", ["direct", "dataflow", "flink", "spark"])
def test_each_beam_options_file_reaches_pipeline_options_unchanged(name):
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.beam_options import beam_args_from_file

    opts = json.loads((ROOT / "infra" / "beam" / f"{name}.json").read_text())
    got = PipelineOptions(beam_args_from_file(ROOT / "infra" / "beam" / f"{name}.json")).get_all_options()
    for key, value in opts.items():
        assert got[key] == value, (key, got[key], value)


def test_beam_options_reach_the_stage_and_command_line_flags_win(tmp_path, monkeypatch, capsys):
    import pipelines.corpus.stage as stage

    seen = {}
    monkeypatch.setattr(stage, "run", lambda cfg, beam_args: seen.setdefault("args", beam_args) and tmp_path)
    f = ROOT / "infra" / "beam" / "direct.json"
    assert main(["corpus", "--input", str(tmp_path), "--output", str(tmp_path / "o"), "--beam-options", str(f),
                 "--direct_num_workers=2"]) == 0
    args = seen["args"]
    assert args[:3] == ["--runner=DirectRunner", "--direct_num_workers=1", "--direct_running_mode=in_memory"]
    assert args[-1] == "--direct_num_workers=2"  # later on the command line: Beam takes it
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

    assert PipelineOptions(args).view_as(DirectOptions).direct_num_workers == 2

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"runner": "DirectRunner", "no_such_beam_option": 3}))
    with pytest.raises(SystemExit):
        main(["corpus", "--input", str(tmp_path), "--output", str(tmp_path / "o"), "--beam-options", str(bad)])
    assert f"--beam-options {bad}: Beam does not know no_such_beam_option" in capsys.readouterr().err
