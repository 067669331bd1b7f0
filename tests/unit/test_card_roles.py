"""Card rows named by each model's role in its run, read from the stage manifests (training/evaluation/card_roles.py)."""
from __future__ import annotations

import json
from pathlib import Path

from training.evaluation.card_roles import names, role


def _stage(folder: Path, stage: str, hf: bool = True, **config) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"stage": stage, "config": config}))
    if hf:
        (folder / "hf").mkdir()
        return folder / "hf"
    return folder


def test_roles_of_a_runs_models(tmp_path):
    run = tmp_path / "runs" / "demo"
    teacher = _stage(run / "pretrain", "pretrain")
    student = _stage(run / "distill", "distill", teacher=str(teacher))
    tuned = _stage(run / "finetune", "finetune", model=str(teacher))
    student_tuned = _stage(run / "student_finetune", "finetune", model=str(student))
    int8 = _stage(run / "int8", "compress", hf=False, model=str(tuned), method="int8")
    pruned = _stage(run / "pruned", "compress", hf=False, model=str(tuned), method="prune")
    (pruned / "share-0.25").mkdir()
    models = [str(m) for m in (teacher, student, tuned, student_tuned, int8, pruned / "share-0.25")]
    assert names(models) == ["teacher", "student", "fine-tuned", "student fine-tuned", "int8", "pruned 25%"]
    assert role(teacher) == "pretrained"  # no student of it on this card
    assert role(_stage(run / "int8s", "compress", hf=False, model=str(student), method="int8")) == "student, int8"
    # given names win; folders without a manifest are named by their path; no two rows read alike
    plain = tmp_path / "models" / "bert-mini"
    plain.mkdir(parents=True)
    assert names([str(teacher), str(plain)], ["my teacher"]) == ["my teacher", "bert-mini"]
    assert names([str(tuned), str(tuned)]) == ["fine-tuned (hf)", "fine-tuned (hf)"]
