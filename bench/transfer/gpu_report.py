"""The markdown of `lmforge bench transfer --gpu` (bench.transfer.gpu): the verdict first, then the tasks beside
their controls, the goals, the pretraining and the time to quality."""
from __future__ import annotations

from pathlib import Path
from typing import Any

TITLE = "transfer on one GPU: does pretraining pay?"
INITS = {"pretrained": "lmforge, pretrained", "scratch": "lmforge architecture, random init",
         "tfidf_lr": "TF-IDF + logistic regression", "majority": "majority class"}

PAYS, TIE, LOSES = "paid", "cannot tell", "did not pay"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def score(row: dict[str, Any], metric: str) -> str:
    s = row["test"][metric]
    return pct(s["mean"]) + (f" ± {100 * s['sd']:.1f}" if s.get("sd") and len(s["per_seed"]) > 1 else "")


def task_verdict(t: dict[str, Any]) -> str:
    """PAYS when the pretrained model is above its random-init twin (paired 95% interval above zero), LOSES when
    below, TIE when the interval holds zero or there is one seed."""
    d = t.get("paired")
    if not d or d["ci_low"] is None:
        return TIE
    return PAYS if d["ci_low"] > 0 else LOSES if d["ci_high"] < 0 else TIE


def diff(t: dict[str, Any]) -> str:
    d = t.get("paired")
    if not d:
        return "-"
    if d["ci_low"] is None:
        return f"{d['mean']:+.1f} (one seed)"
    return f"{d['mean']:+.1f} [{d['ci_low']:+.1f}, {d['ci_high']:+.1f}]"


def margin(t: dict[str, Any], other: str) -> float | None:
    r, m = t["rows"], t["primary"]
    if "pretrained" not in r or other not in r:
        return None
    return 100 * (r["pretrained"]["test"][m]["mean"] - r[other]["test"][m]["mean"])


def complete(res: dict[str, Any]) -> dict[str, Any]:
    """The tasks whose every row ran (a failed task has `error`; one whose twin missed runs has `incomplete`)."""
    return {k: t for k, t in res.get("tasks", {}).items() if "error" not in t and not t.get("incomplete")}


def sentence(res: dict[str, Any]) -> str:
    """The one-line answer: on how many tasks pretraining paid against the twin, and against TF-IDF."""
    tasks = complete(res)
    if not tasks:
        return "Did pretraining pay? Not measured: no task finished."
    v = {k: task_verdict(t) for k, t in tasks.items()}
    paid = [k for k, x in v.items() if x == PAYS]
    lost = [k for k, x in v.items() if x == LOSES]
    tfidf = [k for k, t in tasks.items() if (margin(t, "tfidf_lr") or 0) > 0]
    return (f"Did pretraining pay? Against the same architecture from random init it paid on {len(paid)} of "
            f"{len(tasks)} tasks ({', '.join(paid) or 'none'}), lost on {len(lost)} ({', '.join(lost) or 'none'}); "
            f"it beat TF-IDF + logistic regression on {len(tfidf)} ({', '.join(tfidf) or 'none'}).")


def goals(res: dict[str, Any]) -> list[str]:
    tasks = complete(res)
    twin = {k: margin(t, "scratch") for k, t in tasks.items()}
    tf = {k: margin(t, "tfidf_lr") for k, t in tasks.items()}
    above5 = [k for k, x in twin.items() if x is not None and x >= 5 and task_verdict(tasks[k]) == PAYS]
    above3 = [k for k, x in tf.items() if x is not None and x >= 3]
    below = [k for k, t in tasks.items() if task_verdict(t) == LOSES]
    fmt = lambda d: ", ".join(f"{k} {x:+.1f}" for k, x in d.items() if x is not None) or "-"  # noqa: E731
    lines = [f"| pretrained beats its random-init twin by >= 5 points on >= 2 tasks (paired interval above 0) | "
             f"{'yes' if len(above5) >= 2 else 'no'} | {fmt(twin)} |",
             f"| pretrained beats TF-IDF + LR by >= 3 points on >= 2 tasks | {'yes' if len(above3) >= 2 else 'no'} | "
             f"{fmt(tf)} |",
             f"| pretrained never below its twin (paired 95% interval) | {'yes' if not below else 'no'} | "
             f"{', '.join(below) or 'below on none'} |"]
    q = res.get("time_to_quality") or {}
    if q.get("ratio") is not None:
        lines.append(f"| lmforge reaches the HF Trainer's best held-out loss in <= half its time | "
                     f"{'yes' if q['ratio'] <= 0.5 else 'no'} | {q['lmforge_s']:.0f} s against {q['hf_s']:.0f} s "
                     f"({q['ratio']:.2f}x) to loss {q['target']:.3f} |")
    else:
        lines.append(f"| lmforge reaches the HF Trainer's best held-out loss in <= half its time | no | "
                     f"{q.get('error') or 'lmforge did not reach the target' if q.get('target') else q.get('error', 'not run')} |")
    return ["| goal | met | measured |", "|---|---|---|", *lines]


def task_table(name: str, t: dict[str, Any]) -> list[str]:
    if "error" in t:
        return [f"**{name}**: failed: {t['error']}", ""]
    m, c = t["primary"], t.get("counts", {})
    sizes = " / ".join(f"{c[s + '_examples']:,} {s}" for s in ("train", "validation", "test")
                       if isinstance(c.get(s + "_examples"), int))
    counted = "" if not t.get("incomplete") else "; not counted, see below"
    out = [f"**{name}** ({t['labels']} labels; {sizes}; {m}; pretrained minus twin, paired over seeds: {diff(t)} "
           f"points, 95% interval: {task_verdict(t)}{counted})", "", "| row | " + m + " | fine-tune lr (chosen on validation) |",
           "|---|---:|---:|"]
    for key, label in INITS.items():
        if key in t["rows"]:
            lr = t["rows"][key].get("lr")
            out.append(f"| {label} | {score(t['rows'][key], m)} | {lr if lr is not None else '-'} |")
    if t.get("incomplete"):
        out += ["", f"Incomplete: {t['incomplete']}."]
    return [*out, ""]


def pretraining_lines(res: dict[str, Any]) -> list[str]:
    p, c = res["pretraining"], res["config"]
    curve = ", ".join(f"{x['train_s']:.0f} s {x['loss']:.3f}" for x in p["curve"][:: max(1, len(p["curve"]) // 8)])
    d = res.get("data") or {}
    langs = ", ".join(f"{k} {v:,}" for k, v in (d.get("kept_by_language") or {}).items())
    return [f"- Data: `lmforge bench transfer`'s corpus (its data steps, carried: {langs or '?'} documents), "
            f"{d.get('train_tokens') or 0:,} training and {d.get('valid_tokens') or 0:,} held-out tokens, 128 a row, "
            "MLM masks at 0.15 in 4 precomputed variants (the shards stage run on the device).",
            f"- lmforge: preset `{c['model']}` ({p['num_parameters']:,} parameters), pre-LN, no dropout, "
            f"{c['budget_minutes']:g} minutes of wall clock (compilation included) on one GPU: {p['steps']:,} steps of "
            f"{p['global_batch']} x {p['seq_len']} tokens, {p['tokens_seen']:,} tokens seen, peak lr {c['lr']:g}, "
            f"{p['precision']}; held-out masked-token loss {p['valid_loss']:.3f} (training loss {p['first_loss']:.2f} "
            f"-> {p['last_loss']:.2f}); peak GPU memory {p.get('peak_gpu_memory_gb') or 0:.1f} GB.",
            f"- Held-out loss by training seconds: {curve}.",
            f"- Fine-tuning: every init over seeds {', '.join(map(str, c['seeds']))}, learning rate chosen per init on "
            f"validation from {', '.join(f'{x:g}' for x in [c['ft_lr'], *c['ft_lr_grid']])}; bf16 autocast; the "
            "task caps of `lmforge bench transfer` (bench.kit.tasks)."]


def ttq_lines(res: dict[str, Any]) -> list[str]:
    q = res.get("time_to_quality") or {}
    if "hf" not in q:
        return [f"Time to quality: {q.get('error', 'not run')}."]
    hf, pre = q["hf"], res["pretraining"]
    head = (f"Time to quality (MLPerf's measure): the HF Trainer (bf16, torch_compile, 4 loader workers, "
            f"DataCollatorForLanguageModeling) on the same model, rows and batch of {hf['micro_batch_size']}, at the "
            f"learning rate lmforge's run used at each of its {hf['max_steps']:,} steps, validated on the same rows "
            f"and masks every {res['config']['eval_every']} steps, stopped after {hf['curve'][-1]['train_s']:.0f} s "
            f"of training at step {hf['curve'][-1]['step']:,}. Seconds are each training loop's clock from its start, "
            "compilation included, evaluations excluded.")
    out = [head, ""]
    if q.get("target") is not None:
        out.append(f"Target: the Trainer's lowest held-out loss, {q['target']:.3f}. lmforge reached it in "
                   + (f"{q['lmforge_s']:.0f} s" if q["lmforge_s"] is not None else "- (not within its run)")
                   + f", the Trainer in {q['hf_s']:.0f} s"
                   + (f": {q['ratio']:.2f}x its time." if q.get("ratio") is not None else "."))
        out.append("")
    same = q.get("same_steps") or []
    if same:
        out += ["| step | lmforge held-out loss | HF Trainer held-out loss | lmforge s | HF s |", "|---:|---:|---:|---:|---:|"]
        ts = {p["step"]: p["train_s"] for p in pre["curve"]}
        th = {p["step"]: p["train_s"] for p in hf["curve"]}
        for r in same[:: max(1, len(same) // 10)]:
            out.append(f"| {r['step']:,} | {r['lmforge']:.3f} | {r['hf']:.3f} | {ts[r['step']]:.0f} | {th[r['step']]:.0f} |")
    return out


def for_scale(res: dict[str, Any], cpu: Path = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" /
              "transfer-does-pretraining-pay.json") -> list[str]:
    """The same tasks' rows of the CPU bench (`lmforge bench transfer`), when its data is there: what an hour of two
    CPU cores pretrained, and MiniLM-L6, a model pretrained properly."""
    import json

    if not cpu.exists():
        return []
    r = json.loads(cpu.read_text())
    parts = []
    for name in res.get("tasks", {}):
        t = r.get("tasks", {}).get(name)
        if not t:
            continue
        got = [pct(t["rows"][row]["test"][t["primary"]]["mean"]) if row in t["rows"] else "-"
               for row in ("lmforge", "minilm")]
        parts.append(f"{name} {got[0]} and {got[1]}")
    if not parts:
        return []
    p = r.get("pretraining", {}).get("pretrain", {})
    return [f"For scale, the CPU bench of {r.get('measured_utc', '?')} (`lmforge bench transfer`: {p.get('model')} "
            f"pretrained for {p.get('time_budget_minutes')} minutes on 2 cores, then MiniLM-L6 as shipped), same "
            f"tasks, splits and primary metrics: {'; '.join(parts)}.", ""]


def card_verdicts(res: dict[str, Any]) -> list[str]:
    """Per task, the card's "did pretraining pay" sentence (training.evaluation.card_summary.verdict), scores as
    fractions; a task that did not finish is named with why."""
    from training.evaluation.card_summary import rows_of, verdict

    out = []
    for name, t in res.get("tasks", {}).items():
        if "error" in t:
            out.append(f"- {name}: did not finish ({t['error'][:160]})")
            continue
        per_row = {row: r["test"][t["primary"]]["per_seed"] for row, r in t["rows"].items() if t["primary"] in r["test"]}
        rows = rows_of(per_row, t["primary"], int(t["counts"].get("test_examples") or 0))
        note = " (the twin's rate search was incomplete; see the task)" if t.get("incomplete") else ""
        out.append(f"- {name} (test {t['primary']}): {verdict(t['primary'], rows)[:-1]}{note}.")
    return out


def render(res: dict[str, Any]) -> str:
    m = res.get("machine") or {}
    out = [sentence(res), "", "As the card says it, per task:", "", *card_verdicts(res), "",
           f"`lmforge bench transfer --gpu` (bench/transfer/gpu.py) on {m.get('device', res['device'])}, torch "
           f"{m.get('torch', '?')}: the corpus and tokenizer of `lmforge bench transfer` carried, sharded and "
           "pretrained on the device, every model fine-tuned on the same tasks beside the controls. "
           f"Test-split scores in points (x100), mean ± sd over the seeds; the run took {res.get('wall_seconds', 0) / 60:.1f} minutes.",
           *([f"How the figures were gathered: {res['provenance']}."] if res.get("provenance") else []),
           "", "### Goals", "", *goals(res), "", "### Tasks", ""]
    for name, t in res.get("tasks", {}).items():
        out += task_table(name, t)
    out += [*for_scale(res), "### Pretraining", "", *pretraining_lines(res), "",
            "### Time to quality against the HF Trainer", "",
            *ttq_lines(res)]
    if res["device"] == "cpu":
        out = ["_A CPU smoke run of the script (tiny model, seconds): not a measurement._", "", *out]
    return "\n".join(out)


def write(res: dict[str, Any], out: Path) -> None:
    """The section of `out` (docs/BENCHMARKS.md) and its data beside it (docs/benchmarks/<the title's slug>.json)."""
    from bench.kit.report import write_section

    m = res.get("machine") or {}
    where = (f"{m['device']}, {m.get('cpu_count')} CPU cores, torch {m.get('torch')}, Python {m.get('python')}"
             if m.get("device") not in (None, "cpu") else None)
    write_section(out, TITLE, render(res) + "\n", res, measured=res.get("measured_utc"), where=where)
