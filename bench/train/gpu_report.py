"""The `bench gpu` section of docs/BENCHMARKS.md and docs/benchmarks/gpu.json from its report data (pure)."""
from __future__ import annotations

from typing import Any

TITLE = "gpu: the pretraining step on one GPU against a plain PyTorch loop and the HF Trainer"


TITLES = {"mlm": TITLE, "causal": f"{TITLE}: the Llama-style decoder"}


def title(objective: str = "mlm") -> str:
    """The section's title per objective (bench.train.gpu GPU_MODELS): BERT's, or the decoder's own section."""
    return TITLES[objective]


def decoder(sizes: dict[str, Any]) -> bool:
    """The run's model is a decoder (its head at every position); a run written before the objective was kept: BERT."""
    from training.models.model_kinds import predicts_next

    return predicts_next(sizes.get("objective") or "mlm")
NAMES = {"lmforge": "lmforge, defaults (micro batch auto)",
         "lmforge_heuristic": "lmforge, defaults but --kernel-tuning heuristic",
         "lmforge_fp32_residual": "lmforge, defaults but --fp32-residual", "lmforge_mb64": "lmforge, micro batch 64",
         "plain": "plain PyTorch loop, eager", "plain_compiled": "plain PyTorch loop, torch.compile",
         "hf_trainer": "HF Trainer, bf16", "hf_trainer_compiled": "HF Trainer, bf16, torch_compile",
         "lmforge_mb64_no_graphs": "lmforge, micro batch 64, no CUDA graphs (--compile-mode default)",
         "lmforge_no_graphs": "lmforge, micro batch auto, no CUDA graphs (--compile-mode default)"}
MFU_GOAL = 0.40
SPEEDUP_GOAL = 1.2
PEERS = ("plain", "plain_compiled", "hf_trainer", "hf_trainer_compiled")


def figures(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per variant that ran: tokens/s, MFU, micro batch, GPU busy share, kernels/step, peak memory."""
    from training.doctor.node import training_mfu
    from training.models.flops import model_shape
    from training.models.presets import preset

    sizes, device = report["sizes"], report["machine"].get("device", "cpu")
    from schemas.objectives import objective

    kind = objective(sizes.get("objective") or "mlm").model_kind
    shape = model_shape(preset(sizes["model"]), sizes["vocab"], sizes["seq_len"], kind)
    out = {}
    for name, r in report["results"].items():
        if "error" in r:
            continue
        tokens_per_s = r["rows_per_step"] * r["seq_len"] / r["seconds_per_step"]
        prof = r.get("profile") or {}
        mfu = training_mfu(tokens_per_s, shape, r["head_share"], device, 1) if device != "cpu" else {"mfu": None}
        out[name] = {"tokens_per_s": tokens_per_s, "mfu": mfu.get("mfu"), "micro_batch_size": r["micro_batch_size"],
                     "rows_per_step": r["rows_per_step"], "ms_per_step": 1e3 * r["seconds_per_step"],
                     "gpu_busy_share": prof.get("gpu_busy_share"), "kernels_per_step": prof.get("kernels_per_step"),
                     "ops_per_step": prof.get("ops_per_step"), "peak_memory_gb": r.get("peak_memory_gb"),
                     "mflop_per_token": mfu.get("flops_per_token", 0) / 1e6 if mfu.get("flops_per_token") else None}
    return out


def gpu_json(report: dict[str, Any]) -> dict[str, Any]:
    """docs/benchmarks/gpu.json: `device`, and per variant tokens_per_s, mfu, micro_batch_size, gpu_busy_share,
    kernels_per_step, peak_memory_gb (errors for the variants that did not run)."""
    fig = figures(report)
    keys = ("tokens_per_s", "mfu", "micro_batch_size", "gpu_busy_share", "kernels_per_step", "peak_memory_gb")
    variants = {name: {k: f[k] for k in keys} for name, f in fig.items()}
    variants.update({n: {"error": r["error"]} for n, r in report["results"].items() if "error" in r})
    return {"device": report["machine"].get("device"), "machine": report["machine"], "measured_utc": report["measured_utc"],
            "variants": variants}


def _n(x: Any, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def goals(fig: dict[str, dict[str, Any]], smoke: bool = False) -> list[str]:
    if smoke:
        return ["- not judged: a CPU smoke run"]
    lines = []
    lm = fig.get("lmforge")
    if lm and lm["mfu"] is not None:
        ok = lm["mfu"] >= MFU_GOAL
        lines.append(f"- MFU of lmforge's defaults at least {MFU_GOAL:.0%}: **{'MET' if ok else 'NOT MET'}** "
                     f"({lm['mfu']:.1%} at micro batch {lm['micro_batch_size']}).")
    else:
        lines.append(f"- MFU of lmforge's defaults at least {MFU_GOAL:.0%}: not judged (no GPU figure).")
    peers = {n: fig[n]["tokens_per_s"] for n in PEERS if n in fig}
    mb64 = fig.get("lmforge_mb64")
    if mb64 and peers:
        best = max(peers, key=peers.get)
        ratio = mb64["tokens_per_s"] / peers[best]
        lines.append(f"- lmforge at least {SPEEDUP_GOAL}x the best peer at micro batch 64: "
                     f"**{'MET' if ratio >= SPEEDUP_GOAL else 'NOT MET'}** ({ratio:.2f}x {NAMES[best]}; "
                     f"{len(peers)} of {len(PEERS)} peers ran).")
    else:
        lines.append(f"- lmforge at least {SPEEDUP_GOAL}x the best peer at micro batch 64: not judged (missing runs).")
    return lines


def where_time_goes(report: dict[str, Any]) -> list[str]:
    out = []
    for name in ("lmforge", "lmforge_heuristic", "lmforge_fp32_residual", "lmforge_mb64", "lmforge_mb64_no_graphs", "lmforge_no_graphs",
                 "plain_compiled"):
        r = report["results"].get(name, {})
        prof = r.get("profile") or {}
        if not prof:
            continue
        busy = prof.get("gpu_busy_ms_per_step")
        out.append(f"- {NAMES[name]}: a profiled step took {prof['wall_ms_per_step']:.1f} ms"
                   + (f", the GPU busy {busy:.1f} ms of it ({prof['gpu_busy_share']:.0%}) over "
                      f"{prof['kernels_per_step']:.0f} kernels" if busy is not None else "")
                   + f"; the host dispatched {prof['ops_per_step']:.0f} ops ("
                   + ", ".join(f"{op} {n:.0f}" for op, n in prof.get("top_ops", [])[:6]) + ").")
        if prof.get("kernel_kinds"):
            out.append("  GPU ms a step by kind of kernel: "
                       + ", ".join(f"{kind} {ms:.1f}" for kind, ms in prof["kernel_kinds"]) + "; the longest: "
                       + "; ".join(f"`{k[:60]}` {ms:.1f}" for k, ms in prof.get("top_kernels", [])[:3]) + ".")
        if prof.get("host_syncs_per_step") is not None:
            out.append(f"  Host syncs a step: {prof['host_syncs_per_step']:.1f}"
                       + (" (" + ", ".join(f"{s['where']} {s['per_step']:.1f}" for s in prof["host_sync_sites"]) + ")"
                          if prof.get("host_sync_sites") else "") + ".")
        comp = r.get("compile") or {}
        if comp.get("regions"):
            out.append(f"  Compiled regions: {len(comp['regions'])}; graph breaks {comp.get('graph_breaks')}, frames "
                       f"compiled after the warm-up {comp.get('frames_compiled_after_warmup')}; mode {comp.get('mode')}, kernels "
                       f"{comp.get('kernel_tuning', 'heuristic')}.")
        probe = r.get("micro_batch_probe")
        if probe and probe.get("tried"):
            out.append("  Micro batch probe: " + ", ".join(f"{s}: {'out of memory' if p is None else f'{p / 1e9:.1f} GB'}"
                                                             for s, p in probe["tried"])
                       + f" -> {probe.get('fitted')} (of {probe.get('usable_gb', 0):.0f} GB usable).")
    return out


PAIRS = (("lmforge", "lmforge_fp32_residual", "Residual stream bf16 (the default) against fp32 (--fp32-residual)"),
         ("lmforge", "lmforge_heuristic", "Kernels tuned by coordinate descent (the default) against inductor's "
                                          "heuristic configurations (--kernel-tuning heuristic)"))


def pair_lines(report: dict[str, Any]) -> list[str]:
    """Each default against its opt-out on the same rows: the step times and the loss curves side by side."""
    out = []
    for a_name, b_name, what in PAIRS:
        new, old = (report["results"].get(n, {}) for n in (a_name, b_name))
        a, b = new.get("loss_curve") or [], old.get("loss_curve") or []
        if not a or len(a) != len(b) or new.get("rows_per_step") != old.get("rows_per_step"):
            continue
        tail = min(10, len(a))
        gap = max(abs(x - y) for x, y in zip(a, b))
        out.append(f"- {what}, the same {len(a)} steps of {new['rows_per_step']} rows: "
                   f"{new['seconds_per_step'] * 1e3:.1f} against {old['seconds_per_step'] * 1e3:.1f} ms a step; mean "
                   f"loss over the last {tail} steps {sum(a[-tail:]) / tail:.4f} against {sum(b[-tail:]) / tail:.4f}; "
                   f"the largest difference at one step {gap:.4f}.")
    return out


def render(report: dict[str, Any]) -> str:
    fig, mach, sizes = figures(report), report["machine"], report["sizes"]
    smoke = mach.get("device") == "cpu"
    out = [("**CPU smoke run: a test of the benchmark's code, not a measurement.** " if smoke else "")
           + f"Device {mach.get('device')}; torch {mach.get('torch')}, CUDA {mach.get('cuda')}, DeepSpeed "
           f"{mach.get('deepspeed', '-')}, transformers {mach.get('transformers', '-')}, Python {mach.get('python')}"
           + (f"; carried: {mach['carried']}" if mach.get("carried") else "") + ".",
           "",
           f"Model {sizes['model']}, {sizes['seq_len']} tokens a row, a {sizes['vocab']:,}-piece "
           + ("byte-level BPE" if decoder(sizes) else "WordPiece")
           + " trained on the bundled crawl's corpus"
           + (" (causal shards: the Llama-style decoder, `LlamaForCausalLM`; the plain loop and the Trainer on the same "
              "model with next-token labels, the Trainer's causal collator)" if decoder(sizes) else "")
           + "; every variant on the same rows, one process, bf16"
           + (" (the smoke run: fp32, eager)" if smoke else "") + f". {sizes['warmup']} warm-up steps (compilation "
           f"included), {sizes['profiled']} profiled (torch.profiler: kernels, the GPU's busy share), "
           f"{sizes['timed']} timed. Tokens/s = rows x {sizes['seq_len']} / seconds per step; MFU against the GPU's "
           "dense bf16 peak (training.doctor.node.GPU_PEAKS) by training.models.flops' count: "
           + ("a decoder's head runs at every position in every variant" if decoder(sizes) else
              "lmforge's head runs at the masked positions only, the peers' at every one") + " (MFLOP/token column).",
           "",
           "| variant | micro batch | ms/step | tokens/s | MFU | MFLOP/token | GPU busy | kernels/step | peak GB |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, f in fig.items():
        rows = f"{f['micro_batch_size']}" + (f" x {f['rows_per_step'] // f['micro_batch_size']}"
                                             if f["rows_per_step"] != f["micro_batch_size"] else "")
        out.append(f"| {NAMES[name]} | {rows} | {f['ms_per_step']:.1f} | {f['tokens_per_s']:,.0f} | "
                   f"{_n(f['mfu'], '.1%')} | {_n(f['mflop_per_token'], '.0f')} | {_n(f['gpu_busy_share'], '.0%')} | "
                   f"{_n(f['kernels_per_step'], ',.0f')} | {_n(f['peak_memory_gb'], '.1f')} |")
    failed = {n: r["error"] for n, r in report["results"].items() if "error" in r}
    if failed:
        out += ["", "Did not run to the end: " + "; ".join(f"{NAMES[n]}: {e}" for n, e in failed.items()) + "."]
    out += ["", "Goals:", *goals(fig, smoke), "", "Where the step's time goes (lmforge, and the compiled plain loop):", *(where_time_goes(report) or ["- no profile"]),
            *pair_lines(report),
            "", f"The run took {report['wall_seconds'] / 60:.1f} minutes, data and compilation included."]
    return "\n".join(out) + "\n"
