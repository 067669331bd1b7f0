"""The registries (docs/ARCHITECTURE.md "Registries"): names of objectives, tokenizer families, model families and
model kinds are compared only inside their registries, and every record has its entry in each function table
keyed by it."""
from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from pipelines.shards.masking import BLOCK_MASKERS, MASKERS
from pipelines.tokenizer_families import FAMILIES as TOKENIZER_FAMILIES
from pipelines.tokenizer_families import LAYOUTS as SPECIAL_LAYOUTS
from schemas.objectives import REGISTRY as OBJECTIVES
from schemas.shards import LAYOUTS
from training.models.model import MODEL_FAMILIES, WRAPPERS
from training.models.model_kinds import KINDS
from training.pretraining.batches import BATCHES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("common", "schemas", "pipelines", "training", "flows", "lmforge", "bench")
REGISTRY_FILES = {"schemas/objectives.py", "schemas/shards.py", "pipelines/tokenizer_families.py",
                  "training/models/model.py", "training/models/model_kinds.py"}
"""Where the records are written: they may name (and so compare) their own names."""
NAMES = {
    "objective": set(OBJECTIVES),
    "tokenizer family": set(TOKENIZER_FAMILIES),
    "special-token layout": set(LAYOUTS),
    "model family": set(MODEL_FAMILIES) - {"any"},  # "any" is an ordinary word in other comparisons
    "model kind": set(KINDS),
}


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for e in node.elts for s in _strings(e)]
    return []


def string_comparisons(path: Path) -> list[tuple[int, str, str]]:
    """(line, what, name) for every `x == "name"`, `!=`, `in ("name", ...)` of a registered name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        if not any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
            continue
        for s in [s for part in (node.left, *node.comparators) for s in _strings(part)]:
            for what, names in NAMES.items():
                if s in names:
                    found.append((node.lineno, what, s))
    return found


def test_no_string_comparison_of_registered_names_outside_the_registries():
    bad = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in REGISTRY_FILES:
                continue
            bad += [f"{rel}:{line}: {what} {name!r}" for line, what, name in string_comparisons(path)]
    assert not bad, "compared as strings; ask the registry instead:\n" + "\n".join(bad)


def test_the_check_finds_a_comparison(tmp_path):
    p = tmp_path / "x.py"
    p.write_text('def f(o, k):\n    return o == "causal" or k in ("wordpiece", "other") or "seq2seq" != k\n')
    assert [(w, n) for _, w, n in string_comparisons(p)] == [
        ("objective", "causal"), ("tokenizer family", "wordpiece"), ("model kind", "seq2seq")]


def test_every_objective_has_its_functions():
    for name, o in OBJECTIVES.items():
        assert o.model_kind in KINDS, name
        assert o.model_kind in BATCHES and o.model_kind in WRAPPERS, name
        assert o.model_kind in MODEL_FAMILIES["any"], name  # an `any` preset trains every objective
        assert (name in MASKERS) == o.stores_variants, name
    assert set(BLOCK_MASKERS) <= set(MASKERS)
    for kind in (*BATCHES, *WRAPPERS):
        assert kind in KINDS
    for builders in MODEL_FAMILIES.values():
        assert set(builders) <= set(KINDS)


def test_every_tokenizer_family_has_a_layout_the_shards_know():
    assert {s.layout for s in SPECIAL_LAYOUTS} == set(LAYOUTS)
    for f in TOKENIZER_FAMILIES.values():
        assert f.specials in SPECIAL_LAYOUTS, f.name


def _entry(path="m", task=True):
    from schemas.card import CardEntry

    quality = {"applies": not task, "value": 2.5, "standard_error": 0.01}
    if task:
        quality["task"] = {"primary": "accuracy", "metrics": {"accuracy": 0.81, "macro_f1": 0.7}, "test_examples": 10}
    cost = {"parameters": {"total": 1234, "without_embeddings": 1000}, "disk_bytes": 3 << 20, "peak_rss_bytes": 5 << 20,
            "peak_rss_over_imports_bytes": None, "init_seconds": 0.5,
            "with_head": {"inputs_per_second_median": 99.0, "latency_ms_p50": 1.0, "latency_ms_p95": 2.0}}
    return CardEntry(path, "classifier" if task else "masked_lm", quality, cost)


def test_card_metrics_render_markdown_and_the_prefect_table_from_one_description(tmp_path):
    from schemas.card import CARD_METRICS, Card, Metric, markdown_table, table_rows

    md = markdown_table([_entry("a"), _entry("b", task=False)])
    assert md[0] == ("| model | kind | held-out LM loss, nats | test accuracy | params (w/o emb.) | disk MiB | "
                     "peak RSS MiB (over imports) | init s | inputs/s, batch 32 (encoder / +head) | "
                     "p50 / p95 ms, batch 1 (+head) | where |")  # one unit per column: the task's metric in its header
    assert md[2] == "| a | classifier | - | 0.8100 | 1,234 (1,000) | 3.0 | 5.0 (-) | 0.50 | - / 99.0 | 1.0 / 2.0 | `a` |"
    assert md[3].startswith("| b | masked_lm | 2.500 ± 0.010 | - |")
    assert "test accuracy" not in markdown_table([_entry("b", task=False)])[0]  # no task: no task column
    # paths relative to the run folder when inside it
    assert markdown_table([_entry(str(tmp_path / "finetune" / "hf"))], base=tmp_path)[2].endswith("| `finetune/hf` |")
    named = _entry("runs/x/distill/hf")
    named.name = "student"
    assert markdown_table([named])[2].startswith("| student | classifier |") and markdown_table([named])[2].endswith("| `runs/x/distill/hf` |")
    rows = table_rows([_entry("a")], {"a": "student"})
    assert rows == [{"model": "student", "kind": "classifier", "task score": "accuracy 0.8100", "held-out LM loss": 2.5,
                     "parameters": 1234, "disk MiB": 3.0, "inputs/s (batch 32)": 99.0, "p95 ms (batch 1)": 2.0, "path": "a"}]
    # a new metric is one entry, in both renderings
    extra = (*CARD_METRICS, Metric("macro-F1", lambda e: f"{e.task['metrics']['macro_f1']:.2f}", "macro-F1",
                                   lambda e: e.task["metrics"]["macro_f1"]))
    import schemas.card as card

    card.CARD_METRICS, saved = extra, card.CARD_METRICS
    try:
        assert markdown_table([_entry()])[0].endswith("| macro-F1 | where |") and table_rows([_entry()])[0]["macro-F1"] == 0.7
    finally:
        card.CARD_METRICS = saved
    p = tmp_path / "report.json"
    p.write_text(json.dumps(Card([named], ["x.png"]).to_dict()))
    assert Card.read(p).models[0].task_score == 0.81 and Card.read(p).models[0].label == "student"
    p.write_text('{"rows": []}')
    with pytest.raises(ValueError, match="not an evaluation card"):
        Card.read(p)


def test_the_card_says_whether_the_machine_was_quiet():
    from schemas.card import machine_note

    quiet, busy = _entry("a"), _entry("b")
    quiet.cost["machine"] = {"wall_seconds": 20.0, "other_cpu_seconds": 0.4, "cores": 2, "load_1min": 1.1}
    busy.cost["machine"] = {"wall_seconds": 20.0, "other_cpu_seconds": 30.0, "cores": 2, "load_1min": 2.9}
    assert machine_note([quiet]).startswith("Cost measured on a quiet machine: other processes used 1.0% of its 2 cores")
    note = machine_note([quiet, busy])  # 30.4 CPU-seconds of 2 x 40 s: 38%
    assert note.startswith("**The machine was busy while cost was measured:** other processes used 38% of its 2 cores")
    assert machine_note([_entry("c")]) == ""  # cards written before this was measured say nothing


def test_every_choice_list_is_its_registry():
    """A choice shown or validated (a flow parameter's drop-down, a CLI's choices, a help text) is read from the
    registry that holds it, so a new entry appears everywhere at once."""
    import argparse
    import typing

    from flows.params import ClusterKind, Preset, TaskKind
    from flows.presets import RUN_PRESETS
    from schemas.finetune import TASKS
    from training.launch.cluster import KINDS as CLUSTER_KINDS
    from training.launch.command import add_launch_args
    from training.models.model import MODEL_PRESETS
    from training.pretraining.config import PretrainConfig

    assert typing.get_args(Preset) == tuple(RUN_PRESETS)
    assert typing.get_args(ClusterKind) == ("local", *CLUSTER_KINDS)
    assert typing.get_args(TaskKind) == ("", *TASKS)
    model_help = next(f.metadata["help"] for f in dataclasses.fields(PretrainConfig) if f.name == "model")
    assert all(name in model_help for name in MODEL_PRESETS), model_help
    sp = argparse.ArgumentParser()
    add_launch_args(sp)
    assert {a.dest: tuple(a.choices) for a in sp._actions if a.dest in ("emit", "submit")} == {"emit": CLUSTER_KINDS, "submit": CLUSTER_KINDS}


def test_the_cost_server_imports_each_model_types_modeling_code_before_it_forks(tmp_path):
    """training.evaluation.resources: the model type's modeling module is imported once in the server (each measured
    child would otherwise import it again, ~5 s of CPU, inside its init time); a folder it cannot read gives None."""
    import sys

    from training.evaluation.resources import import_modeling_code

    for name, model_type in (("pln", "roberta-prelayernorm"), ("unknown", "no-such-type"), ("empty", None)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"model_type": model_type} if model_type else {}))
    module = "transformers.models.roberta_prelayernorm.modeling_roberta_prelayernorm"
    assert import_modeling_code(tmp_path / "pln") == module and module in sys.modules
    assert import_modeling_code(tmp_path / "unknown") is None and import_modeling_code(tmp_path / "empty") is None
    assert import_modeling_code(tmp_path / "nope") is None
