"""A credential passed the way Beam's docs pass it (`--s3_secret_access_key=...` on the command line) reaches
the pipeline, and no file or log line: the manifest and the stage's log say `***`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import files_holding

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # new processes: `make test-fast` starts none
KEY_ID, SECRET, TOKEN = "AKIAPLANTED00000001", "planted/secret+access-key42", "planted-session-token-8Tq"


def test_corpus_with_beam_s3_credentials_writes_them_nowhere(tmp_path):
    out = tmp_path / "corpus"
    cmd = [sys.executable, "-m", "lmforge.cli", "corpus", "--input", str(ROOT / "tests/data/tiny"), "--output", str(out),
           f"--s3_access_key_id={KEY_ID}", f"--s3_secret_access_key={SECRET}", "--s3_session_token", TOKEN]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    beam_args = json.loads((out / "manifest.json").read_text())["extra"]["beam_args"]
    assert {"--s3_access_key_id=***", "--s3_secret_access_key=***", "***"} <= set(beam_args), beam_args
    assert "--s3_secret_access_key=***" in proc.stdout  # the stage's "beam args:" line
    for secret in (KEY_ID, SECRET, TOKEN):
        assert not files_holding(secret, out, texts={"stdout": proc.stdout, "stderr": proc.stderr}), secret
