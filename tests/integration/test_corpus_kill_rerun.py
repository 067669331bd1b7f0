"""A killed corpus job leaves nothing that looks complete; a rerun finishes the work."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny" / "tiny.warc.gz"


@pytest.mark.slow
def test_kill_then_rerun(tmp_path):
    from schemas.manifest import read_manifest, verify_outputs

    out = tmp_path / "corpus"
    cmd = [sys.executable, "-m", "lmforge.cli", "corpus", "--input", str(TINY), "--output", str(out)]
    # A finished run first, so the killed one starts from a directory that looked complete.
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    before = {o["path"]: o["sha256"] for o in read_manifest(out)["outputs"]}

    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # Kill once the new run has taken ownership of the directory (its first act is to remove
    # the old manifest), then a little later, while Beam is running.
    deadline = time.time() + 60
    while (out / "manifest.json").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, "the run finished before it could be killed"
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "manifest.json").exists(), "a killed run must not leave a manifest"
    with pytest.raises(FileNotFoundError):
        read_manifest(out)

    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    verify_outputs(out)
    assert {o["path"]: o["sha256"] for o in read_manifest(out)["outputs"]} == before
    assert not list(out.rglob("*.tmp")), "no temporary files left behind"
