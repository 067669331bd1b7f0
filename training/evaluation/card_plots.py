"""The evaluation card's pictures (matplotlib, PNG) and its report.html.

- quality against throughput, the marker's area by the model's memory (MOROCCO's chart): the task
  score when every model has one, else the held-out language-model loss;
- probing accuracy per layer, per language and task, with the controls as dashed lines;
- training loss curves, from the metrics.json beside a stage's hf/ directory.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _name(e: dict[str, Any]) -> str:
    if e.get("name"):
        return e["name"]
    p = Path(e["path"])
    return f"{p.parent.name}/{p.name}" if p.name in ("hf",) or p.name.startswith("share-") else p.name


def quality_cost(entries: list[dict[str, Any]], out: Path) -> Path | None:
    """MOROCCO's chart: quality against throughput, marker area by peak memory. One panel for the models
    with a task score, one for those with a language-model loss (a card of a teacher, its student and
    their fine-tuned and compressed models has both)."""
    panels = []
    scored = [e for e in entries if e["quality"].get("task")]
    if scored:
        t = scored[0]["quality"]["task"]
        panels.append((scored, [e["quality"]["task"]["metrics"][e["quality"]["task"]["primary"]] for e in scored],
                       f"test {t['primary']} (higher is better)"))
    lm = [e for e in entries if not e["quality"].get("task") and e["quality"].get("applies")]
    if lm:
        panels.append((lm, [e["quality"]["value"] for e in lm], "held-out LM cross-entropy, nats (lower is better)"))
    if not panels:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.2), squeeze=False)
    for ax, (group, ys, label) in zip(axes[0], panels):
        mem = [max(e["cost"].get("peak_rss_over_imports_bytes") or e["cost"]["peak_rss_bytes"], 1) / (1 << 20)
               for e in group]
        xs = [e["cost"]["with_head"]["inputs_per_second_median"] for e in group]
        # one colour per model, named in the legend: labels written beside the points printed over each other
        # where two models scored alike (the teacher and its int8 copy)
        colours = plt.get_cmap("tab10")
        for i, (x, y, e, m) in enumerate(zip(xs, ys, group, mem)):
            ax.scatter([x], [y], s=[20 + m], alpha=0.6, color=colours(i % 10), label=f"{_name(e)} ({m:.0f} MiB)")
        ax.margins(0.25)
        ax.legend(fontsize=7, loc="best", markerscale=0.5, framealpha=0.8)
        ax.set_xlabel("inputs/s at batch 32, with the head (CPU)")
        ax.set_ylabel(label)
        ax.set_title("quality and cost (marker area: peak memory over the imports)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def probing(entries: list[dict[str, Any]], out: Path) -> Path | None:
    langs = sorted({lang for e in entries for lang in (e["quality"].get("probing") or {})})
    if not langs:
        return None
    names = ("SentLen", "WC", "BShift")
    plt = _plt()
    fig, axes = plt.subplots(len(langs), 3, figsize=(10, 3 * len(langs)), squeeze=False)
    for i, lang in enumerate(langs):
        for j, task in enumerate(names):
            ax = axes[i][j]
            first = None
            for e in entries:
                t = (e["quality"].get("probing") or {}).get(lang, {}).get(task)
                if t:
                    ax.plot(range(len(t["layers"])), t["layers"], marker="o", label=_name(e))
                    first = first or t
            if first:
                for key, style in (("chance", ":"), ("majority", "--"), ("bag_of_embeddings", "-.")):
                    ax.axhline(first[key], linestyle=style, color="grey", linewidth=1, label=key.replace("_", " "))
            ax.set_title(f"{task} ({lang})", fontsize=9)
            ax.set_xlabel("layer (0 = embeddings)", fontsize=8)
            ax.set_ylabel("probe accuracy", fontsize=8)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def loss_curves(entries: list[dict[str, Any]], out: Path) -> Path | None:
    curves = []
    for e in entries:
        m = Path(e["path"]).parent / "metrics.json"
        if m.exists():
            c = json.loads(m.read_text()).get("loss_curve") or []
            if c:
                curves.append((_name(e), [p["step"] for p in c], [p["loss"] for p in c]))
    if not curves:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for name, xs, ys in curves:
        ax.plot(xs, ys, label=name, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_html(md: str, images: list[Path], out: Path) -> Path:
    import markdown

    body = markdown.markdown(md, extensions=["tables"])
    imgs = "".join(f'<p><img src="{p.name}" alt="{p.stem}" style="max-width:100%"></p>' for p in images
                   if f"({p.name})" not in md)  # those report.md shows in its text (the chart after the verdict) stay there
    out.write_text("<!doctype html><html><head><meta charset='utf-8'><title>lmforge evaluation card</title>"
                   "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
                   "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}img{max-width:100%}</style></head><body>"
                   f"{body}{imgs}</body></html>\n", encoding="utf-8")
    return out
