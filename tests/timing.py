"""docs/TESTING.md's tables from a run's durations (what `make test` writes with `--durations-json`).

    python -m tests.timing .pytest_cache/lmforge-durations.json [--files 30] [--tests 25]

Prints markdown: the run's line, the seconds per file (largest first) and the slowest tests.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def tables(doc: dict, files: int = 30, tests: int = 25) -> str:
    def short(name: str) -> str:
        return name.removeprefix("tests/")

    by_file = sorted(doc["files"].items(), key=lambda kv: -kv[1])
    lines = [f"{len(doc['tests'])} tests, {doc.get('wall_seconds', 0) / 60:.1f} min wall on {doc.get('workers', 1)} "
             f"worker(s), {sum(doc['files'].values()) / 60:.1f} min of test time summed ({doc.get('date', '?')})", "",
             "| s | file |", "|---:|---|"]
    lines += [f"| {s:.1f} | `{short(f)}` |" for f, s in by_file[:files]]
    rest = by_file[files:]
    if rest:
        lines.append(f"| {sum(s for _, s in rest):.1f} | the other {len(rest)} files |")
    lines += ["", "| s | test |", "|---:|---|"]
    lines += [f"| {s:.1f} | `{short(t)}` |" for t, s in sorted(doc["tests"].items(), key=lambda kv: -kv[1])[:tests]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.timing", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("durations", type=Path, help="a --durations-json file")
    ap.add_argument("--files", type=int, default=30, help="files listed (default: %(default)s)")
    ap.add_argument("--tests", type=int, default=25, help="tests listed (default: %(default)s)")
    a = ap.parse_args(argv)
    print(tables(json.loads(a.durations.read_text()), a.files, a.tests))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
