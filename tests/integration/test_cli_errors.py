"""Every command answers a mistake in one line (issue 29): a wrong path, a stage that has not finished,
and a file that cannot be read as what it should be, for corpus, tokenizer, shards, pretrain, finetune,
distill, evaluate and run, each run as a user runs it (a new process). The last line names the
problem; nothing else is printed (no traceback, no torchrun summary, no usage block); nothing runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import make_shards, make_tokenizer, vader_texts

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # new processes: `make test-fast` starts none


def lmforge(*args: str, cwd: Path) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LMFORGE_TRACEBACK", None)
    p = subprocess.run([sys.executable, "-m", "lmforge.cli", *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=300)
    return p.returncode, [line for line in (p.stdout + p.stderr).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    t = tmp_path_factory.mktemp("cli-errors")
    (t / "unfinished").mkdir()  # a stage folder with no manifest.json
    (t / "broken.json").write_text('{"model": "x",')  # not JSON
    with open(t / "data.jsonl", "w") as f:  # real labelled rows for finetune, whose model is what is wrong
        for i, text in enumerate(vader_texts(n=40)):
            f.write(json.dumps({"text": text, "label": ["neg", "pos"][i % 2]}) + "\n")
    return t


def cases(t: Path, out: Path) -> dict[str, dict[str, list]]:
    """command -> case -> arguments; a stage's unreadable file is its --config, which is not JSON. For
    each stage: (its input options, with `{}` where the wrong or unfinished path goes)."""
    nope, unfinished, broken = t / "nope", t / "unfinished", t / "broken.json"
    inputs = {"corpus": ["--input", "{}"], "tokenizer": ["--corpus", "{}"], "shards": ["--corpus", "{}", "--tokenizer", "{}"],
              "pretrain": ["--shards", "{}", "--tokenizer", "{}"], "finetune": ["--model", "{}", "--data", t / "data.jsonl"],
              "distill": ["--teacher", "{}", "--shards", "{}"], "evaluate": ["--run", "{}"]}

    def given(stage: str, path: Path) -> list:
        return [path if a == "{}" else a for a in inputs[stage]] + ["--output", out]

    table = {stage: {"wrong path": given(stage, nope), "unfinished": given(stage, unfinished), "unreadable": ["--config", broken]}
             for stage in inputs}
    # the corpus reads crawl, not a stage: its unfinished input is an evaluation set's folder
    table["corpus"]["unfinished"] = ["--input", ROOT / "samples/crawl", "--output", out, "--decontaminate", unfinished]
    table["run"] = {"wrong path": ["--crawl", nope, "--runs-dir", out],
                    "unfinished": ["--flow", "train", "--param", f"shards={unfinished}", "--param", f"tokenizer={unfinished}",
                                   "--runs-dir", out],
                    "unreadable": ["--labeled", broken, "--crawl", ROOT / "samples/crawl", "--runs-dir", out]}
    return table


COMMANDS = ["corpus", "tokenizer", "shards", "pretrain", "finetune", "distill", "evaluate", "run"]
CASES = ["wrong path", "unfinished", "unreadable"]


def out_dir(places: Path, command: str, case: str) -> Path:
    return places / f"out-{command}-{case.replace(' ', '-')}"


@pytest.fixture(scope="module")
def answers(places, prefect_api) -> dict[tuple[str, str], tuple[int, list[str]]]:
    """Every (command, case)'s exit code and output, three commands at a time: each is a process that starts
    Python, torch and its stage and fails, mostly start-up, so two cores overlap them. The `run` cases talk to the
    session's Prefect server (PREFECT_API_URL), not each an ephemeral one on one database."""
    from concurrent.futures import ThreadPoolExecutor

    def one(key: tuple[str, str]) -> tuple[int, list[str]]:
        command, case = key
        return lmforge(command, *cases(places, out_dir(places, command, case))[command][case], cwd=places)

    keys = [(command, case) for command in COMMANDS for case in CASES]
    with ThreadPoolExecutor(3) as pool:
        return dict(zip(keys, pool.map(one, keys)))


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", CASES)
def test_one_line_error(places, answers, command, case):
    out = out_dir(places, command, case)
    code, lines = answers[(command, case)]
    assert code != 0
    assert len(lines) == 1 and lines[-1].startswith(f"lmforge {command}: error: "), "\n".join(lines)
    named = {"wrong path": "nope", "unfinished": "unfinished", "unreadable": "broken.json"}[case]
    assert named in lines[-1], lines[-1]
    assert not out.exists(), f"{out} was written"


def test_a_workers_error_reaches_the_user_as_its_message(tmp_path):
    """Shards damaged after the stage wrote them: every rank finds the checksum mismatch (after the
    launcher's checks, which read only the manifest). The user sees that rank's message in one line,
    the tracebacks of both ranks and torchrun's summary only in the launch log."""
    tok = make_tokenizer(tmp_path / "tok")
    shards = make_shards(tmp_path / "shards", tok)
    victim = next((shards / "train").glob("*.arrow"))
    victim.write_bytes(victim.read_bytes()[:-10] + b"0123456789")
    code, lines = lmforge("pretrain", "--shards", shards, "--tokenizer", tok, "--output", tmp_path / "pre", "--model", "tiny",
                          "--steps", "2", cwd=tmp_path)
    errors = [line for line in lines if line.startswith("lmforge pretrain: error:")]
    assert code == 1 and len(errors) == 1 and lines[-1] == errors[0], "\n".join(lines)
    assert "checksum mismatch" in errors[0] and victim.name in errors[0] and "launch.log" in errors[0]
    assert not any("Traceback" in line or "ChildFailedError" in line for line in lines), "\n".join(lines)
    log = (tmp_path / "pre" / "launch.log").read_text()
    assert log.count("Traceback (most recent call last)") >= 2 and "ChildFailedError" in log
