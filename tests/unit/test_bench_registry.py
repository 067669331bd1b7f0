"""bench/registry.py is the one list of benchmarks: each record's module runs (it imports and has `main`), every bench
module with a `main` is registered, `make bench` is derived from it, docs/BENCHES.md describes each, and every bench
module the source and the docs name by path exists (a module that moved leaves no stale `-m bench.x` behind)."""
from __future__ import annotations

import ast
import importlib
import re
import shlex
from pathlib import Path

import pytest

from bench.registry import BENCHES, HELPERS, bench, make_runs

ROOT = Path(__file__).resolve().parents[2]
MODULES = [b.module for b in BENCHES] + [h.module for h in HELPERS]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


BENCH_MODULES = {module_name(p): p for p in (ROOT / "bench").rglob("*.py")}


def test_names_and_modules_are_unique():
    names = [b.name for b in BENCHES]
    assert len(set(names)) == len(names) and len(set(MODULES)) == len(MODULES)
    assert bench("train").module == "bench.train.throughput"
    with pytest.raises(KeyError):
        bench("nope")


@pytest.mark.parametrize("module", MODULES)
def test_every_registered_module_imports_and_has_main(module):
    assert callable(importlib.import_module(module).main)


def test_every_bench_module_with_a_main_is_registered():
    """A module with a top-level `main` is a bench (`lmforge bench <name>`) or a helper a bench runs as a process."""
    def has_main(path: Path) -> bool:
        return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(path.read_text()).body)

    with_main = sorted(name for name, path in BENCH_MODULES.items() if has_main(path))
    assert with_main == sorted(MODULES)


@pytest.mark.parametrize("record", [b for b in BENCHES if b.make is not None], ids=lambda b: b.name)
def test_make_bench_arguments_parse(record):
    """What `make bench` passes each bench is accepted by its parser (`parse(argv)`, which runs nothing)."""
    cfg, _ = importlib.import_module(record.module).parse(list(record.make))
    assert cfg is not None


def test_make_bench_is_derived_from_the_registry(capsys):
    """The Makefile's bench target runs `lmforge bench --make` (no bench by hand), which runs the registry's make
    entries in order, each as its own `lmforge bench` command."""
    import lmforge.cli as cli

    text = (ROOT / "Makefile").read_text()
    target = re.search(r"^bench:.*?\n((?:\t.*\n)+)", text, re.M).group(1)
    assert "$(BIN)/lmforge bench --make\n" in target and "-e '.[bench]'" in target
    assert not re.search(r"lmforge bench [a-z]", text), "a bench named in the Makefile: mark it in bench/registry.py"
    assert cli._bench(["--make", "--dry-run"]) == 0
    said = [shlex.split(line.removeprefix("$ lmforge bench ")) for line in capsys.readouterr().out.splitlines()]
    assert said == [list(argv) for argv in make_runs()]
    assert cli._bench(["--make", "--fast"]) == 2


def test_make_runs_each_in_order_and_stops_at_the_first_failure(monkeypatch, capsys):
    import subprocess
    import sys

    import lmforge.cli as cli

    ran: list[list[str]] = []

    def run(argv):
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 3 if "b" in argv else 0)

    monkeypatch.setattr(subprocess, "run", run)
    assert cli._bench_make([("a",), ("b", "--x", "1"), ("c",)], []) == 3
    assert ran == [[sys.executable, "-m", "lmforge.cli", "bench", "a"],
                   [sys.executable, "-m", "lmforge.cli", "bench", "b", "--x", "1"]]
    assert "`lmforge bench b --x 1` failed (exit 3)" in capsys.readouterr().err


def test_the_help_lists_every_bench(capsys):
    import lmforge.cli as cli

    assert cli._bench(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n  {b.name} " in out and b.summary in out for b in BENCHES)
    assert cli._bench(["nope"]) == 2 and cli._bench([]) == 2
    assert all(b.name in cli._bench_summary() for b in BENCHES)


def test_benches_md_names_every_bench():
    """docs/BENCHES.md is prose, but it describes every registered bench as `lmforge bench <name>`."""
    text = (ROOT / "docs" / "BENCHES.md").read_text()
    missing = [b.name for b in BENCHES if not re.search(rf"`lmforge bench {b.name}\b", text)]
    assert missing == [], f"docs/BENCHES.md: describe `lmforge bench {missing[0] if missing else ''}`"
    named = set(re.findall(r"`lmforge bench ([a-z_]+)", text))
    assert named <= {b.name for b in BENCHES}, f"docs/BENCHES.md names benches the registry lacks: {named}"
    # each bench's bullet says "not in `make bench`" exactly where the registry leaves it out of make
    bullets = dict(re.findall(r"^- `lmforge bench ([a-z_]+)[^:]*?(\([^)]*\))?:", text, re.M))
    assert {name: "not in `make bench`" in said for name, said in bullets.items()} == {
        b.name: b.make is None for b in BENCHES}


# where bench modules are named by path; docs/BENCHMARKS.md and docs/benchmarks/ are left out: results as written,
# whose older sections may name a module of their time (their wording comes from the benches' code, scanned here)
NAMED_IN = ["bench", "lmforge", "flows", "training", "pipelines", "infra", "Makefile", "README.md", "docs/*.md"]
DOTTED = re.compile(r"(?<![\w./-])bench(?:\.[a-z_]+)+")
SLASHED = re.compile(r"(?<![\w./-])bench/[a-z_/]+\.py")


def test_every_bench_module_named_by_path_exists():
    files = [p for pattern in NAMED_IN for p in (ROOT.glob(pattern) if "*" in pattern else [ROOT / pattern])]
    files = [f for p in files for f in (p.rglob("*") if p.is_dir() else [p])
             if f.is_file() and f.suffix in (".py", ".sh", ".md", "") and f.name != "BENCHMARKS.md"]
    stale = []
    for f in files:
        text = f.read_text(errors="replace")
        for m in DOTTED.finditer(text):  # the module itself, or an attribute of one (bench.kit.steps.Steps)
            parts = m.group(0).split(".")
            if not any(".".join(parts[:i]) in BENCH_MODULES for i in range(len(parts), 1, -1)):
                stale.append(f"{f.relative_to(ROOT)}: {m.group(0)}")
        stale += [f"{f.relative_to(ROOT)}: {m.group(0)}" for m in SLASHED.finditer(text)
                  if not (ROOT / m.group(0)).exists()]
    assert stale == []
