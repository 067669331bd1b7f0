"""Every cleaning step on crafted pages of about 1 MB, beside a real page of the same size (the control) and
datatrove's filters on the same pages (the peer, each stopped after --peer-seconds).

The pages (text, as the steps see it after extraction; seeded, so each run times the same pages):
  real                 the sample crawl's extracted pages (samples/crawl), joined up to the size: the control
  (each crafted word in an English sentence of its own, a line ending in a full stop: C4 keeps such lines)
  affix runs           990-character words `((((...x123`: spaCy's affix loop strips one prefix a pass
  affix cycles         `<>(<>(...x123`: a cycle of three passes
  dots and brackets    `x.).)...`: suffixes that alternate, one of them a run rule's character
  affixes, one side    `<[(<{>...x123`, the five characters in no periodic order
  affixes, both sides  the same before and `)]}>.,;` after the word
  affix pieces         prefixes and suffixes of one character and of several (`..`, `US$`, `'s`, `km`, `…`) in no
                       order on both sides of the word
  dots in no order     `..(.(...(x.)..…`: the dot run rule's pieces, where no one-character shortcut applies
  e-mail shapes        `a-a-a-...@` runs, the shape that made the PII expression backtrack
  one long word        a single 1 MB word
  repeated line        one 20-word English line over and over (Gopher's repetition rules)

Each step (pipelines/corpus/steps/registry.py STEPS, default options; the language step decides the page's
language) runs on the page the steps before it leave; a step that drops the page hands the next step the page it
got, so every step is timed on every page. The word splitter's caches are emptied before each page (an
attacker's words are new). `process_document` then runs the page as the corpus stage does, with its default
10-second budget, and the outcome is reported. datatrove's C4, Gopher repetition, Gopher quality and FineWeb
filters and its PII formatter (the same rule families, on spaCy's tokenizer) run on the same page in a process of
their own, one filter at a time; one that passes --peer-seconds is stopped and reported as over it.

    lmforge bench hostile                     # about 1 MB pages, datatrove stopped after 30 s a filter
    lmforge bench hostile --size 200000 --peer-seconds 10
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.kit.options import bench_parser, parse_bench
from bench.kit.report import write_section
from common.config import opt

GOAL_SECONDS = 1.0
"""Issue 50's goal: no cleaning step over a second on a crafted 1 MB page."""
PEER_FILTERS = ("C4QualityFilter", "GopherRepetitionFilter", "GopherQualityFilter", "FineWebQualityFilter",
                "PIIFormatter")


@dataclass
class HostileBenchConfig:
    size: int = opt(1_000_000, "characters of text per page")
    crawl: str = opt("samples/crawl", "the real pages' crawl (the control)")
    peer_seconds: float = opt(30.0, "stop a datatrove filter after this many seconds (0: no peer)")

    def __post_init__(self):
        if self.size < 10_000:
            raise ValueError("size must be >= 10000")
        if self.peer_seconds < 0:
            raise ValueError("peer_seconds must be >= 0")


def _words(rnd: random.Random, size: int, word) -> str:
    """Lines of about `size` characters in all, each an English sentence around one crafted word (at most 1,000
    characters, C4's word cap) and ending in a full stop, so that C4's line rules keep them and every later step
    reads them, as in an attack on the stage."""
    out, n, i = [], 0, 0
    while n < size:
        i += 1
        line = f"The report on page {i} of the annual review says {word(rnd)} and the committee agreed with it."
        out.append(line)
        n += len(line) + 1
    return "\n".join(out)


PRE_PIECES = [*"<>([{\"'$#&*!?", "..", "...", "US$", "+", "-", "..(", "$(", "C$", "…", "«"]
SUF_PIECES = [*")]}>.,;:!?\"'", "..", "'s", "km", "%", "$", ".)", ").", "…", "n't", "»"]
"""Prefixes and suffixes of one character and of several (runs, currency, units, contractions) for the pages of
affix pieces in no order."""


def _pieces(rnd: random.Random, pieces: list[str], n: int) -> str:
    """`n` characters of `pieces` picked at random."""
    out, k = [], 0
    while k < n:
        out.append(rnd.choice(pieces))
        k += len(out[-1])
    return "".join(out)[:n]


def real_page(crawl: str, size: int) -> str:
    from pipelines.corpus.readers import read_file
    from pipelines.corpus.text import decode_html, html_to_text, normalize_text
    from pipelines.io import expand_inputs
    from schemas.records import RawDocument

    parts, n = [], 0
    for path in expand_inputs([crawl]):
        for rec in read_file(path):
            if isinstance(rec, RawDocument) and rec.html:
                text = normalize_text(html_to_text(decode_html(rec.html, rec.charset).text))
                parts.append(text)
                n += len(text)
                if n >= size:
                    return "\n\n".join(parts)[:size]
    raise RuntimeError(f"{crawl}: its pages hold {n:,} characters of text, fewer than --size {size:,}")


def pages(cfg: HostileBenchConfig) -> dict[str, str]:
    size, rnd = cfg.size, random.Random(0)
    tail = lambda r: f"x{r.randrange(10**9)}"  # noqa: E731 - a fresh word each time: no cache helps
    line = ("The committee met on Tuesday to discuss the budget for the coming year and the new library plans "
            "before the vote.")
    return {
        "real (control)": real_page(cfg.crawl, size),
        "affix runs `((((...x`": _words(rnd, size, lambda r: "(" * 989 + tail(r)),
        "affix cycles `<>(<>(...x`": _words(rnd, size, lambda r: "<>(" * 330 + tail(r)),
        "dots and brackets `x.).)`": _words(rnd, size, lambda r: tail(r) + ".)" * 495),
        "affixes in no order, one side": _words(rnd, size, lambda r: "".join(r.choice("<>([{") for _ in range(989))
                                                + tail(r)),
        "affixes in no order, both sides": _words(rnd, size, lambda r: "".join(r.choice("<>([{") for _ in range(495))
                                                  + tail(r) + "".join(r.choice(")]}>.,;") for _ in range(495))),
        "affix pieces in no order, both sides": _words(rnd, size, lambda r: _pieces(r, PRE_PIECES, 495) + tail(r)
                                                       + _pieces(r, SUF_PIECES, 495)),
        "dots in no order `..(.(...x.)..`": _words(rnd, size, lambda r: _pieces(r, ["..", ".", "(", ".(", "...("], 495)
                                                   + "x" + _pieces(r, [".", "..", ").", "…"], 495)),
        "e-mail shapes `a-a-a-...`": _words(rnd, size, lambda r: "a-" * r.randrange(200, 500) + "@"),
        "one long word": "".join(rnd.choice("abcdefghij") for _ in range(size)),
        "repeated line": "\n".join([line] * (size // (len(line) + 1))),
    }


def fresh_words() -> None:
    from pipelines.corpus.words import english

    w = english()
    w._cache.clear()
    w._sent.clear()
    w._flags.clear()
    w._last = (None, [])


def time_steps(text: str) -> dict[str, float]:
    """Seconds per step on `text`, each on the page the steps before it leave (a drop hands on the page it got)."""
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.steps.base import Page
    from pipelines.corpus.steps.registry import STEPS
    from pipelines.corpus.text import normalize_text

    cfg = CorpusConfig(input=["-"], output="-")
    fresh_words()
    times = {}
    t0 = time.perf_counter()
    page = Page(normalize_text(text), url="http://example.com/page")
    times["normalise"] = time.perf_counter() - t0
    for step in STEPS:
        options = step.options(cfg)
        if not step.enabled(options):
            continue
        t0 = time.perf_counter()
        out, _ = step.apply(page, options)
        times[step.name if step.name not in times else f"{step.name} ({len(times)})"] = time.perf_counter() - t0
        page = out or page
    return times


def outcome(text: str) -> tuple[str, float]:
    from pipelines.corpus.clean import process_document
    from pipelines.corpus.config import CorpusConfig
    from schemas.records import RawDocument

    fresh_words()
    t0 = time.perf_counter()
    status, rec = process_document(RawDocument("p", "http://example.com/page", "bench", 0, text=text),
                                   CorpusConfig(input=["-"], output="-"))
    took = time.perf_counter() - t0
    if status == "kept":
        return "kept", took
    return (f"{status}: {rec.reason}" if status == "quarantined" else f"{status}: {rec[1]}"), took


PEER = """
import json, sys, time
from datatrove.data import Document
from datatrove.pipeline import filters, formatters
text = open(sys.argv[1], encoding="utf-8").read()
for name in sys.argv[2:]:
    cls = getattr(filters, name, None) or getattr(formatters, name)
    step = cls()
    doc = Document(text=text, id="p", metadata={"url": "http://example.com/page"})
    t0 = time.perf_counter()
    (step.format(doc.text) if hasattr(step, "format") else step.filter(doc))
    print(json.dumps([name, time.perf_counter() - t0]), flush=True)
"""


def peer_times(text_file: Path, limit: float) -> dict[str, float | None]:
    """datatrove's seconds per filter on the page; None for one stopped after `limit` seconds (the filters after it
    run in a new process)."""
    import select

    out: dict[str, float | None] = {}
    left = list(PEER_FILTERS)
    while left:
        proc = subprocess.Popen([sys.executable, "-c", PEER, str(text_file), *left], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + limit + 30  # the first filter also waits for datatrove's import
        while left:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = proc.stdout.readline() if ready else ""
            if not line:
                break
            name, seconds = json.loads(line)
            out[name] = seconds if seconds <= limit else None
            left.remove(name)
            deadline = time.monotonic() + limit
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if left:  # stopped (or failed) in this one
            out[left.pop(0)] = None
    return out


def parse(argv: list[str] | None) -> tuple[HostileBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench hostile", __doc__, HostileBenchConfig)
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="report to update (default: docs/BENCHMARKS.md)")
    return parse_bench(ap, HostileBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    import tempfile

    cfg, ns = parse(argv)
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in pages(cfg).items():
            print(f"bench hostile: {name} ({len(text):,} characters)", file=sys.stderr, flush=True)
            times = time_steps(text)
            status, took = outcome(text)
            peer: dict[str, float | None] = {}
            if cfg.peer_seconds:
                f = Path(tmp) / "page.txt"
                f.write_text(text, encoding="utf-8")
                peer = peer_times(f, cfg.peer_seconds)
            slow, worst = max(times.items(), key=lambda kv: kv[1])
            over = [k for k, v in times.items() if v > GOAL_SECONDS]
            finished = [v for v in peer.values() if v is not None]
            peer_worst = (f"> {cfg.peer_seconds:g} s ({sum(v is None for v in peer.values())} of {len(peer)})"
                          if None in peer.values() else f"{max(finished):.2f} s" if finished else "-")
            rows.append(f"| {name} | {len(text):,} | {slow} {worst:.2f} s | {sum(times.values()):.2f} s | "
                        f"{', '.join(over) or 'none'} | {status} ({took:.1f} s) | {peer_worst} |")
            data[name] = {"characters": len(text), "steps": times, "process_document": [status, took], "datatrove": peer}
    body = "\n".join([
        f"Every cleaning step on crafted pages of about {cfg.size:,} characters beside a real page of the same size "
        f"(bench/corpus/hostile.py says how each is made). Goal: no step over {GOAL_SECONDS:g} s. `process_document` is the "
        "corpus stage's whole cleaning with its default budget (`document_seconds` 10): a page over it is "
        "quarantined as `too_slow`. " + (f"datatrove 0.10.1's C4, Gopher and FineWeb filters and PII formatter run "
                                          f"on the same page, each stopped after {cfg.peer_seconds:g} s."
                                          if cfg.peer_seconds else "datatrove not run (--peer-seconds 0)."), "",
        "| page | characters | slowest step | all steps | steps over the goal | process_document | datatrove's slowest |",
        "|---|---:|---|---:|---|---|---|", *rows, ""])
    write_section(Path(ns.out), "corpus: cleaning steps on crafted pages", body, data)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
