"""A corpus ablation's report as a picture, a web page and Prefect artifacts (flows/ablation/report.py has the
figures).

- report.png: one panel for the reference loss and one per downstream task; per arm its seeds as dots and the mean
  with its 95% interval as a bar; on a task's panel the controls as horizontal lines (random-init twin, majority
  class, TF-IDF + logistic regression).
- report.html: the table, the sentences and the plot in one file that opens in any browser (the PNG inline).
- Prefect artifacts of the flow run (`<name>-ablation-report` markdown, `-ablation-table` table,
  `-ablation-plot` image), so the UI shows the comparison on the run's Artifacts tab.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from flows.ablation.report import pretraining_verdicts, render, table
from flows.artifacts import artifact_key, image_data_uri, inline_images
from schemas.manifest import atomic_write_bytes

CONTROL_STYLES = (("scratch", "random init", ":"), ("majority", "majority class", "--"), ("tfidf_lr", "TF-IDF + LR", "-."))


def _panel(ax, title: str, arms: list[str], by_seed: list[dict], stats: list[dict | None]) -> None:
    for i, (seeds, s) in enumerate(zip(by_seed, stats)):
        ax.scatter([i] * len(seeds), list(seeds.values()), s=14, color="0.45", zorder=3)
        if s and s.get("mean") is not None:
            lo, hi = s.get("ci_low"), s.get("ci_high")
            err = [[s["mean"] - lo], [hi - s["mean"]]] if lo is not None else None
            ax.errorbar([i], [s["mean"]], yerr=err, fmt="o", color="C0", capsize=6, markersize=7, zorder=4)
    ax.set_xticks(range(len(arms)), arms, rotation=20, ha="right")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def plot(report: dict[str, Any], out: Path) -> Path | None:
    """report.png (module docstring), or None when no arm finished."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = {n: a for n, a in report["arms"].items() if "error" not in a}
    if not done:
        return None
    names, tasks = list(done), report["tasks"]
    fig, axes = plt.subplots(1, 1 + len(tasks), figsize=(4.2 * (1 + len(tasks)), 3.8), squeeze=False)
    _panel(axes[0][0], "reference loss (lower is better)", names,
           [a["reference_loss_by_seed"] for a in done.values()], [a["reference_loss"] for a in done.values()])
    for ax, task in zip(axes[0][1:], tasks):
        scores = [a["tasks"].get(task, {}) for a in done.values()]
        metric = next((s["metric"] for s in scores if s), "score")
        _panel(ax, f"{task}: test {metric}", names, [s.get("by_seed", {}) for s in scores], scores)
        c = report["controls"].get(task, {})
        for key, label, style in CONTROL_STYLES:
            value = (c.get(key) or {}).get("mean") if key == "scratch" else c.get(key)
            if value is not None:
                ax.axhline(value, linestyle=style, color="C3", linewidth=1, label=label)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"corpus ablation {report['name']}: {len(report['seeds'])} seeds, 95% intervals", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_outputs(report: dict[str, Any], root: Path) -> Path:
    """report.png, report.md and report.html under `root`; returns report.md's path."""
    png = plot(report, root / "report.png")
    atomic_write_bytes(root / "report.md", render(report, png).encode())
    atomic_write_bytes(root / "report.html", render_html(report, png).encode())
    return root / "report.md"


def render_html(report: dict[str, Any], png: Path | None) -> str:
    header, rows = table(report)
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    items = "".join(f"<li>{html.escape(s)}</li>" for s in report["sentences"])
    paid = "".join(f"<li>{html.escape(s)}</li>" for s in pretraining_verdicts(report))
    img = f'<img alt="reference loss and task scores per arm" src="{image_data_uri(png)}">' if png else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Corpus ablation {html.escape(report['name'])}"
            "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}"
            "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child{text-align:left}</style>"
            f"</head><body><h1>Corpus ablation {html.escape(report['name'])}</h1>"
            f"<p>Did pretraining pay:</p><ul>{paid}</ul>"
            f"<p>Preset {html.escape(report['preset'])}, seeds {report['seeds']}; one tokenizer; every model scored on "
            f"the same reference texts ({html.escape(report['reference'])}) and fine-tuned on the same task splits. "
            "Intervals: 95%, Student's t over seeds; differences paired by seed.</p>"
            f"<table><tr>{cells}</tr>{body}</table><ul>{items}</ul>{img}</body></html>\n")


def publish_report(name: str, root: Path) -> None:
    """The report as Prefect artifacts of the running flow (nothing outside a flow run)."""
    import json

    from prefect.artifacts import create_image_artifact, create_markdown_artifact, create_table_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is None:
        return
    report = json.loads((root / "report.json").read_text())
    create_markdown_artifact(key=artifact_key(name, "ablation-report"),
                             markdown=inline_images((root / "report.md").read_text(), root),
                             description=f"corpus ablation {name}: {root / 'report.md'}")
    header, rows = table(report)
    create_table_artifact(key=artifact_key(name, "ablation-table"), table=[dict(zip(header, r)) for r in rows],
                          description=f"corpus ablation {name}: per arm, with 95% intervals over seeds")
    if (root / "report.png").exists():
        create_image_artifact(image_url=image_data_uri(root / "report.png"), key=artifact_key(name, "ablation-plot"),
                              description=f"corpus ablation {name}: reference loss and task scores per arm")
