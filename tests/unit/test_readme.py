"""README.md stays a front door: short, every command in it runs as written, every link in it (and in the pages
it links to) leads somewhere.

A command is checked the way a reader would type it, without running it: `make X` needs a Makefile target X, and
`lmforge ...` goes through lmforge's own parsers (lmforge.cli.main) up to the end of its argument parsing, where
the test stops it. Links are checked on disk, and a `#fragment` against the target page's headings as GitHub
names them (lowercased, punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 210  # issue 53: a front door of about 200 lines; the rest lives in docs/

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def fenced_lines(text: str) -> list[str]:
    """The lines inside ``` fences, a backslash continuation joined to its line."""
    out: list[str] = []
    inside, pending = False, ""
    for line in text.splitlines():
        if FENCE.match(line):
            inside, pending = not inside, ""
            continue
        if not inside:
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


def commands(text: str) -> list[list[str]]:
    """Each fenced line that runs `lmforge` or `make` (after any VAR=value and a `.venv/bin/` prefix), as argv."""
    found = []
    for line in fenced_lines(text):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # not shell (a diagram, JSON)
            continue
        while words and ENV_ASSIGNMENT.match(words[0]):
            words = words[1:]
        if words and words[0].startswith(".venv/bin/"):
            words[0] = words[0].removeprefix(".venv/bin/")
        if words and words[0] in ("lmforge", "make"):
            found.append(words)
    return found


def make_targets(makefile: Path) -> set[str]:
    """Explicit targets: `name [name...]:` at the start of a line, not a `:=` assignment."""
    targets: set[str] = set()
    for line in makefile.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*)[ \t]*:(?!=)", line)
        if m and not line.startswith((".PHONY", "\t")):
            targets.update(m.group(1).split())
    return targets


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a markdown page's headings (those outside code fences)."""
    names: set[str] = set()
    repeats: dict[str, int] = {}
    inside = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if inside or not m:
            continue
        base = slug(m.group(1))
        n = repeats.get(base, 0)
        repeats[base] = n + 1
        names.add(base if n == 0 else f"{base}-{n}")
    return names


def broken_links(page: Path) -> list[str]:
    """The page's relative links whose file, or whose heading in that file, does not exist."""
    bad = []
    text = page.read_text()
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{page.relative_to(ROOT)}: {target} (no such heading in {os.path.relpath(dest, ROOT)})")
    return bad


def linked_pages(page: Path) -> list[Path]:
    """The markdown files of this repository that `page` links to."""
    pages = []
    for target in LINK.findall(page.read_text()):
        path = target.partition("#")[0]
        if path.endswith(".md") and "://" not in path:
            dest = (page.parent / path).resolve()
            if dest.exists() and dest != page and dest not in pages:
                pages.append(dest)
    return pages


README_COMMANDS = commands(README.read_text())


def test_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}): move detail into docs/ and link it"


def test_the_readme_has_its_commands():
    """The extraction found what the README promises: the two commands and the one for your own data."""
    assert ["make", "demo"] in README_COMMANDS and ["make", "test"] in README_COMMANDS
    assert any(argv[:2] == ["lmforge", "run"] and "--crawl" in argv for argv in README_COMMANDS)


@pytest.mark.parametrize("argv", [a for a in README_COMMANDS if a[0] == "make"], ids=shlex.join)
def test_make_target_exists(argv):
    targets = make_targets(ROOT / "Makefile")
    wanted = [w for w in argv[1:] if not w.startswith("-") and "=" not in w]
    missing = [t for t in wanted if t not in targets]
    assert not missing, f"README: `{shlex.join(argv)}`: the Makefile has no target {missing} (it has {sorted(targets)})"


class _Parsed(Exception):
    """Raised where lmforge's command line has been parsed, so nothing runs."""


@pytest.mark.parametrize("argv", [a for a in README_COMMANDS if a[0] == "lmforge"], ids=shlex.join)
def test_lmforge_command_parses(argv, monkeypatch):
    """`lmforge.cli.main` with the README's argv, stopped when its outermost parse returns: an unknown option, a bad
    choice or a missing required option is argparse's exit 2 first. What parse_known_args leaves over is checked as
    lmforge checks it (common.cli.reject_unknown; Beam's flags are allowed for the Beam stages)."""
    import lmforge.cli as cli
    from common.cli import reject_unknown
    from flows.stages.table import STAGE_TABLE

    command = argv[1] if len(argv) > 1 else ""
    beam = command in STAGE_TABLE and STAGE_TABLE[command].beam
    real = argparse.ArgumentParser.parse_known_args
    depth, done = 0, False

    def parse_known_args(self, args=None, namespace=None):
        nonlocal depth, done
        if done:  # Beam's own options parser, while the leftovers are checked
            return real(self, args, namespace)
        depth += 1  # a subcommand's parser is parsed inside its parent's call: only the outermost one ends it
        try:
            ns, rest = real(self, args, namespace)
        finally:
            depth -= 1
        if depth:
            return ns, rest
        done = True
        if rest:
            known: set[str] = set()
            if beam:
                from pipelines.beam_options import beam_flags

                known = beam_flags(rest)
            reject_unknown(self, rest, also_known=known)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parse_known_args)
    monkeypatch.setattr(cli, "_quiet_logs", lambda flow=False: None)  # no logging set-up in the test process
    before = dict(os.environ)  # main() sets a few variables (DS_ACCELERATOR, ...) before it parses
    try:
        code = cli.main(argv[1:])
    except _Parsed:
        code = 0
    except SystemExit as e:  # argparse's error (2), or --help (0)
        code = e.code or 0
    finally:
        for key in set(os.environ) - set(before):
            del os.environ[key]
        os.environ.update(before)
    assert code == 0, f"README: `{shlex.join(argv)}` is refused by lmforge's parser (exit {code}; its line is above)"


def test_readme_links_resolve():
    """Every relative link in README.md, and in the repository's pages it links to, leads to a file (and heading)."""
    pages = [README, *linked_pages(README)]
    bad = [line for page in pages for line in broken_links(page)]
    assert not bad, "broken links:\n" + "\n".join(bad)
