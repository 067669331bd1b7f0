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


def test_missing_input_is_one_line_not_a_traceback(tmp_path, capsys):
    assert main(["corpus", "--input", str(tmp_path / "nothing-here"), "--output", str(tmp_path / "o")]) == 2
    assert "matches no file" in capsys.readouterr().err


def test_config_file_and_flags(tmp_path):
    import argparse

    from lmforge.config import add_config_args, config_from_args
    from pipelines.shards.stage import ShardsConfig

    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({"corpus": "c", "tokenizer": "t", "output": "o", "seq_len": 256, "mask": {"rate": 0.3}}))
    p = argparse.ArgumentParser()
    add_config_args(p, ShardsConfig)
    cfg = config_from_args(ShardsConfig, p.parse_args(["--config", str(cfg_file), "--mask-num-variants", "4"]))
    assert (cfg.seq_len, cfg.mask.rate, cfg.mask.num_variants) == (256, 0.3, 4)
    with pytest.raises(ValueError, match="rate"):
        config_from_args(ShardsConfig, p.parse_args(["--config", str(cfg_file), "--mask-rate", "0.9"]))


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


def test_prefect_deployment_file_points_at_the_flow():
    import yaml

    spec = yaml.safe_load((ROOT / "infra" / "prefect" / "prefect.yaml").read_text())
    for d in spec["deployments"]:
        path, func = d["entrypoint"].split(":")
        assert (ROOT / path).exists() and f"def {func}(" in (ROOT / path).read_text()
    json.loads((ROOT / "infra" / "deepspeed" / "zero2_cpu.json").read_text())


def test_dag_wires_init_from_and_the_labeled_task(tmp_path, monkeypatch):
    """The flow's wiring alone (`lmforge_dag.fn` with the stage launcher recorded, nothing run): with
    init_from the tokenizer stage adopts that model's tokenizer and pretraining starts from its
    weights; a known labelled source is prepared first and fine-tuning reads its finetune.json."""
    import flows.dag as dag

    calls: list[tuple[str, dict, list]] = []

    def fake_launch(stage, opts, out, argv=()):
        calls.append((stage, opts, list(argv)))
        Path(out).mkdir(parents=True, exist_ok=True)
        if stage == "labeled":
            (Path(out) / "finetune.json").write_text("{}")
        if stage == "evaluate":
            (Path(out) / "report.md").write_text("# report\n")
        return str(out)

    monkeypatch.setattr(dag, "launch_stage", fake_launch)
    monkeypatch.setattr(dag, "create_markdown_artifact", lambda **kw: None)
    dag.lmforge_dag.fn(dag.DagParams(run_name="w", runs_dir=str(tmp_path), preset="tiny", init_from="/models/minilm"))
    by_stage = {stage: (opts, argv) for stage, opts, argv in calls}
    assert by_stage["tokenizer"][0] == {"from_model": "/models/minilm", "output": tmp_path.resolve() / "w" / "tokenizer"}
    assert by_stage["pretrain"][0]["init_from"] == "/models/minilm"
    assert by_stage["labeled"][1] == ["prepare", "vader"]
    assert by_stage["finetune"][0]["config"] == tmp_path.resolve() / "w" / "labeled" / "vader" / "finetune.json"
    assert [c[0] for c in calls][:4] == ["corpus", "tokenizer", "shards", "pretrain"]
