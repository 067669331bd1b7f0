"""How every bench runs `lmforge <stage>`: flows/stages/runner.py's subprocess, log, skip rule and one-line failure.

    steps = Steps("train", Path(work, "logs"))
    corpus = steps.run("corpus", d / "corpus", ["corpus", "--input", ..., "--output", str(d / "corpus")])
    tok = steps.run("tokenizer", d / "tokenizer", ["tokenizer", "--corpus", str(corpus), ...])  # reads corpus

`run_command` / `run_cli` run one child (flows.stages.runner.run_logged: stdout and stderr to its log, redacted, SIGTERM
passed on), timed from its start to its exit, optionally with the peak RSS of its process tree (bench scale);
a non-zero exit is `StageFailed`: the stage, its own error line, its log. `Steps` adds the skip rule of the flows
(flows.stages.runner.stage_key / unchanged): a finished step (its manifest) is kept while its command and the manifests
of the steps it reads are the same; the key goes to `.flow-key.json` beside its manifest.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.redact import redact_args
from flows.stages.runner import FLOW_KEY, StageFailed, failure_reason, run_logged, stage_key, unchanged
from schemas.manifest import MANIFEST_NAME, atomic_write_json, read_manifest

ROOT = Path(__file__).resolve().parents[2]
LEGACY_ARGV_FILE = ".bench-argv.json"
"""What bench train and bench transfer kept beside a finished step before `.flow-key.json`: its command. A step
with it, and no key, is kept when the command matches and nothing it reads ran again (then it gets its key)."""
ENV = {"TOKENIZERS_PARALLELISM": "false"}


@dataclass
class Run:
    """One finished child: its log, its seconds from start to exit, its exit code, its memory sampler (or None)."""

    log: Path
    seconds: float
    rc: int
    rss: Any = None
    """bench.kit.peak_rss.PeakRSS with `rss_limit`: peaks over the child's process tree; `killed_at` > 0 if it passed the limit."""


def run_command(name: str, cmd: list[str], log: Path, *, env: dict[str, str] | None = None, cwd: str | Path | None = None,
                append: bool = False, rss_limit: int | None = None) -> Run:
    """`cmd` with stdout and stderr to `log` (flows.stages.runner.run_logged); StageFailed in one line if it exits non-zero.

    rss_limit: None measures no memory; 0 samples the peak RSS of the child's tree every 0.2 s (bench.kit.peak_rss);
    > 0 also kills the tree when it passes that many bytes, and then returns (run.rss.killed_at says so)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with open(log, "a") as f:
            f.write("$ " + " ".join(redact_args(cmd)) + "\n")
    sampler = None

    def watch(proc: subprocess.Popen) -> None:
        nonlocal sampler
        from bench.kit.peak_rss import PeakRSS

        sampler = PeakRSS(proc.pid, limit=rss_limit or 0)
        sampler.start()

    t0 = time.perf_counter()
    try:
        rc = run_logged(cmd, log, name, echo=False, append=append, env={**ENV, **(env or {})}, cwd=cwd,
                        on_start=None if rss_limit is None else watch)
        seconds = time.perf_counter() - t0
    finally:
        if sampler is not None:
            sampler.stop()
    if rc != 0 and not (sampler is not None and sampler.killed_at):
        raise StageFailed(name, failure_reason(log), log, rc)
    return Run(log, seconds, rc, sampler)


def run_cli(name: str, argv: list[str], log: Path, **options: Any) -> Run:
    """`lmforge <argv>` (this interpreter, `-m lmforge.cli`) through `run_command`."""
    return run_command(name, [sys.executable, "-m", "lmforge.cli", *argv], log, **options)


def settings(argv: list[str]) -> list[str]:
    """A step's command without `--resume` (how a step was continued is not one of its settings)."""
    return [a for a in argv if a != "--resume"]


class Steps:
    """One bench's `lmforge <stage>` steps, each into its directory; a finished step with the same key is kept.

    resume=False refuses to touch a finished step (bench transfer without --resume); keep_partial leaves an
    unfinished directory for the stage to continue (pretraining checkpoints), else it is emptied first;
    append_logs keeps every attempt in the step's log."""

    def __init__(self, bench: str, logs: Path, *, resume: bool = True, keep_partial: bool = False,
                 append_logs: bool = False, cwd: Path | None = ROOT):
        self.bench, self.logs, self.resume = bench, Path(logs), resume
        self.keep_partial, self.append_logs, self.cwd = keep_partial, append_logs, cwd
        self.timings: dict[str, float] = {}
        """Seconds of each step: this run's, or a kept step's own (its manifest's wall_seconds)."""
        self.ran: list[str] = []
        """Steps this invocation ran (not finished earlier)."""
        self.ran_outputs: list[str] = []
        self.outputs: list[str] = []
        """Every step directory this invocation ran or kept: a later step naming one (or a path below it) reads it."""

    def done(self, out: Path) -> bool:
        return (Path(out) / MANIFEST_NAME).exists()

    def upstream(self, argv: list[str]) -> list[str]:
        return [o for o in self.outputs if any(a == o or a.startswith(o + os.sep) for a in argv)]

    def key(self, argv: list[str]) -> dict:
        return stage_key(argv[0], settings(argv), self.upstream(argv))

    def stale(self, out: Path, argv: list[str]) -> str:
        """Why a finished step must run again ("" if it need not): its settings changed, or a step it reads changed."""
        key = self.key(argv)
        if unchanged(out, key):
            return ""
        if (out / FLOW_KEY).exists():
            old = json.loads((out / FLOW_KEY).read_text())
            if old.get("cmd") != key["cmd"]:
                return f"its settings changed ({out / FLOW_KEY})"
            changed = [u for u, h in key["upstream"].items() if old.get("upstream", {}).get(u) != h]
            return f"it reads {', '.join(changed)}, which ran again" if changed else "its inputs changed"
        legacy = out / LEGACY_ARGV_FILE
        if not legacy.exists():
            return "no record of the command that made it"
        if json.loads(legacy.read_text()) != settings(argv):
            return f"its settings changed ({legacy})"
        again = [o for o in self.upstream(argv) if o in self.ran_outputs]
        return f"it reads {', '.join(again)}, which ran again" if again else ""

    def run(self, name: str, out: Path, argv: list[str]) -> Path:
        """`lmforge <argv>` into `out` unless a finished run with the same key is there; returns `out`."""
        out = Path(out)
        key = self.key(argv)
        if self.done(out):
            if not self.resume:
                raise SystemExit(f"bench {self.bench}: {out} is finished from an earlier run; pass --resume to keep it "
                                 f"or --fresh to start over")
            why = self.stale(out, argv)
            if not why:
                return self._keep(name, out, key)
            print(f"[{name}] finished earlier, but {why}: running it again from nothing", flush=True)
            # nothing of the old settings may survive, e.g. pretraining checkpoints a later --resume would load
            shutil.rmtree(out)
        elif not self.keep_partial:
            shutil.rmtree(out, ignore_errors=True)
        (out / FLOW_KEY).unlink(missing_ok=True)
        log = self.logs / f"{name}.log"
        print(f"[{name}] lmforge {' '.join(redact_args(argv))}  (log: {log})", flush=True)
        try:
            r = run_cli(name, argv, log, cwd=self.cwd, append=self.append_logs)
        except StageFailed as e:
            raise SystemExit(f"bench {self.bench}: {e}") from None
        self.timings[name] = round(r.seconds, 1)
        self.ran.append(name)
        self.ran_outputs.append(str(out))
        self.outputs.append(str(out))
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / FLOW_KEY, key)
        print(f"[{name}] {r.seconds:.0f} s", flush=True)
        return out

    def _keep(self, name: str, out: Path, key: dict) -> Path:
        print(f"[{name}] done earlier: {out}", flush=True)
        if not (out / FLOW_KEY).exists():  # a step of the bench before .flow-key.json: its key from now on
            atomic_write_json(out / FLOW_KEY, key)
        # the step's own wall time, so that a resumed run still reports what the whole bench cost
        took = read_manifest(out).get("wall_seconds")
        if took is not None:
            self.timings[name] = round(float(took), 1)
        self.outputs.append(str(out))
        return out


def code_version() -> str:
    """`git describe --always --dirty` of this checkout: the code a bench's rows measure."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip() or "unknown (not a git checkout)"
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
