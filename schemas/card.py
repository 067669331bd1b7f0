"""The evaluation card (`lmforge evaluate --model ...`): `report.json` (`lmforge.card/v1`) and its metric registry.

`report.json` holds one entry per model: its path, its kind (training.models.model_kinds), `quality` (the
language-model loss where one applies, with its standard error, or why none does; a fine-tuned model's
`task` score beside its controls; `probing` and `pseudo_perplexity` where asked) and `cost` (parameters,
disk, peak memory, init time, throughput and latency, each measured in a fresh process by
training/evaluation/resources.py). Readers (the card's markdown and plots, the Prefect table) go through `CardEntry`.

The card's headline table is described once, in CARD_METRICS: each metric names its markdown column (what
report.md and report.html show) and its Prefect-table column (numbers, for sorting in the UI); either may
be absent. Adding a card metric: one `Metric` entry (and, if the figure is new, where training/evaluation/card.py
`card_entry` measures it).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CARD_VERSION = "lmforge.card/v1"


@dataclass
class CardEntry:
    """One model on the card."""

    path: str
    """The model directory as given to `--model`."""
    kind: str
    """Its model kind (training.models.model_kinds.KINDS)."""
    quality: dict[str, Any]
    """`applies` (bool); if true `figure`, `value`, `standard_error`, `tokens`, `rows` (+ `perplexity`), else `why`;
    optional `task` {metrics, primary, test_examples, controls, reference}, `few_shot` (a decoder's, on the task:
    training/evaluation/few_shot.py), `probing`, `pseudo_perplexity`."""
    cost: dict[str, Any]
    """training/evaluation/resources.py's measurement: parameters, disk_bytes, peak_rss_bytes, init_seconds, with_head, ...,
    and `machine`: what other processes used of the CPU while it was measured (training/evaluation/card.py)."""
    name: str = ""
    """Its role in the run (teacher, student, fine-tuned, int8, pruned 25%; training/evaluation/card_roles.py)."""

    @property
    def label(self) -> str:
        return self.name or self.path

    def __post_init__(self) -> None:
        if "applies" not in self.quality:
            raise ValueError(f"card entry {self.path}: quality has no 'applies'")
        missing = [k for k in ("parameters", "disk_bytes", "with_head") if k not in self.cost]
        if missing:
            raise ValueError(f"card entry {self.path}: cost lacks {', '.join(missing)}")

    @property
    def task(self) -> dict[str, Any] | None:
        return self.quality.get("task")

    @property
    def task_score(self) -> float | None:
        """The task's headline (primary) metric on the test split, if it was scored."""
        t = self.task
        return t["metrics"][t["primary"]] if t else None

    @property
    def lm_loss(self) -> float | None:
        return self.quality["value"] if self.quality.get("applies") else None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "kind": self.kind, "quality": self.quality, "cost": self.cost}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CardEntry:
        missing = [k for k in ("path", "kind", "quality", "cost") if k not in d]
        if missing:
            raise ValueError(f"card entry {d.get('path', '?')}: missing {', '.join(missing)}")
        return cls(d["path"], d["kind"], d["quality"], d["cost"], d.get("name", ""))


@dataclass
class Card:
    models: list[CardEntry]
    images: list[str] = field(default_factory=list)
    """The plots written beside report.json (file names)."""
    contamination: dict[str, Any] | None = None
    """What the pretraining corpus held of the evaluation sets (training/evaluation/card_contamination.py); None: unknown."""
    summary: dict[str, Any] | None = None
    """The card's opening facts: corpus, task, scores against the controls, verdict, what did not run
    (training/evaluation/card_summary.py); None on a card written before it."""

    def to_dict(self) -> dict[str, Any]:
        return {"schema": CARD_VERSION, "models": [e.to_dict() for e in self.models], "images": self.images,
                "contamination": self.contamination, "summary": self.summary}

    @classmethod
    def read(cls, path: str | Path) -> Card:
        """report.json of a card; ValueError naming the file for anything else (an evaluate report, say)."""
        d = json.loads(Path(path).read_text())
        if d.get("schema", CARD_VERSION) != CARD_VERSION or "models" not in d:
            raise ValueError(f"{path}: not an evaluation card ({CARD_VERSION})")
        return cls([CardEntry.from_dict(e) for e in d["models"]], list(d.get("images", [])), d.get("contamination"),
                   d.get("summary"))


# ---- the headline table: one description, two renderings ---------------------------------------------

def _mib(b: float) -> str:
    return f"{b / (1 << 20):.1f}"


def _lm_text(e: CardEntry) -> str:
    q = e.quality
    return f"{q['value']:.3f} ± {q['standard_error']:.3f}" if q.get("applies") else "-"


def _task_text(e: CardEntry) -> str:
    return f"{e.task_score:.4f}" if e.task else "-"


def _rss_text(e: CardEntry) -> str:
    over = e.cost["peak_rss_over_imports_bytes"]
    return f"{_mib(e.cost['peak_rss_bytes'])} ({_mib(over) if over is not None else '-'})"


def _throughput_text(e: CardEntry) -> str:
    enc = e.cost.get("encoder_only", {}).get("inputs_per_second_median")
    return f"{enc if enc is not None else '-'} / {e.cost['with_head']['inputs_per_second_median']}"


@dataclass(frozen=True)
class Metric:
    """One column of the card's headline table."""

    markdown: str | None
    """Its header in report.md (None: not in the markdown table)."""
    text: Callable[[CardEntry], str] | None
    table: str | None = None
    """Its key in the Prefect UI's table artifact (None: not there)."""
    value: Callable[[CardEntry], Any] | None = None
    """Its value there: a number where there is one, so the UI sorts it."""
    md_align: str = "---:"


CARD_METRICS: tuple[Metric, ...] = (
    Metric("kind", lambda e: e.kind, "kind", lambda e: e.kind, "---"),
    Metric("held-out LM loss, nats", _lm_text),
    Metric("test {task}", _task_text),
    Metric(None, None, "task score", lambda e: f"{e.task['primary']} {e.task_score:.4f}" if e.task else None),
    Metric(None, None, "held-out LM loss", lambda e: e.quality.get("value")),
    Metric("params (w/o emb.)", lambda e: f"{e.cost['parameters']['total']:,} ({e.cost['parameters']['without_embeddings']:,})",
           "parameters", lambda e: e.cost["parameters"]["total"]),
    Metric("disk MiB", lambda e: _mib(e.cost["disk_bytes"]), "disk MiB", lambda e: round(e.cost["disk_bytes"] / (1 << 20), 2)),
    Metric("peak RSS MiB (over imports)", _rss_text),
    Metric("init s", lambda e: f"{e.cost['init_seconds']:.2f}"),
    Metric("inputs/s, batch 32 (encoder / +head)", _throughput_text,
           "inputs/s (batch 32)", lambda e: e.cost["with_head"]["inputs_per_second_median"]),
    Metric("p50 / p95 ms, batch 1 (+head)",
           lambda e: f"{e.cost['with_head']['latency_ms_p50']:.1f} / {e.cost['with_head']['latency_ms_p95']:.1f}",
           "p95 ms (batch 1)", lambda e: e.cost["with_head"]["latency_ms_p95"]),
)
"""The card's headline columns, in order, after the model's name."""


def markdown_table(entries: list[CardEntry], base: str | Path | None = None) -> list[str]:
    """report.md's headline table (report.html is made from report.md): one unit per column, the task's metric named
    in its header; `where` relative to `base` (the run folder) when the model is inside it."""
    task = next((e.task["primary"] for e in entries if e.task), None)
    cols = [m for m in CARD_METRICS if m.markdown and (task or "{task}" not in m.markdown)]
    lines = ["| model | " + " | ".join(m.markdown.format(task=task) for m in cols) + " | where |",
             "|---|" + "|".join(m.md_align for m in cols) + "|---|"]
    lines += [f"| {e.label} | " + " | ".join(m.text(e) for m in cols) + f" | `{shown_path(e.path, base)}` |" for e in entries]
    return lines


def shown_path(path: str, base: str | Path | None) -> str:
    """`path` relative to `base` when it is inside it, else as given."""
    if base is None:
        return path
    try:
        return str(Path(path).resolve().relative_to(Path(base).resolve()))
    except ValueError:
        return path


def table_rows(entries: list[CardEntry], names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The Prefect table artifact's rows; `names` maps a model path to the name the flow gave it."""
    names = names or {}
    return [{"model": names.get(e.path, e.label), **{m.table: m.value(e) for m in CARD_METRICS if m.table}, "path": e.path}
            for e in entries]


def machine_note(entries: list[CardEntry], busy_share: float = 0.10) -> str:
    """One line on the machine while the cost columns were measured: quiet, or busy with what other processes
    used of it (their CPU time over the measurement's wall time and cores); empty if it was not recorded."""
    seen = [e.cost["machine"] for e in entries if e.cost.get("machine")]
    if not seen:
        return ""
    wall = sum(m["wall_seconds"] for m in seen)
    other = sum(m["other_cpu_seconds"] for m in seen)
    share = other / max(wall * seen[0]["cores"], 1e-9)
    load = max(m["load_1min"] for m in seen)
    if share > busy_share:
        return (f"**The machine was busy while cost was measured:** other processes used {share:.0%} of its "
                f"{seen[0]['cores']} cores ({other:,.0f} CPU-seconds in {wall:,.0f} s; 1-minute load up to {load:.1f}). "
                "Throughput, latency and init time are slower than on a quiet machine; measure again when it is.")
    return (f"Cost measured on a quiet machine: other processes used {share:.1%} of its {seen[0]['cores']} cores "
            f"({other:,.1f} CPU-seconds in {wall:,.0f} s).")
