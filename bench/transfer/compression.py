"""The compression part of `lmforge bench transfer`: what a smaller or cheaper model keeps of its teacher's task
score, and what it gains in cost, for the real pretrained MiniLM and for lmforge's own model.

For each family (the teacher's fine-tuned models are the transfer bench's own rows):
1. a half-depth student by DistilBERT's recipe (`lmforge distill`: the teacher's layers spread over its depth,
   first and last included, then `--distill-steps` of the DistilBERT loss on the family's shards, its KL term at
   the masked positions: 4x cheaper here than over every position, see training/compression/distill.py). MiniLM's MLM
   teacher is the shipped encoder with the MLM head the bench fitted to it (`minilm_probe`);
2. on every compression task, the student fine-tuned with the same recipe and seeds as its teacher plus
   task-level distillation from the teacher's fine-tuned model (`finetune --teacher`); its score as a share of
   the teacher's mean over the same seeds;
3. the teacher's fine-tuned model (its best seed, the one `finetune` saves) quantized to int8
   (`lmforge compress --method int8`) and head-pruned to each of `--prune-shares` (`--method prune`, importance on
   the validation split), each scored on the test split beside the same model in fp32;
4. cost by MOROCCO's protocol (training/evaluation/resources.py, a fresh process per model), on the first compression task's
   real test inputs: throughput at batch 32 (median of `--cost-repeats`), latency at batch 1, size on disk,
   peak memory. Measured last, when no step is training.
Scores and costs are cached in <work>/compress/measured.json by the manifest of the step that wrote each model,
so a resumed run measures only what changed.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bench.kit.tasks import TASKS, flags

STUDENT_SHARE_GOAL = 0.97
STUDENT_SPEED_GOAL = 1.6
INT8_SHARE_GOAL = 0.99
INT8_SIZE_GOAL = 2.0
PRUNE_POINTS = 1.0


def families(cfg, data: dict[str, Path], models: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """The teachers the goals name: MiniLM (when the bench ran its rows) and lmforge's own model."""
    out = {}
    if "minilm" in models and "minilm_probe" in models:
        out["minilm"] = {"mlm_teacher": models["minilm_probe"], "shards": data["minilm_shards"], "lr": cfg.ft_lr_minilm}
    if "lmforge" in models:
        out["lmforge"] = {"mlm_teacher": models["lmforge"], "shards": data["shards"], "lr": cfg.ft_lr_small}
    return out


def task_config(w: Path, task: str, labeled: Path, max_length: int) -> Path:
    """The task's finetune --config with the bench's max_length, so a score here reads inputs as the fine-tune did."""
    spec = {**json.loads((labeled / "finetune.json").read_text()), "max_length": max_length}
    p = w / "compress" / f"{task}.task.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    if not p.exists() or json.loads(p.read_text()) != spec:
        p.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    return p


def compress_steps(s, cfg, data: dict[str, Path], models: dict[str, Path],
                   runs: dict[str, dict[str, Path]]) -> dict[str, Any]:
    """Run (or keep, on --resume) every training and compression step; returns where each model is."""
    w = Path(cfg.work)
    plan: dict[str, Any] = {}
    for fam, f in families(cfg, data, models).items():
        root = w / "compress" / fam
        distill = s.run(f"distill_{fam}", root / "distill", [
            "distill", *flags(teacher=f["mlm_teacher"], shards=f["shards"], output=root / "distill",
                              steps=cfg.distill_steps, batch_size=16, restrict_ce_to_mask=True, log_every=50,
                              eval_batches=50)])
        p: dict[str, Any] = {"distill": distill, "tasks": {}}
        for task in cfg.compress_tasks:
            if task not in runs or fam not in runs[task]:
                continue
            tplan = TASKS[task]
            teacher = runs[task][fam]
            labeled = w / "labeled" / task
            tcfg = task_config(w, task, labeled, tplan.max_length)
            student = s.run(f"finetune_{task}_{fam}_student", root / task / "student", [
                "finetune", "--config", str(labeled / "finetune.json"),
                *flags(model=distill / "hf", output=root / task / "student", teacher=teacher / "hf",
                       lr=f["lr"], controls=False, seeds=cfg.seeds, max_train=tplan.max_train,
                       max_length=tplan.max_length, epochs=tplan.epochs, bf16=True)])
            int8 = s.run(f"int8_{task}_{fam}", root / task / "int8", [
                "compress", *flags(model=teacher / "hf", output=root / task / "int8", method="int8")])
            pruned = s.run(f"prune_{task}_{fam}", root / task / "pruned", [
                "compress", *flags(model=teacher / "hf", output=root / task / "pruned", method="prune",
                                   shares=cfg.prune_shares, task_config=tcfg)])
            p["tasks"][task] = {"teacher_run": teacher, "student_run": student, "int8": int8, "pruned": pruned,
                                "task_config": tcfg}
        plan[fam] = p
    return plan


def _stamp(model_dir: Path) -> str:
    """The identity of a model's files: the manifest of the step that wrote them."""
    for d in (model_dir, model_dir.parent):
        m = d / "manifest.json"
        if m.exists():
            return hashlib.sha256(m.read_bytes()).hexdigest()[:16]
    raise FileNotFoundError(f"{model_dir}: no manifest.json beside the model")


class Measured:
    """Scores and costs, cached by model path and the manifest that wrote it."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def get(self, what: str, model_dir: Path, fn, *args: Any) -> Any:
        """fn(model_dir, *args), or its cached value while the model's manifest is unchanged."""
        key = f"{what}:{model_dir}"
        stamp = _stamp(model_dir)
        hit = self.data.get(key)
        if hit and hit["stamp"] == stamp:
            return hit["value"]
        print(f"[measure] {what} {model_dir}", flush=True)
        value = fn(model_dir, *args)
        self.data[key] = {"stamp": stamp, "value": value}
        self.path.write_text(json.dumps(self.data, indent=1) + "\n")
        return value


def _score(model_dir: Path, tcfg: Path) -> float:
    from training.evaluation.card import task_quality

    q = task_quality(str(model_dir), str(tcfg))
    return q["metrics"][q["primary"]]


def _cost_texts(tcfg: Path, out: Path, n: int) -> Path:
    """The first `n` test texts of a task, one JSON object per line, as resource_inputs reads them."""
    from training.finetuning.finetune import FinetuneConfig, load_data

    spec = json.loads(tcfg.read_text())
    data = load_data(FinetuneConfig(**{**spec, "model": "unused", "output": str(out.parent)}))
    rows = data.test[:n]
    if not rows:
        raise SystemExit(f"bench transfer: {tcfg} has no test rows to measure cost on")
    out.write_text("".join(json.dumps({"text": r.text}) + "\n" for r in rows))
    return out


def _cost(model_dir: Path, texts: Path, max_length: int, cfg) -> dict[str, Any]:
    from training.evaluation.card import resource_inputs, resources

    ids, lengths = resource_inputs(str(model_dir), None, str(texts), max_length, rows=cfg.cost_inputs)
    return resources(str(model_dir), ids, lengths, 2, cfg.cost_inputs, cfg.cost_repeats, 100)


def _seed_scores(run: Path, row: str = "pretrained") -> dict[str, Any]:
    from schemas.finetune import FinetuneMetrics

    m = FinetuneMetrics.read(run / "metrics.json")
    sc = m.rows[row].scores["test"][m.primary_metric]
    return {"mean": sc.mean, "sd": sc.sd, "per_seed": sc.per_seed, "saved_seed": (m.saved or {}).get("seed")}


def _throughput(c: dict[str, Any]) -> float:
    return c["with_head"]["inputs_per_second_median"]


def measure(cfg, plan: dict[str, Any]) -> dict[str, Any]:
    """Every score and cost of the compression table (cached; cost last, with nothing else running)."""
    from schemas.manifest import read_manifest

    w = Path(cfg.work)
    cache = Measured(w / "compress" / "measured.json")
    out: dict[str, Any] = {"config": {"distill_steps": cfg.distill_steps, "tasks": cfg.compress_tasks,
                                      "prune_shares": cfg.prune_shares, "cost_inputs": cfg.cost_inputs,
                                      "cost_repeats": cfg.cost_repeats, "seeds": cfg.seeds}, "families": {}}
    for fam, p in plan.items():
        dm = json.loads((p["distill"] / "metrics.json").read_text())
        f: dict[str, Any] = {"distill": {k: dm.get(k) for k in (
            "steps", "tokens_seen", "copied_layers", "teacher_layers", "student_layers", "teacher_parameters",
            "student_parameters", "student_valid_mlm_loss", "teacher_valid_mlm_loss", "fit_seconds")}, "tasks": {}}
        for task, t in p["tasks"].items():
            teacher_hf, tcfg = t["teacher_run"] / "hf", t["task_config"]
            shares = read_manifest(t["pruned"])["config"]["shares"]
            pruned = {}
            for share in shares:
                d = t["pruned"] / f"share-{share:.2f}"
                spec = json.loads((d / "pruning.json").read_text())
                pruned[f"{share:.2f}"] = {"score": cache.get("score", d, _score, tcfg),
                                          "heads_removed": spec["heads_removed"], "heads_total": spec["heads_total"]}
            f["tasks"][task] = {
                "primary": json.loads((t["teacher_run"] / "metrics.json").read_text())["primary_metric"],
                "teacher": _seed_scores(t["teacher_run"]), "student": _seed_scores(t["student_run"]),
                "fp32": cache.get("score", teacher_hf, _score, tcfg),
                "int8": cache.get("score", t["int8"], _score, tcfg),
                "pruned": pruned}
        out["families"][fam] = f
    # cost, on the first compression task's test inputs, each model in its own process
    for fam, p in plan.items():
        if not p["tasks"]:
            continue
        task, t = next(iter(p["tasks"].items()))
        texts = _cost_texts(t["task_config"], w / "compress" / f"{task}.cost-texts.jsonl", cfg.cost_inputs)
        length = TASKS[task].max_length
        models = {"teacher": t["teacher_run"] / "hf", "student": t["student_run"] / "hf", "int8": t["int8"],
                  **{f"pruned {k}": t["pruned"] / f"share-{k}" for k in out["families"][fam]["tasks"][task]["pruned"]}}
        out["families"][fam]["cost"] = {
            "task": task, "max_length": length,
            "models": {name: cache.get(f"cost{cfg.cost_inputs}x{cfg.cost_repeats}", d, _cost,
                                       texts, length, cfg) for name, d in models.items()}}
    return out


# ---------------------------------------------------------------------------------------------
# judging and rendering


def best_prune_share(task: dict[str, Any]) -> tuple[float, float] | None:
    """(largest share whose score is within PRUNE_POINTS of the fp32 model's, its score)."""
    ok = [(float(k), v["score"]) for k, v in task["pruned"].items() if 100 * (task["fp32"] - v["score"]) <= PRUNE_POINTS]
    return max(ok) if ok else None


def goals(comp: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    out = []
    for fam, f in comp.get("families", {}).items():
        cost = (f.get("cost") or {}).get("models", {})
        speed = _throughput(cost["student"]) / _throughput(cost["teacher"]) if cost else None
        shares = {t: x["student"]["mean"] / x["teacher"]["mean"] for t, x in f["tasks"].items()}
        ok = bool(shares) and speed is not None and all(v >= STUDENT_SHARE_GOAL for v in shares.values()) \
            and speed >= STUDENT_SPEED_GOAL
        out.append((f"{fam}: a half-depth student keeps >= {STUDENT_SHARE_GOAL:.0%} of its teacher's task score with "
                    f">= {STUDENT_SPEED_GOAL}x its throughput", ok if shares else None,
                    ", ".join(f"{t} {100 * v:.1f}%" for t, v in shares.items())
                    + (f"; throughput {speed:.2f}x" if speed else "")))
        q_shares = {t: x["int8"] / x["fp32"] for t, x in f["tasks"].items()}
        size = cost["teacher"]["disk_bytes"] / cost["int8"]["disk_bytes"] if cost else None
        qspeed = _throughput(cost["int8"]) / _throughput(cost["teacher"]) if cost else None
        ok = bool(q_shares) and size is not None and all(v >= INT8_SHARE_GOAL for v in q_shares.values()) \
            and size >= INT8_SIZE_GOAL and qspeed > 1.0
        out.append((f"{fam}: int8 keeps >= {INT8_SHARE_GOAL:.0%} of the task score, a file >= {INT8_SIZE_GOAL:g}x "
                    f"smaller and a measured CPU speed-up", ok if q_shares else None,
                    ", ".join(f"{t} {100 * v:.1f}%" for t, v in q_shares.items())
                    + (f"; file {size:.2f}x smaller; throughput {qspeed:.2f}x" if size else "")))
        best = {t: best_prune_share(x) for t, x in f["tasks"].items()}
        out.append((f"{fam}: the share of heads pruning removes for <= {PRUNE_POINTS:g} point of task score",
                    None if not best else all(b is not None for b in best.values()),
                    ", ".join(f"{t} {'none' if b is None else f'{b[0]:.0%}'}" for t, b in best.items())))
    return out


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def _mib(b: int) -> str:
    return f"{b / 2**20:.1f}"


def render(comp: dict[str, Any], controls: dict[str, dict[str, float]] | None = None) -> str:
    """The section; `controls`: per task, the bench's TF-IDF + LR and majority means on the same test split."""
    if not comp.get("families"):
        return ""
    c = comp["config"]
    lines = ["", "### Compression: students, int8 and pruning, quality and cost together", "",
             f"Half-depth students by DistilBERT's recipe ({c['distill_steps']} steps of 16 x 128 tokens on each "
             f"family's shards, KL at the masked positions), then fine-tuned on each task with task-level distillation from the teacher's "
             f"fine-tuned model (alpha 0.5, T 2), seeds {' '.join(map(str, c['seeds']))}, the teacher's recipe. int8 "
             "and pruning start from the teacher's saved fine-tuned model (its best seed on validation) and are "
             "scored on the same test split as that model in fp32. Scores are the task's primary test metric "
             "(x 100).", ""]
    lines += ["| family | task | teacher (mean ± sd) | student (mean ± sd) | student / teacher | fp32 (saved seed) | "
              "int8 | int8 / fp32 | pruned: share of heads -> score |",
              "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for fam, f in comp["families"].items():
        for task, x in f["tasks"].items():
            tm, sm = x["teacher"], x["student"]
            prune = ", ".join(f"{float(k):.0%} {_pts(v['score'])}" for k, v in x["pruned"].items())
            lines.append(f"| {fam} | {task} ({x['primary']}) | {_pts(tm['mean'])} ± {100 * (tm['sd'] or 0):.1f} | "
                         f"{_pts(sm['mean'])} ± {100 * (sm['sd'] or 0):.1f} | {100 * sm['mean'] / tm['mean']:.1f}% | "
                         f"{_pts(x['fp32'])} | {_pts(x['int8'])} | {100 * x['int8'] / x['fp32']:.1f}% | {prune} |")
    if controls:
        lines += ["", "Controls on the same test splits (the transfer table's rows): " + "; ".join(
            f"{t} TF-IDF + LR {_pts(c.get('tfidf_lr'))}, majority {_pts(c.get('majority'))}"
            for t, c in controls.items() if t in comp["config"]["tasks"]) + "."]
    lines += ["", "Cost, MOROCCO's protocol (training/evaluation/resources.py, each model in a fresh process, 2 torch threads): "
              f"{c['cost_inputs']:,} real test inputs of the first task padded to its fine-tuning length, batch 32, "
              f"median of {c['cost_repeats']} passes; latency at batch 1 over 100 inputs.", "",
              "| family | model | layers / heads | parameters (without embeddings) | weights on disk (MiB) | "
              "peak RSS (MiB) | inputs/s, with head | x teacher | inputs/s, encoder only | p50 / p95 ms (batch 1) |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for fam, f in comp["families"].items():
        cost = f.get("cost")
        if not cost:
            continue
        base = _throughput(cost["models"]["teacher"])
        d = f["distill"]
        for name, m in cost["models"].items():
            shape = {"teacher": f"{d['teacher_layers']}", "student": f"{d['student_layers']} (teacher's "
                     f"{', '.join(map(str, d['copied_layers']))})", "int8": f"{d['teacher_layers']}"}.get(name, "")
            if name.startswith("pruned "):
                task = next(iter(f["tasks"].values()))
                pr = task["pruned"][name.split()[1]]
                shape = f"{d['teacher_layers']}, {pr['heads_total'] - pr['heads_removed']}/{pr['heads_total']} heads"
            p = m["parameters"]
            lines.append(f"| {fam} | {name} | {shape} | {p['total'] / 1e6:.2f}M ({p['without_embeddings'] / 1e6:.2f}M) | "
                         f"{_mib(m['disk_bytes'])} | {_mib(m['peak_rss_bytes'])} | {_throughput(m):.0f} | "
                         f"{_throughput(m) / base:.2f}x | {m['encoder_only']['inputs_per_second_median']:.0f} | "
                         f"{m['with_head']['latency_ms_p50']:.1f} / {m['with_head']['latency_ms_p95']:.1f} |")
    lines += ["", "Distillation:", ""]
    for fam, f in comp["families"].items():
        d = f["distill"]
        lines.append(f"- {fam}: {d['teacher_layers']} -> {d['student_layers']} layers (teacher's "
                     f"{d['copied_layers']}), {d['teacher_parameters'] / 1e6:.1f}M -> {d['student_parameters'] / 1e6:.1f}M "
                     f"parameters, {d['steps']} steps ({d['tokens_seen']:,} tokens, {d['fit_seconds'] / 60:.0f} min); "
                     f"held-out MLM loss student {d['student_valid_mlm_loss']:.3f} vs teacher "
                     f"{d['teacher_valid_mlm_loss']:.3f}.")
    seen = max(f["distill"]["tokens_seen"] for f in comp["families"].values())
    lines += ["", f"For scale: each student's general distillation here saw at most {seen / 1e6:.1f}M tokens of the bench's "
              "corpus; DistilBERT's saw English Wikipedia and the Toronto Book Corpus for about 90 hours on 8 V100s "
              "(Sanh et al. 2019). int8 is `lmforge compress --method int8` with its defaults: per-channel int8 Linear "
              "weights with dynamically quantized activations, and int8 embedding rows (weight-only)."]
    return "\n".join(lines) + "\n"


def plot(comp: dict[str, Any], path: Path) -> Path | None:
    """MOROCCO's chart: task score against throughput, marker area by peak memory, per family."""
    fams = {k: f for k, f in comp.get("families", {}).items() if f.get("cost")}
    if not fams:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(fams), figsize=(6 * len(fams), 4.5), squeeze=False)
    for ax, (fam, f) in zip(axes[0], fams.items()):
        cost = f["cost"]
        x = f["tasks"][cost["task"]]
        scores = {"teacher": x["fp32"], "student": x["student"]["mean"], "int8": x["int8"],
                  **{f"pruned {k}": v["score"] for k, v in x["pruned"].items()}}
        peaks = [m["peak_rss_bytes"] / 2**20 for m in cost["models"].values()]
        scale = 400 / max(peaks)
        for name, m in cost["models"].items():
            tp, y = _throughput(m), 100 * scores[name]
            ax.scatter(tp, y, s=m["peak_rss_bytes"] / 2**20 * scale, alpha=0.5)
            label = f"{name} (mean of {len(x['student']['per_seed'])} seeds)" if name == "student" else name
            ax.annotate(label, (tp, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("inputs/s at batch 32, with head (2 threads)")
        ax.set_ylabel(f"{cost['task']} test {x['primary']} x 100")
        ax.set_title(f"{fam}: quality vs throughput (marker: peak RSS)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

