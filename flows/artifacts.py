"""What a run shows in the Prefect UI (Artifacts tab): corpus counts and report, the evaluation card, the
stage directories and models, and the lineage of the model back to its corpus. Everything is read from
the stages' manifests and reports; nothing is computed here.

Every artifact opens from the run page in a browser on another machine: markdown and tables, and plots as
image artifacts whose address is the PNG itself (a data: URI, which the UI shows). A file:// link would
not open there ("Not allowed to load local resource"), so the HTML reports' paths are given as text, for a
user on the worker's machine.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prefect.artifacts import create_image_artifact, create_markdown_artifact, create_table_artifact

from schemas.card import Card, table_rows
from schemas.manifest import MANIFEST_NAME, read_manifest, sha256_file


def artifact_key(run_name: str, what: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{run_name}-{what}".lower()).strip("-")


def corpus_rows(counts: dict[str, Any]) -> list[dict[str, Any]]:
    """Corpus counts as table rows: in, kept (by language), dropped by reason, duplicates by kind and
    by the generation holding the kept copy, quarantined by reason."""
    rows = [{"what": "read", "detail": "", "count": counts["in"]}, {"what": "kept", "detail": "", "count": counts["kept"]}]
    rows += [{"what": "kept", "detail": f"language {k}", "count": v} for k, v in counts.get("kept_by_language", {}).items()]
    rows += [{"what": "dropped", "detail": k, "count": v} for k, v in counts.get("dropped", {}).items()]
    rows += [{"what": "duplicate", "detail": f"kind {k}", "count": v} for k, v in counts.get("duplicates_by_kind", {}).items()]
    rows += [{"what": "duplicate", "detail": f"kept copy in {k}", "count": v}
             for k, v in counts.get("duplicates_by_generation", {}).items()]
    rows += [{"what": "quarantined", "detail": k, "count": v} for k, v in counts.get("quarantined_by_reason", {}).items()]
    return rows


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A markdown table (numbers with thousands separators); `none` for no rows."""
    def cell(v: Any) -> str:
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v).replace("|", "\\|")

    if not rows:
        return ["none"]
    return ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"] + ["| " + " | ".join(map(cell, r)) + " |" for r in rows]


def corpus_markdown(rep: dict[str, Any], corpus: Path, top: int = 10) -> str:
    """The corpus report (report.json, lmforge.corpus_report/v1) as markdown: what report.html shows, less
    the plots (image artifacts) and cut to the `top` largest domains."""
    o, d, dom = rep["outcomes"], rep["duplicates"], rep["domains"]

    def reasons(pairs: list[list[Any]]) -> str:
        return ", ".join(f"{r} {n}" for r, n in pairs)

    status = "reconciles" if o["reconciles"] else f"DOES NOT reconcile (accounted {o['accounted']:,})"
    n_in = "unknown" if o["in"] is None else f"{o['in']:,}"
    lines = [f"# Corpus report: {corpus}", "", f"in = kept + dropped + duplicates + quarantined: {n_in} = "
             f"{o['kept']:,} + {o['dropped']:,} + {o['duplicates']:,} + {o['quarantined']:,}: **{status}**.", ""]
    if rep.get("stage_counts_disagree"):
        lines += [f"**Files and manifest counts disagree on: {', '.join(rep['stage_counts_disagree'])}**", ""]
    by_count = sorted(rep["dropped_by_reason"].items(), key=lambda kv: (-kv[1], kv[0]))
    sections = [
        ("Dropped, per reason", md_table(["reason", "documents"], [list(kv) for kv in by_count])),
        ("Noted while cleaning (before deduplication)", md_table(["kind", "count"], sorted(rep.get("noted", {}).items()))),
        ("Evaluation items found in the crawl (decontamination)",
         md_table(["task", "items", "too short", "found", "pages dropped", "pages kept (marked)"],
                  [[t, v["items"], v["too_short"], v["found"], v["pages_dropped"], v["pages_kept"]]
                   for t, v in sorted((rep.get("contamination") or {}).items())]) if rep.get("contamination") else None),
        ("Quarantined, per reason", md_table(["reason", "records"], sorted(rep["quarantined_by_reason"].items()))),
        ("Quarantined, the first per reason", md_table(["reason", "source", "offset", "detail"], [
            [r, x["source"], x["offset"], x["detail"]] for r, xs in rep["quarantined_examples"].items() for x in xs])
         if rep.get("quarantined_examples") else None),
        ("Kept, per language", md_table(["language", "documents", "characters", "mean characters", "mean words"],
                                        [[k, v["documents"], v["characters"], v["mean_characters"], v["mean_words"]]
                                         for k, v in rep["kept_by_language"].items()])),
        ("Duplicates", [f"{d['clusters']:,} clusters (kept document + removed copies).", "",
                        *md_table(["kind", "removed"], sorted(d["by_kind"].items()))]),
        (f"Top {top} domains of kept documents (of {dom['kept_distinct']:,})",
         md_table(["domain", "documents"], [[x["domain"], x["documents"]] for x in dom["kept_top"][:top]])),
        (f"Top {top} domains of dropped documents (of {dom['dropped_distinct']:,})",
         md_table(["domain", "documents", "top reasons"], [[x["domain"], x["documents"], reasons(x["top_reasons"])]
                                                           for x in dom["dropped_top"][:top]])),
    ]
    for title, body in sections:
        if body is not None:
            lines += [f"## {title}", "", *body, ""]
    lines.append(f"The full report with its plots, on the worker: `{corpus / 'report.html'}`.")
    return "\n".join(lines) + "\n"


def publish_images(run_name: str, what: str, pngs: list[Path]) -> None:
    """Each PNG as an image artifact `{run_name}-{what}-{stem}`, the picture inline (see the module's docstring)."""
    for png in pngs:
        if png.exists():
            create_image_artifact(image_url=image_data_uri(png), key=artifact_key(run_name, f"{what}-{png.stem}"),
                                  description=f"{png.stem.replace('_', ' ')} ({png})")


def publish_corpus(run_name: str, corpus: Path) -> None:
    m = read_manifest(corpus)
    index = (m.get("extra") or {}).get("index") or {}
    note = ""
    if index:
        note = (f"; band index {index['path']}: read {len(index['read'])} generation(s), "
                + (f"wrote {index['wrote']}" if index["wrote"] else "snapshot already indexed"))
    create_table_artifact(key=artifact_key(run_name, "corpus-counts"), table=corpus_rows(m["counts"]),
                          description=f"corpus stage {corpus}: what was read, kept, dropped, deduplicated{note}")
    report = corpus / "report.json"
    if report.exists():
        create_markdown_artifact(key=artifact_key(run_name, "corpus-report"),
                                 markdown=corpus_markdown(json.loads(report.read_text()), corpus.resolve()),
                                 description=f"the corpus stage's report ({corpus / 'report.html'} on the worker)")
        publish_images(run_name, "corpus", sorted((corpus / "report").glob("*.png")))


def publish_outputs(run_name: str, stages: dict[str, str | None]) -> None:
    """One markdown artifact listing every stage directory (and the models in it) with its manifest's sha256."""
    lines = ["| stage | directory | model | manifest sha256 |", "|---|---|---|---|"]
    for stage, d in stages.items():
        if not d:
            lines.append(f"| {stage} | not run | | |")
            continue
        p = Path(d)
        hf = p / "hf"
        sha = sha256_file(p / MANIFEST_NAME)[:16] if (p / MANIFEST_NAME).exists() else "no manifest"
        lines.append(f"| {stage} | `{p}` | {'`' + str(hf) + '`' if hf.is_dir() else ''} | {sha} |")
    create_markdown_artifact(key=artifact_key(run_name, "outputs"), markdown="\n".join(lines) + "\n",
                             description="stage directories and models of this run")


def lineage(model_stage: Path) -> list[dict[str, str]]:
    """model -> tokenizer -> shards -> corpus -> raw inputs, following each manifest's inputs."""
    rows, seen, todo = [], set(), [Path(model_stage)]
    while todo:
        d = todo.pop(0)
        if d in seen or not (d / MANIFEST_NAME).exists():
            continue
        seen.add(d)
        m = read_manifest(d)
        rows.append({"stage": m["stage"], "directory": str(d), "manifest_sha256": sha256_file(d / MANIFEST_NAME)})
        for i in m.get("inputs", []):
            p = Path(i["path"])
            if i.get("manifest_sha256"):
                todo.append(p)
            elif m["stage"] == "corpus":
                rows.append({"stage": "crawl input", "directory": str(p), "manifest_sha256": ""})
    return rows


def publish_lineage(run_name: str, model_stage: Path) -> None:
    rows = lineage(model_stage)
    md = ["| stage | directory | manifest sha256 |", "|---|---|---|"]
    md += [f"| {r['stage']} | `{r['directory']}` | {r['manifest_sha256']} |" for r in rows]
    create_markdown_artifact(key=artifact_key(run_name, "lineage"), markdown="\n".join(md) + "\n",
                             description=f"where the model in {model_stage} came from")


def publish_eval(run_name: str, eval_dir: Path) -> None:
    create_markdown_artifact(key=artifact_key(run_name, "eval-report"),
                             markdown=inline_images((eval_dir / "report.md").read_text(), eval_dir),
                             description=f"lmforge evaluation ({eval_dir})")
    report = json.loads((eval_dir / "report.json").read_text())
    loss = f"held-out {report.get('figure', 'MLM loss')}"
    rows = [{"model": who, "params": report[who]["params"], loss: report[who]["mlm_loss"],
             "seq/s": report[who]["sequences_per_second"], "fine-tune test": None}
            for who in ("teacher", "student", "previous") if report.get(who)]
    ft = report.get("finetune")
    if ft:
        rows += [{"model": f"fine-tune: {row}", "params": None, loss: None, "seq/s": None,
                  "fine-tune test": f"{ft['primary_metric']} {score:.4f}"} for row, score in ft["test"].items()]
    create_table_artifact(key=artifact_key(run_name, "eval-table"), table=rows,
                          description=f"{loss} of each model; fine-tune test scores next to the controls")


def publish_note(run_name: str, what: str, text: str) -> None:
    create_markdown_artifact(key=artifact_key(run_name, what), markdown=text, description=text.splitlines()[0][:200])


def publish_card(run_name: str, card: Path, models: dict[str, str]) -> None:
    """The evaluation card: markdown, a table of every model's quality and cost, and its plots."""
    report = Card.read(card / "report.json")
    where = f"\n\nThe card with its plots, on the worker: `{(card / 'report.html').resolve()}`.\n"
    create_markdown_artifact(key=artifact_key(run_name, "card"), markdown=inline_images((card / "report.md").read_text(), card)
                             + where,
                             description=f"quality and cost of every model of the run ({card})")
    rows = table_rows(report.models, {v: k for k, v in models.items()})  # the headline columns of schemas.card
    create_table_artifact(key=artifact_key(run_name, "card-table"), table=rows,
                          description="quality and cost together (MOROCCO's protocol, training/evaluation/resources.py)")
    publish_images(run_name, "card", [card / name for name in report.images])


def image_data_uri(png: Path) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def inline_images(markdown: str, folder: Path) -> str:
    """A report.md's pictures (`![alt](name.png)`, beside it in `folder`) as data: URIs, so a markdown artifact shows
    them in the UI on any machine, where the file's relative name would show a broken image."""
    import re

    def inline(m: re.Match) -> str:
        png = folder / m.group(2)
        return f"![{m.group(1)}]({image_data_uri(png)})" if png.is_file() else m.group(0)

    return re.sub(r"!\[([^\]]*)\]\(([\w.-]+\.png)\)", inline, markdown)
