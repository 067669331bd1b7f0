"""Data report for a finished corpus stage directory: report.json, report.html, report/*.png.

    python -m pipelines.corpus.report runs/demo/corpus     # (re)write the report of a stage run

What it shows: outcomes (in = kept + dropped + duplicates + quarantined), drops and quarantines
per reason (with the first quarantined records of each reason and their detail, e.g. a payload's
size), what the steps noted (PII replaced, per kind; pages marked contaminated), kept documents per
language, document lengths (characters and whitespace-separated words, log-spaced bins, per
language), duplicate-cluster sizes (a cluster is the kept document plus every document removed in
its favour, so size = removed + 1), exact vs near duplicates,
and the top domains of kept and of dropped documents.

Files are read by column and in record batches (pyarrow), so memory holds one batch of text,
not the corpus. Both report.json and the PNGs are byte-identical across reruns on the same
stage output: no timestamps, sorted keys, matplotlib's PNG "Software" tag removed (Agg writes
no other time-varying chunk).
"""
from __future__ import annotations

import argparse
import html
import io
import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas import storage
from schemas.manifest import atomic_write_bytes, read_manifest

REPORT_SCHEMA = "lmforge.corpus_report/v1"
BATCH_ROWS = 4096  # 4096 docs * ~5 kB of text = ~20 MB of Arrow memory per batch
TOP_DOMAINS = 20
LARGEST_CLUSTERS = 10
QUARANTINE_EXAMPLES = 5  # per reason, the first by file and position: where to look, with the detail (e.g. a size)
NO_URL, NO_HOST = "(no url)", "(no host)"


# ---------------------------------------------------------------- pure helpers


def log_edges(lo_exp: int, hi_exp: int, per_decade: int = 5) -> list[int]:
    """Integer bin edges from 10^lo_exp to 10^hi_exp, `per_decade` per factor of 10
    (5 per decade: 100, 158, 251, 398, 631, 1000, ...; rounded, duplicates removed)."""
    return sorted({round(x) for x in np.logspace(lo_exp, hi_exp, (hi_exp - lo_exp) * per_decade + 1)})


# Fixed edges (not fitted to the data) so batches add up and reports of different runs compare.
# The c4 rules keep >= 200 characters and gopher <= 100,000 words (~700,000 characters).
CHAR_EDGES = log_edges(1, 7)  # 10 ... 10,000,000 characters, 31 edges
WORD_EDGES = log_edges(0, 6)  # 1 ... 1,000,000 words
SIMILARITY_EDGES = [round(0.5 + 0.05 * i, 2) for i in range(11)]  # 0.50, 0.55, ..., 1.00


def histogram(values: np.ndarray, edges: list[float]) -> np.ndarray:
    """Counts per bin; values outside the edges go to the first or last bin."""
    return np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)[0].astype(np.int64)


def domain_of(url: str | None) -> str:
    """Host of a URL, lower-cased, port removed; NO_URL for a missing one, NO_HOST if none parses."""
    if not url:
        return NO_URL
    try:
        host = urlsplit(url).hostname
    except ValueError:  # e.g. an unbalanced "[" in an IPv6 host
        host = None
    return host or NO_HOST


def top(counter: Counter, k: int) -> list[tuple[str, int]]:
    """The k most common keys, ties by key, so the order does not depend on reading order."""
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def cluster_sizes(removed_per_kept: Counter) -> list[list[int]]:
    """[[size, clusters], ...] by size; a cluster is its kept document plus the removed ones."""
    return [[size, n] for size, n in sorted(Counter(c + 1 for c in removed_per_kept.values()).items())]


def reconcile(found: dict[str, int], n_in: int | None) -> dict[str, Any]:
    accounted = found["kept"] + found["dropped"] + found["duplicates"] + found["quarantined"]
    return {**found, "in": n_in, "accounted": accounted, "reconciles": n_in is not None and n_in == accounted}


# ---------------------------------------------------------------- reading the stage directory


def _batches(files: list[str], columns: list[str]) -> Iterator[pa.RecordBatch]:
    for f in files:
        # buffer_size: read column chunks in 1 MiB pieces; 0 (the default) reads a whole column
        # chunk at once, and the stage writes one row group per file (~220 MB of zstd text per
        # 340k-document shard at 1M documents).
        with storage.open_read(f) as fh:
            yield from pq.ParquetFile(fh, buffer_size=1 << 20).iter_batches(batch_size=BATCH_ROWS, columns=columns)


def scan_kept(out_dir: str) -> dict[str, Any]:
    langs: dict[str, dict[str, Any]] = {}
    domains: Counter = Counter()
    by_lang: dict[str, list[str]] = {}
    for f in storage.files_under(storage.join(out_dir, "data"), "*/*.parquet"):
        by_lang.setdefault(storage.name(storage.parent(f)), []).append(f)
    for lang, files in sorted(by_lang.items()):
        s = langs[lang] = {"documents": 0, "characters": 0, "words": 0, "min_characters": None,
                                    "max_characters": None, "char_hist": np.zeros(len(CHAR_EDGES) - 1, np.int64),
                                    "word_hist": np.zeros(len(WORD_EDGES) - 1, np.int64)}
        for b in _batches(files, ["url", "text"]):
            chars = pc.utf8_length(b.column("text")).to_numpy(zero_copy_only=False)
            words = pc.count_substring_regex(b.column("text"), r"\S+").to_numpy(zero_copy_only=False)
            s["documents"] += len(chars)
            s["characters"] += int(chars.sum())
            s["words"] += int(words.sum())
            if len(chars):
                lo, hi = int(chars.min()), int(chars.max())
                s["min_characters"] = lo if s["min_characters"] is None else min(lo, s["min_characters"])
                s["max_characters"] = hi if s["max_characters"] is None else max(hi, s["max_characters"])
            s["char_hist"] += histogram(chars, CHAR_EDGES)
            s["word_hist"] += histogram(words, WORD_EDGES)
            domains.update(map(domain_of, b.column("url").to_pylist()))
    return {"languages": langs, "domains": domains}


def scan_dropped(out_dir: str) -> dict[str, Any]:
    reasons: Counter = Counter()
    domain_reasons: Counter = Counter()
    for b in _batches(storage.files_under(storage.join(out_dir, "dropped"), "*.parquet"), ["url", "reason"]):
        rs = b.column("reason").to_pylist()
        reasons.update(rs)
        domain_reasons.update(zip(map(domain_of, b.column("url").to_pylist()), rs))
    return {"reasons": reasons, "domain_reasons": domain_reasons}


def scan_duplicates(out_dir: str) -> dict[str, Any]:
    kinds: Counter = Counter()
    per_kept: Counter = Counter()
    sim_hist = np.zeros(len(SIMILARITY_EDGES) - 1, np.int64)
    for b in _batches(storage.files_under(storage.join(out_dir, "duplicates"), "*.parquet"), ["kept_id", "kind", "similarity"]):
        kind = b.column("kind")
        kinds.update(kind.to_pylist())
        per_kept.update(b.column("kept_id").to_pylist())
        near = pc.drop_null(pc.filter(b.column("similarity"), pc.equal(kind, "near")))
        sim_hist += histogram(near.to_numpy(zero_copy_only=False), SIMILARITY_EDGES)
    return {"kinds": kinds, "per_kept": per_kept, "similarity_hist": sim_hist}


def _first_quarantined(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["source"] or "", r["offset"] or 0, r["id"] or ""))[:QUARANTINE_EXAMPLES]


def scan_quarantine(out_dir: str) -> dict[str, Any]:
    """Quarantined records per reason, and the first QUARANTINE_EXAMPLES of each (source, offset, id, detail)."""
    reasons: Counter = Counter()
    examples: dict[str, list[dict[str, Any]]] = {}
    for f in storage.files_under(storage.join(out_dir, "quarantine"), "*.jsonl"):
        for row in (json.loads(line) for line in storage.read_text(f).splitlines() if line.strip()):
            reasons[row["reason"]] += 1
            kept = examples.setdefault(row["reason"], [])
            kept.append({k: row.get(k) for k in ("source", "offset", "id", "detail")})
            if len(kept) > 4 * QUARANTINE_EXAMPLES:  # bounded, whatever the number quarantined
                kept[:] = _first_quarantined(kept)
    return {"reasons": reasons, "examples": {r: _first_quarantined(rows) for r, rows in sorted(examples.items())}}


def languages_table(counts: dict[str, Any], kept: dict[str, int]) -> list[dict[str, Any]]:
    """Per identified language: documents kept, documents that passed cleaning (with --languages auto), and those dropped,
    by reason; the largest first. What each language lost, the language the page read as when it was dropped."""
    dropped = counts.get("dropped_by_language", {})
    cleaned = counts.get("cleaned_by_language", {})
    rows = [{"language": lang, "kept": kept.get(lang, 0), "passed_cleaning": cleaned.get(lang),
             "dropped": sum(dropped.get(lang, {}).values()), "dropped_by_reason": dropped.get(lang, {})}
            for lang in {*kept, *dropped, *cleaned}]
    return sorted(rows, key=lambda r: (-(r["kept"] + r["dropped"]), r["language"]))


def build_report(out_dir: str, counts: dict[str, Any]) -> dict[str, Any]:
    """Everything report.json holds; `counts` is the stage's (manifest) counts, cross-checked here."""
    kept, dropped, dups, quarantine = scan_kept(out_dir), scan_dropped(out_dir), scan_duplicates(out_dir), scan_quarantine(out_dir)
    langs = kept["languages"]
    found = {"kept": sum(s["documents"] for s in langs.values()), "dropped": sum(dropped["reasons"].values()),
             "duplicates": sum(dups["kinds"].values()), "quarantined": sum(quarantine["reasons"].values())}
    stage = {"kept": counts.get("kept"), "dropped": sum(counts.get("dropped", {}).values()),
             "duplicates": counts.get("duplicates"), "quarantined": counts.get("quarantined")}
    by_dropped_domain: dict[str, Counter] = {}
    for (dom, reason), n in dropped["domain_reasons"].items():
        by_dropped_domain.setdefault(dom, Counter())[reason] += n
    dropped_domains = Counter({d: sum(c.values()) for d, c in by_dropped_domain.items()})
    return {
        "schema": REPORT_SCHEMA,
        "outcomes": reconcile(found, counts.get("in")),
        "stage_counts_disagree": sorted(k for k in found if stage[k] is not None and stage[k] != found[k]),
        "dropped_by_reason": dict(dropped["reasons"]),
        "quarantined_by_reason": dict(quarantine["reasons"]),
        "quarantined_examples": quarantine["examples"],
        "noted": dict(counts.get("noted", {})),
        "contamination": counts.get("contamination"),
        "warnings": warnings(counts) if "dropped_by_language" in counts else [],
        "languages": languages_table(counts, {k: s["documents"] for k, s in langs.items()}),
        "kept_by_language": {
            lang: {"documents": s["documents"], "characters": s["characters"], "words": s["words"],
                   "min_characters": s["min_characters"], "max_characters": s["max_characters"],
                   "mean_characters": round(s["characters"] / s["documents"], 1) if s["documents"] else None,
                   "mean_words": round(s["words"] / s["documents"], 1) if s["documents"] else None}
            for lang, s in langs.items()},
        "length_histograms": {
            "characters": {"edges": CHAR_EDGES, "counts": {lang: s["char_hist"].tolist() for lang, s in langs.items()}},
            "words": {"edges": WORD_EDGES, "counts": {lang: s["word_hist"].tolist() for lang, s in langs.items()}},
        },
        "duplicates": {
            "by_kind": dict(dups["kinds"]),
            "clusters": len(dups["per_kept"]),
            "cluster_sizes": cluster_sizes(dups["per_kept"]),
            "largest_clusters": [{"kept_id": k, "size": n + 1} for k, n in top(dups["per_kept"], LARGEST_CLUSTERS)],
            "near_similarity": {"edges": SIMILARITY_EDGES, "counts": dups["similarity_hist"].tolist()},
        },
        "domains": {
            "kept_distinct": len(kept["domains"]),
            "kept_top": [{"domain": d, "documents": n} for d, n in top(kept["domains"], TOP_DOMAINS)],
            "dropped_distinct": len(dropped_domains),
            "dropped_top": [{"domain": d, "documents": n, "top_reasons": [[r, k] for r, k in top(by_dropped_domain[d], 3)]}
                            for d, n in top(dropped_domains, TOP_DOMAINS)],
        },
    }


# ---------------------------------------------------------------- plots (matplotlib, Agg, no pyplot state)


def preload_plotting() -> threading.Thread:
    """Import matplotlib in a background thread while the report scans the stage's files (pyarrow
    reads and counts without holding the GIL): 0.6 s of import the report no longer waits for."""
    def load() -> None:
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401

    t = threading.Thread(target=load, name="preload-matplotlib", daemon=True)
    t.start()
    return t


def _png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def _barh(items: list[tuple[str, int]], title: str, xlabel: str) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 1.2 + 0.26 * len(items)))
    ax = fig.add_subplot()
    labels, values = [k for k, _ in items][::-1], [v for _, v in items][::-1]
    bars = ax.barh(range(len(values)), values, color="#4c72b0")
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.margins(x=0.12)
    return _png(fig)


def _log_hist(edges: list[int], counts: dict[str, list[int]], title: str, xlabel: str) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    for lang, c in counts.items():
        ax.stairs(c, edges, label=lang, linewidth=1.5)
    ax.set_xscale("log")
    used = np.flatnonzero(np.sum(list(counts.values()), axis=0))
    if len(used):  # show the occupied bins only
        ax.set_xlim(edges[used[0]], edges[used[-1] + 1])
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("documents")
    ax.legend()
    return _png(fig)


def plots(rep: dict[str, Any]) -> dict[str, bytes]:
    """name -> PNG bytes; a plot with no data is left out."""
    o, d = rep["outcomes"], rep["duplicates"]
    out = {"outcomes": _barh([("kept", o["kept"]), ("dropped", o["dropped"]), ("duplicates", o["duplicates"]),
                              ("quarantined", o["quarantined"])], "Where the input documents went", "documents")}
    if rep["dropped_by_reason"]:
        out["dropped"] = _barh(top(Counter(rep["dropped_by_reason"]), 40), "Dropped, per reason", "documents")
    if rep["kept_by_language"]:
        langs = rep["kept_by_language"]
        out["languages"] = _barh(top(Counter({k: v["documents"] for k, v in langs.items()}), 40), "Kept, per language", "documents")
        h = rep["length_histograms"]
        out["length_characters"] = _log_hist(h["characters"]["edges"], h["characters"]["counts"], "Kept document length", "characters (log bins)")
        out["length_words"] = _log_hist(h["words"]["edges"], h["words"]["counts"], "Kept document length", "words (log bins)")
    if d["cluster_sizes"]:
        big = sum(n for s, n in d["cluster_sizes"] if s >= 20)  # one bar for the tail keeps the plot short
        bars = [(f"size {s}", n) for s, n in d["cluster_sizes"] if s < 20] + ([("size >= 20", big)] if big else [])
        out["cluster_sizes"] = _barh(bars[::-1],
                                     "Duplicate clusters by size (kept + removed)", "clusters")
    if rep["domains"]["kept_top"]:
        out["domains_kept"] = _barh([(x["domain"], x["documents"]) for x in rep["domains"]["kept_top"]],
                                    f"Top {TOP_DOMAINS} domains of kept documents", "documents")
    return out


# ---------------------------------------------------------------- HTML


def _table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else html.escape(str(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>" if rows else "<p>none</p>"


def _num(n: int | None) -> str:
    return "unknown" if n is None else f"{n:,}"


def contamination_html(per_task: dict[str, dict] | None) -> list[str]:
    """The decontamination table: per evaluation task, its items, those too short to have an n-gram,
    those found in the crawl, and what became of the pages that held them."""
    if not per_task:
        return []
    rows = [[task, t["items"], t["too_short"], t["found"], ", ".join(f"{s} {n}" for s, n in t["found_by_split"].items()) or "-",
             t["pages_dropped"], t["pages_kept"]] for task, t in sorted(per_task.items())]
    return ["<h2>Evaluation items found in the crawl (decontamination)</h2>",
            "<p>An item is found when a page shares one of its word n-grams; an item with fewer words than n has none "
            "and cannot be checked. Pages dropped are not in the corpus; pages kept were marked (mode mark) and are "
            "listed in matches/.</p>",
            _table(["task", "items", "too short to check", "found", "found, by split", "pages dropped", "pages kept (marked)"], rows)]


def render_html(rep: dict[str, Any], images: list[str], title: str) -> str:
    o, d, dom = rep["outcomes"], rep["duplicates"], rep["domains"]

    def img(name: str) -> str:
        return f'<p><img src="report/{name}.png" alt="{name}"></p>' if name in images else ""

    def pct(n: int) -> str:
        return f"{100 * n / o['in']:.1f}%" if o["in"] else ""

    status = ("reconciles" if o["reconciles"] else
              f"DOES NOT reconcile (in={_num(o['in'])}, accounted={o['accounted']:,})")
    disagree = (f"<p><b>Files and manifest counts disagree on: {', '.join(rep['stage_counts_disagree'])}</b></p>"
                if rep["stage_counts_disagree"] else "")
    langs = rep["kept_by_language"]
    parts = [
        f"<h1>Corpus data report: {html.escape(title)}</h1>",
        "<h2>Outcomes</h2>",
        f"<p>in = kept + dropped + duplicates + quarantined: {_num(o['in'])} = {o['kept']:,} + {o['dropped']:,} + "
        f"{o['duplicates']:,} + {o['quarantined']:,} &rarr; <b>{status}</b>.</p>{disagree}",
        _table(["outcome", "documents", "% of in"], [[k, o[k], pct(o[k])] for k in ("kept", "dropped", "duplicates", "quarantined")]),
        img("outcomes"),
        *(f"<p><b>Warning: {html.escape(w)}</b></p>" for w in rep.get("warnings", [])),
        "<h2>Languages: kept and left out</h2>" if rep.get("languages") else "",
        ("<p>Each page's language as identified on its text when it was kept or dropped (none: a page without text). "
         "With <code>--languages auto</code>, a language is kept when enough documents pass cleaning; the others are "
         "dropped as <code>language_not_kept</code>.</p>" +
         _table(["language", "kept", "passed cleaning", "dropped", "dropped, top reasons"],
                [[r["language"], r["kept"], "" if r["passed_cleaning"] is None else r["passed_cleaning"], r["dropped"],
                  ", ".join(f"{k} {n:,}" for k, n in top(Counter(r["dropped_by_reason"]), 3))] for r in rep["languages"][:40]]))
        if rep.get("languages") else "",
        "<h2>Dropped, per reason</h2>",
        _table(["reason", "documents", "% of in"], [[r, n, pct(n)] for r, n in top(Counter(rep["dropped_by_reason"]), 1000)]),
        img("dropped"),
        "<h2>Noted while cleaning</h2>" if rep.get("noted") else "",
        ("<p>What the steps did to pages they passed on, counted before deduplication: PII replaced, per kind; pages marked as sharing an n-gram with an evaluation set (decontamination's mark mode).</p>" +
         _table(["kind", "count"], [[k, n] for k, n in sorted(rep["noted"].items())])) if rep.get("noted") else "",
        *contamination_html(rep.get("contamination")),
        "<h2>Quarantined, per reason</h2>",
        _table(["reason", "records"], [[r, n] for r, n in top(Counter(rep["quarantined_by_reason"]), 1000)]),
        f"<h3>Quarantined, the first {QUARANTINE_EXAMPLES} per reason</h3>" if rep.get("quarantined_examples") else "",
        _table(["reason", "source", "offset", "detail"],
               [[r, x["source"], x["offset"], x["detail"]] for r, xs in rep["quarantined_examples"].items() for x in xs])
        if rep.get("quarantined_examples") else "",
        "<h2>Kept, per language</h2>",
        _table(["language", "documents", "characters", "mean characters", "mean words", "min characters", "max characters"],
               [[k, v["documents"], v["characters"], v["mean_characters"], v["mean_words"], v["min_characters"], v["max_characters"]]
                for k, v in langs.items()]),
        img("languages"), img("length_characters"), img("length_words"),
        "<h2>Duplicates</h2>",
        _table(["kind", "removed"], [[k, n] for k, n in sorted(d["by_kind"].items())]),
        f"<p>{d['clusters']:,} clusters (kept document + removed copies).</p>",
        _table(["cluster size", "clusters"], d["cluster_sizes"]),
        img("cluster_sizes"),
        "<h3>Largest clusters</h3>",
        _table(["kept id", "size"], [[c["kept_id"], c["size"]] for c in d["largest_clusters"]]),
        "<h3>Near-duplicate similarity to the kept document (MinHash estimate)</h3>",
        _table(["similarity", "removed"], [[f"{a:.2f}-{b:.2f}", n] for a, b, n in
                                          zip(d["near_similarity"]["edges"], d["near_similarity"]["edges"][1:], d["near_similarity"]["counts"]) if n]),
        "<h2>Domains</h2>",
        f"<p>Kept documents come from {dom['kept_distinct']:,} domains; dropped ones from {dom['dropped_distinct']:,}.</p>",
        _table(["domain (kept)", "documents"], [[x["domain"], x["documents"]] for x in dom["kept_top"]]),
        img("domains_kept"),
        _table(["domain (dropped)", "documents", "top reasons"],
               [[x["domain"], x["documents"], ", ".join(f"{r} {k}" for r, k in x["top_reasons"])] for x in dom["dropped_top"]]),
    ]
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse;margin:.5em 0}"
             "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Corpus report: {html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(p for p in parts if p) + "\n</body></html>\n")


# ---------------------------------------------------------------- shell


WARN_SHARE = 0.25
"""A reason that leaves out more than this share of the crawl gets a warning line (console, manifest, report)."""


def warnings(counts: dict) -> list[str]:
    """One line per reason that left out more than WARN_SHARE of the documents read, the largest first."""
    n_in = counts["in"]
    reasons = Counter({f"dropped as {k}": v for k, v in counts["dropped"].items()})
    reasons.update({f"quarantined as {k}": v for k, v in counts["quarantined_by_reason"].items()})
    if counts["duplicates"]:
        reasons["removed as duplicates"] = counts["duplicates"]
    lines = []
    for what, n in reasons.most_common():
        if n_in and n > WARN_SHARE * n_in:
            lang = ""
            if what == "dropped as language_not_kept":
                by = Counter({k: v.get("language_not_kept", 0) for k, v in counts["dropped_by_language"].items()})
                lang = " (" + ", ".join(f"{k} {v:,}" for k, v in by.most_common(5) if v) + "; --languages chooses)"
            lines.append(f"{n:,} of {n_in:,} documents ({n / n_in:.0%}) {what}{lang}")
    return lines


def write_report(out_dir: str | Path, counts: dict[str, Any]) -> list[str] | list[Path]:
    """Write report.json, report.html and report/*.png into a stage directory; returns the paths."""
    out_dir = str(out_dir)
    loading = preload_plotting()
    rep = build_report(out_dir, counts)
    loading.join()
    pngs = plots(rep)
    written = []
    for stale in storage.files_under(storage.join(out_dir, "report"), "*.png"):
        if storage.name(stale).removesuffix(".png") not in pngs:
            storage.remove(stale)
    for name, data in sorted(pngs.items()):
        path = storage.join(out_dir, "report", f"{name}.png")
        atomic_write_bytes(path, data)
        written.append(path)
    atomic_write_bytes(storage.join(out_dir, "report.json"), (json.dumps(rep, indent=1, sort_keys=True) + "\n").encode())
    # a fixed title, no path in the page: same data, same bytes wherever it is written
    atomic_write_bytes(storage.join(out_dir, "report.html"), render_html(rep, sorted(pngs), "corpus stage").encode())
    paths = [storage.join(out_dir, "report.json"), storage.join(out_dir, "report.html"), *written]
    return paths if storage.is_remote(out_dir) else [Path(p) for p in paths]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipelines.corpus.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage_dir", help="a finished corpus stage directory (with manifest.json)")
    a = ap.parse_args(argv)
    try:
        counts = read_manifest(a.stage_dir)["counts"]
    except (FileNotFoundError, ValueError) as e:
        ap.error(str(e))
    for p in write_report(a.stage_dir, counts):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
