"""common/cache.py: values derived once per machine, and the LSH parameters kept there."""
from __future__ import annotations

import json
import os

import pytest

from common.cache import cache_dir, remembered


def test_remembered_computes_once_and_survives_a_broken_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return [16, 8]

    assert remembered("t", "k", compute) == [16, 8]
    assert remembered("t", "k", compute) == [16, 8]
    assert len(calls) == 1
    assert json.loads(cache_dir("t.json").read_text()) == {"k": [16, 8]}
    cache_dir("t.json").write_text("{half a file")
    assert remembered("t", "k", compute) == [16, 8] and len(calls) == 2
    assert remembered("t", "other", lambda: 3) == 3
    assert json.loads(cache_dir("t.json").read_text()) == {"k": [16, 8], "other": 3}


def test_lsh_params_from_the_cache_are_datasketchs(tmp_path, monkeypatch):
    from datasketch.lsh import _optimal_param

    from pipelines.corpus.dedup import lsh_params

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for threshold, num_perm in ((0.8, 128), (0.7, 128), (0.5, 64), (0.9, 256)):
        want = tuple(int(x) for x in _optimal_param(threshold, num_perm, 0.05, 0.95))
        assert lsh_params(threshold, num_perm) == want  # computed
        assert lsh_params(threshold, num_perm) == want  # read back
    assert len(json.loads(cache_dir("lsh_params.json").read_text())) == 4


def test_deepspeed_ops_are_built_once_per_python_environment(tmp_path, monkeypatch):
    import sys

    from common.cache import torch_extensions_dir
    from lmforge.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    here = torch_extensions_dir()
    assert here.parent == tmp_path / "torch_extensions"
    monkeypatch.setattr(sys, "prefix", "/another/venv")
    assert torch_extensions_dir() != here and torch_extensions_dir().parent == here.parent
    monkeypatch.undo()
    # a training command points torch's JIT builds at this environment's folder, unless the user chose one
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for name in ("TORCH_EXTENSIONS_DIR", "DS_ACCELERATOR"):  # set, then removed: restored as they were afterwards
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(here)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "mine"))
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "mine")
