"""Manifests describe their outputs whether the stage directory is given absolute or relative."""
from __future__ import annotations

from schemas.manifest import describe_outputs


def test_describe_outputs_with_a_relative_stage_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stage = tmp_path / "runs" / "x" / "corpus"
    (stage / "data").mkdir(parents=True)
    (stage / "data" / "a.txt").write_text("a")
    (stage / "b.txt").write_text("bb")
    rel = stage.relative_to(tmp_path)
    # `out / name` (relative to the working directory), a name relative to the stage, and an absolute path
    outs = describe_outputs(rel, [rel / "data" / "a.txt", "b.txt", stage / "data" / "a.txt"])
    assert [(o.path, o.bytes) for o in outs] == [("b.txt", 2), ("data/a.txt", 1)]
    assert [o.path for o in describe_outputs(stage, ["b.txt"])] == ["b.txt"]


def test_stage_lock_refuses_a_second_writer(tmp_path):
    import pytest

    from schemas.manifest import StageBusy, stage_lock

    with stage_lock(tmp_path / "ft"):
        with pytest.raises(StageBusy, match="another process is writing"):
            with stage_lock(tmp_path / "ft"):
                pass
    with stage_lock(tmp_path / "ft"):  # released
        pass
