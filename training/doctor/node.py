"""`lmforge doctor`: can this node train? The torch build, the GPUs, NCCL, the optimizers and a short
pretraining with resume, checked in minutes before a long job is queued on it.

    lmforge doctor                  # what it can check here; on a GPU node every GPU check below
    lmforge doctor --cpu-run        # a CPU machine: also a 5-step, 2-process CPU pretraining
    lmforge doctor --no-gpu-run     # facts and optimizers only (the CUDA image's build-time check)
    make gpu-check                  # lmforge doctor --gpu-run: fails where no CUDA device answers

It writes runs/doctor/doctor.json and doctor.md (--report DIR) and exits 1 when a check that ran failed.

The checks (training/doctor/checks.py runs them; this module is the arithmetic and the report):
1. facts: torch's version and CUDA build (torch.version.cuda), cuDNN, NCCL, each GPU (name, memory,
   compute capability) and the NVIDIA driver (nvidia-smi);
2. plan: what `lmforge pretrain` would launch here (training.runtime.accelerator.launch_plan("auto"));
3. optimizers: each of training.runtime.recipe.OPTIMIZERS built by `build_optimizer` on a tiny model on the device,
   one step taken; the class it got, or the error;
4. NCCL all-reduce (2+ GPUs): one process per GPU, 1 to 256 MiB; bus bandwidth as nccl-tests defines it;
5. pretraining (GPU): 20 steps of the tiny preset on every GPU (one process each) on shards built from the
   bundled sample, saving at step 10; resumed from step 10 on the same GPU count and on another (half of them,
   so the global batch is kept with gradient accumulation), each compared with the uninterrupted run;
   tokens/s and MFU against the GPU's bf16 dense peak (GPU_PEAKS).
On a machine without a CUDA device, 1-3 run (3 on the CPU) and the report says "no CUDA device: GPU checks
not run"; --cpu-run adds a 2-process CPU pretraining smoke.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.manifest import atomic_write_bytes, atomic_write_json
from training.doctor import checks as probe
from training.models.flops import ModelShape, flops_per_token, mfu, model_shape
from training.models.presets import preset
from training.pretraining.pretrain import PretrainConfig
from training.runtime.accelerator import launch_plan

SCHEMA = "lmforge.doctor/1"
NO_CUDA = "no CUDA device: GPU checks not run"
STATUSES = ("ok", "failed", "skipped", "not run")


@dataclass(frozen=True)
class GpuPeak:
    """A GPU's dense (no sparsity) bf16 tensor-core peak and where the figure comes from."""

    match: str
    """Lower-case substring of torch.cuda.get_device_name() (first match in GPU_PEAKS wins)."""
    tflops: float
    source: str
    checked: bool = True
    """False where no vendor figure for this exact part was found."""


# NVIDIA's datasheets quote bf16 "with sparsity"; the dense peak is half of it. More specific names first:
# torch names an H100 SXM "NVIDIA H100 80GB HBM3", a PCIe card "NVIDIA H100 PCIe", an NVL "NVIDIA H100 NVL".
GPU_PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak("h100 pcie", 756.0, "NVIDIA H100 datasheet, PCIe: BF16 1,513 TFLOPS with sparsity / 2"),
    GpuPeak("h100 nvl", 835.0, "NVIDIA H100 datasheet, NVL: BF16 1,671 TFLOPS with sparsity / 2"),
    GpuPeak("h100", 989.0, "NVIDIA H100 datasheet, SXM: BF16 1,979 TFLOPS with sparsity / 2"),
    GpuPeak("h200 nvl", 835.0, "NVIDIA H200 datasheet, NVL: BF16 1,671 TFLOPS with sparsity / 2"),
    GpuPeak("h200", 989.0, "NVIDIA H200 datasheet, SXM: BF16 1,979 TFLOPS with sparsity / 2"),
    GpuPeak("a100", 312.0, "NVIDIA A100 datasheet (SXM and PCIe): BF16 312 TFLOPS dense, 624 with sparsity"),
    GpuPeak("l40s", 362.05, "NVIDIA L40S datasheet: BF16 362.05 TFLOPS dense, 733 with sparsity"),
    GpuPeak("a10g", 125.0, "the NVIDIA A10 datasheet's BF16 125 TFLOPS dense (250 with sparsity); AWS publishes no "
            "bf16 figure for its A10G variant, so this one is unchecked", checked=False),
    GpuPeak("rtx 4090", 165.2, "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090: BF16 tensor with FP32 "
            "accumulate 165.2 TFLOPS dense"),
)


def gpu_peak(name: str) -> GpuPeak | None:
    """The bf16 dense peak of a GPU named as torch names it; None for a GPU not in the table (MFU not reported)."""
    low = name.lower()
    return next((p for p in GPU_PEAKS if p.match in low), None)


def bus_bandwidth(nbytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) of one all-reduce in bytes/s, as nccl-tests defines them (its doc/PERFORMANCE.md): algbw =
    size / time; busbw = algbw * 2(n-1)/n, since a ring all-reduce moves 2(n-1)/n of the buffer over each
    link, so busbw is comparable with the hardware's link bandwidth whatever the rank count. E.g. 256 MiB in
    2 ms on 8 GPUs: algbw 134 GB/s, busbw 134 * 14/8 = 235 GB/s."""
    if seconds <= 0 or ranks < 1:
        raise ValueError(f"need seconds > 0 and ranks >= 1, got {seconds}, {ranks}")
    algbw = nbytes / seconds
    return algbw, algbw * 2 * (ranks - 1) / ranks


def training_mfu(positions_per_s: float, shape: ModelShape, head_share: float, gpu_name: str,
                 gpus: int) -> dict[str, Any]:
    """MFU of a run: positions (padding included, as the GPU computes them) per second x training FLOPs per
    position (training.models.flops, the count `lmforge bench train` uses) over gpus x the GPU's bf16 peak."""
    per_token = flops_per_token(shape, head_share)
    peak = gpu_peak(gpu_name)
    out: dict[str, Any] = {"flops_per_token": per_token.total, "model_tflops": positions_per_s * per_token.total / 1e12}
    if peak is None:
        out["mfu"] = None
        out["why"] = f"{gpu_name!r} is not in training.doctor.node.GPU_PEAKS: MFU not reported"
        return out
    out.update(mfu=mfu(positions_per_s, per_token, gpus * peak.tflops * 1e12), peak_tflops_per_gpu=peak.tflops,
               peak_source=peak.source, peak_checked=peak.checked)
    return out


def resume_world(n: int) -> int | None:
    """The other GPU count a checkpoint of `n` GPUs is resumed on: the largest proper divisor of n (n/2 for even
    n, 1 for odd n), so the global batch n x micro batch is kept with n/m accumulation steps; n - 1 would need a
    micro batch divisible by n - 1. None for one GPU: another count needs 2."""
    if n < 2:
        return None
    return next(m for m in range(n // 2, 0, -1) if n % m == 0)


def compare_resumed(full: dict[str, Any], resumed: dict[str, Any], from_step: int, world: int, from_world: int,
                    tolerance: float) -> list[str]:
    """What is wrong with a resumed run's metrics.json against the uninterrupted run's (empty: nothing). The curve
    up to `from_step` comes from the checkpoint and must be equal; after it, each step's loss within `tolerance`
    (another world size or a GPU's non-deterministic reductions change the last bits, not the data)."""
    problems = []
    if resumed.get("resumed_from_step") != from_step:
        problems.append(f"resumed from step {resumed.get('resumed_from_step')}, expected {from_step}")
    if resumed.get("world_size") != world or resumed.get("resumed_from_world_size") != from_world:
        problems.append(f"world size {resumed.get('resumed_from_world_size')} -> {resumed.get('world_size')}, "
                        f"expected {from_world} -> {world}")
    a, b = full.get("loss_curve", []), resumed.get("loss_curve", [])
    if [p["step"] for p in a] != [p["step"] for p in b]:
        problems.append(f"steps {[p['step'] for p in b]} differ from the uninterrupted run's {[p['step'] for p in a]}")
        return problems
    if a[:from_step] != b[:from_step]:
        problems.append(f"the loss curve up to step {from_step} is not the checkpoint's")
    far = [(x["step"], x["loss"], y["loss"]) for x, y in zip(a[from_step:], b[from_step:])
           if not abs(x["loss"] - y["loss"]) <= tolerance]  # `not <=` also catches a NaN
    if far:
        problems.append(f"{len(far)} step(s) after the resume differ by more than {tolerance}: "
                        + ", ".join(f"step {s}: {x:.4f} vs {y:.4f}" for s, x, y in far[:3]))
    return problems


def plan_checks(plan: dict[str, Any] | None, gpu_names: list[str]) -> list[str]:
    """What the GPU checks do on this node's plan, or would do on a GPU node: the text the report opens with."""
    if not plan or plan.get("accelerator") != "cuda":
        return [f"{NO_CUDA}. On a CUDA node (torch.cuda.is_available()), lmforge doctor would:",
                "- load each optimizer on the GPU (adamw: torch's fused AdamW; lamb: DeepSpeed's FusedLamb if it "
                "builds, else pytorch-optimizer's Lamb) and take one step",
                "- time NCCL all-reduce of 1 to 256 MiB across every local GPU, one process each (2+ GPUs)",
                "- pretrain the tiny preset 20 steps on every GPU (one process per GPU, NCCL, bf16 on compute "
                "capability 8.0+), saving at step 10, then resume from step 10 on the same and on another GPU count",
                "- report tokens/s and MFU against the GPU's bf16 dense peak (training.doctor.node.GPU_PEAKS)",
                f"Here `lmforge pretrain` would run {plan['nproc_per_node']} CPU processes over {plan['backend']}, "
                f"{plan['threads_per_process']} torch thread(s) each" if plan else "Here: no plan"]
    n = plan["nproc_per_node"]
    other = resume_world(n)
    name = gpu_names[0] if gpu_names else "?"
    peak = gpu_peak(name)
    return [f"{n} x {name}: {plan['backend']}, {plan['precisions'][0]}, {plan['threads_per_process']} CPU threads "
            "per process",
            "- optimizers: each built on cuda:0 and stepped once",
            f"- NCCL all-reduce 1-256 MiB across {n} GPUs" if n > 1 else "- NCCL all-reduce: skipped, needs 2 GPUs",
            f"- pretraining: 20 steps on {n} GPU(s), resumed from step 10 on {n}"
            + (f" and on {other}" if other else " (a resume on another GPU count needs 2 GPUs)"),
            f"- MFU against {peak.tflops:g} TFLOPS bf16 per GPU ({peak.source})" if peak
            else f"- MFU: not reported ({name!r} is not in the peak table)"]


def overall(checks: dict[str, dict[str, Any]]) -> str:
    return "failed" if any(c.get("status") == "failed" for c in checks.values()) else "ok"


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:g} MiB"


def render_markdown(report: dict[str, Any]) -> str:
    """doctor.md: the same facts as doctor.json, for a person."""
    f = report["facts"]
    lines = [f"# lmforge doctor: {report['verdict']}", "", f"{report['host']}, {report['created']}", ""]
    if report.get("gpu_checks"):
        lines += [f"**{report['gpu_checks']}**", ""]
    lines += ["## Build", "", "| torch | CUDA build | cuDNN | NCCL | driver | CUDA available |", "|---|---|---|---|---|---|",
              f"| {f['torch']} | {f['cuda_build'] or 'none (CPU wheel)'} | {f['cudnn'] or '-'} | {f['nccl'] or '-'} | "
              f"{f['driver'] or '-'} | {f['cuda_available']} |", ""]
    if f["gpus"]:
        lines += ["| GPU | name | memory | compute capability |", "|---|---|---|---|"]
        lines += [f"| {g['index']} | {g['name']} | {g['memory_gib']:.1f} GiB | {g['capability']} |" for g in f["gpus"]]
        lines.append("")
    lines += [f"- {n}" for n in f.get("notes", [])] + ([""] if f.get("notes") else [])
    lines += ["## Plan", "", *report["plan_checks"], "", "## Checks", ""]
    for name, c in report["checks"].items():
        lines.append(f"### {name}: {c['status']}")
        lines.append("")
        if c.get("detail"):
            lines += [c["detail"], ""]
        if name == "optimizers":
            lines += ["| optimizer | chosen | class | result |", "|---|---|---|---|"]
            lines += [f"| {r['name']} | {r.get('choice', '-')} | {r.get('class', '-')} | {r.get('error') or 'one step ok'} |"
                      for r in c.get("rows", [])]
            lines.append("")
        if name == "nccl_allreduce" and c.get("rows"):
            lines += ["| size | time | algbw | busbw |", "|---|---|---|---|"]
            lines += [f"| {_mib(r['bytes'])} | {r['seconds'] * 1e3:.3f} ms | {r['algbw'] / 1e9:.1f} GB/s | "
                      f"{r['busbw'] / 1e9:.1f} GB/s |" for r in c["rows"]]
            lines.append("")
        for run in c.get("runs", []):
            speed = run.get("mfu") or {}
            mfu_text = f"{speed['mfu']:.2%}" if speed.get("mfu") is not None else speed.get("why", "-")
            lines.append(f"- {run['name']}: {run['status']}; {run.get('world', '?')} process(es); "
                         f"{run.get('tokens_per_s', 0):,.0f} tokens/s; MFU {mfu_text}"
                         + (f"; {'; '.join(run['problems'])}" if run.get("problems") else ""))
        if c.get("runs"):
            lines.append("")
    return "\n".join(lines) + "\n"


# ---- the shell: run the checks of training.doctor.checks and write the report --------------------------

GPU_RESUME_TOLERANCE = 0.1
"""Loss difference allowed per step after a resume on a GPU: bf16 and CUDA's atomics in the backward pass make
reductions non-deterministic (the CPU tests hold fp32 runs to 0.05 across world sizes); a wrong loader position
or optimizer state moves a tiny model's loss by whole units."""


def summarize(name: str, result: dict[str, Any], world: int, shape: ModelShape | None, gpu_name: str | None,
              problems: list[str] | None = None) -> dict[str, Any]:
    """One pretraining run for the report: status, throughput of its last log window and MFU."""
    if "error" in result:
        return {"name": name, "status": "failed", "world": world, "problems": [result["error"]]}
    m, rec, counts = result["metrics"], result["last_record"], result["counts"]
    positions_per_s = rec.get("samples_per_s", 0.0) * m["seq_len"]
    run: dict[str, Any] = {"name": name, "status": "failed" if problems else "ok", "world": world,
                           "steps": m["steps"], "first_loss": m["first_loss"], "last_loss": m["last_loss"],
                           "valid_loss": m.get("valid_loss"), "tokens_per_s": rec.get("tokens_per_s", 0.0),
                           "positions_per_s": positions_per_s, "seconds": result["seconds"], "problems": problems or []}
    if shape is not None and gpu_name is not None and positions_per_s > 0:
        head_share = counts["masked_tokens"] / max(counts["sequences"] * m["seq_len"], 1)
        run["mfu"] = training_mfu(positions_per_s, shape, head_share, gpu_name, world)
    else:
        run["mfu"] = {"mfu": None, "why": "CPU run: `lmforge bench train` measures CPU MFU"}
    return run


def pretrain_check(work: Path, world: int, accelerator: str, steps: int, model: str, precision: str,
                   gpu_name: str | None, seq_len: int = 64, micro_batch_size: int = 8) -> dict[str, Any]:
    """Pretrain `steps` on `world` processes saving at half; on CUDA resume from there on the same and on another
    world size (training.doctor.node.resume_world) and compare each with the uninterrupted run."""

    probe.say(f"building {seq_len}-token shards from the bundled sample under {work / 'data'}")
    shards, tok = probe.build_tiny_data(work / "data", seq_len=seq_len)
    vocab = json.loads((shards / "manifest.json").read_text())["extra"]["vocab_size"]
    m = preset(model)
    half = steps // 2
    base = dict(shards=str(shards), tokenizer=str(tok), model=model, steps=steps, micro_batch_size=micro_batch_size, lr=3e-3,
                log_every=half, save_every=half if accelerator == "cuda" else 0, eval_batches=2, dropout=0.0,
                tensorboard=False, seed=0, bf16=precision == "bf16", fp16=precision == "fp16")
    tag = accelerator
    probe.say(f"pretraining {model}: {steps} steps of {micro_batch_size} x {seq_len} tokens on {world} {tag} process(es)")
    full_dir = work / f"{tag}-full"
    shutil.rmtree(full_dir, ignore_errors=True)
    full = probe.pretrain_once(PretrainConfig(output=str(full_dir), **base), world, accelerator)
    shape = None
    if "error" not in full:
        shape = model_shape(m, vocab, full["metrics"]["seq_len"])
    runs = [summarize(f"{steps} steps on {world}", full, world, shape, gpu_name)]
    if accelerator == "cuda" and "error" not in full:
        for other in (world, resume_world(world)):
            name = f"resumed at step {half} on {other}" if other else "resume on another GPU count"
            if other is None:
                runs.append({"name": name, "status": "skipped", "problems": [],
                             "detail": "needs 2 GPUs (a checkpoint of 1 GPU resumed on 1 is the check above)"})
                continue
            probe.say(f"{name} (from {world})")
            out = probe.crash_copy(full_dir, half, work / f"{tag}-resume-{world}-to-{other}")
            got = probe.pretrain_once(PretrainConfig(output=str(out), resume=True, **{**base, "grad_accum": world // other}),
                                other, accelerator)
            problems = [] if "error" in got else compare_resumed(full["metrics"], got["metrics"], half, other, world,
                                                                 GPU_RESUME_TOLERANCE)
            runs.append(summarize(name, got, other, shape, gpu_name, problems))
    status = "failed" if any(r["status"] == "failed" for r in runs) else "ok"
    return {"status": status, "runs": runs,
            "detail": f"{model}, micro batch {micro_batch_size} x {seq_len} tokens, shards from samples/labeled/vader; "
                      f"{precision}; work under {work}"}


def nccl_check(world: int, max_mib: int, work: Path) -> dict[str, Any]:

    if world < 2:
        return {"status": "skipped", "detail": "one GPU: an all-reduce needs 2 GPUs to move anything"}
    sizes = [2**20 * 4**k for k in range(12) if 4**k <= max_mib]  # 1, 4, 16, 64, 256 MiB
    probe.say(f"NCCL all-reduce across {world} GPUs, {_mib(sizes[0])} to {_mib(sizes[-1])}")
    try:
        timed = probe.allreduce_times(world, sizes, work)
    except Exception as e:  # noqa: BLE001  (a failed collective is the finding)
        return {"status": "failed", "detail": f"{type(e).__name__}: {e}"}
    rows = [{**r, **dict(zip(("algbw", "busbw"), bus_bandwidth(r["bytes"], r["seconds"], world)))} for r in timed]
    best = max(r["busbw"] for r in rows)
    return {"status": "ok", "rows": rows, "detail": f"{world} ranks, one per GPU; best bus bandwidth "
            f"{best / 1e9:.1f} GB/s (busbw = algbw x 2(n-1)/n, nccl-tests' definition)"}


def run_doctor(report_dir: str | Path, gpu_run: bool | None = None, cpu_run: bool = False, steps: int = 20,
               model: str = "tiny", max_mib: int = 256, seq_len: int = 64, micro_batch_size: int = 8) -> dict[str, Any]:
    """Every check this node allows; writes doctor.json and doctor.md under `report_dir` and returns the report."""

    out = Path(report_dir)
    work = out / "work"
    probe.say("torch build, GPUs, driver")
    facts = probe.torch_facts()
    cuda = bool(facts["cuda_available"] and facts["gpus"])
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if cuda else "cpu")  # DeepSpeed otherwise guesses, and says so
    plan = launch_plan("auto").as_dict()
    names = [g["name"] for g in facts["gpus"]]
    report: dict[str, Any] = {"schema": SCHEMA, "created": datetime.datetime.now().isoformat(timespec="seconds"),
                              "host": socket.gethostname(), "facts": facts, "plan": plan,
                              "plan_checks": plan_checks(plan, names), "gpu_checks": None, "checks": {}}
    print(f"torch {facts['torch']} (CUDA build {facts['cuda_build']}), cuDNN {facts['cudnn']}, NCCL {facts['nccl']}, "
          f"driver {facts['driver']}", flush=True)
    for g in facts["gpus"]:
        print(f"  GPU {g['index']}: {g['name']}, {g['memory_gib']:.1f} GiB, compute capability {g['capability']}")
    for line in [*facts["notes"], *report["plan_checks"]]:
        print(line, flush=True)
    checks = report["checks"]
    probe.say("optimizers on cuda:0 (LAMB first tries to build DeepSpeed's FusedLamb: a minute where nvcc exists)"
              if cuda else "optimizers on the CPU")
    rows = probe.optimizer_rows("cuda" if cuda else "cpu")
    checks["optimizers"] = {"status": "failed" if any(r["error"] for r in rows) else "ok", "rows": rows}
    for r in rows:
        print(f"  {r['name']}: {r.get('class', r['choice'])}: {r['error'] or 'one step ok'}", flush=True)
    if len(set(names)) > 1:
        facts["notes"].append(f"mixed GPUs {sorted(set(names))}: MFU uses GPU 0's peak")
    if gpu_run is False or not cuda:
        why = "--no-gpu-run" if cuda else NO_CUDA
        report["gpu_checks"] = NO_CUDA if not cuda else "GPU checks not run (--no-gpu-run)"
        if gpu_run and not cuda:
            report["gpu_checks"] = f"{NO_CUDA} (--gpu-run asked for them)"
        status = "failed" if gpu_run and not cuda else "not run"
        checks["nccl_allreduce"] = {"status": status, "detail": why}
        checks["pretrain_gpu"] = {"status": status, "detail": why}
        print(report["gpu_checks"], flush=True)
    else:
        checks["nccl_allreduce"] = nccl_check(plan["nproc_per_node"], max_mib, work)
        checks["pretrain_gpu"] = pretrain_check(work, plan["nproc_per_node"], "cuda", steps, model,
                                                plan["precisions"][0], names[0], seq_len, micro_batch_size)
    if cpu_run:
        checks["pretrain_cpu"] = pretrain_check(work, 2, "cpu", 5, "tiny", "fp32", None)
    elif not cuda:
        checks["pretrain_cpu"] = {"status": "not run", "detail": "--cpu-run runs a 5-step, 2-process CPU pretraining"}
    report["verdict"] = overall(checks)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "doctor.json", report)
    atomic_write_bytes(out / "doctor.md", render_markdown(report).encode())
    for name, c in checks.items():
        print(f"{name}: {c['status']}" + (f" ({c['detail']})" if c.get("detail") else ""), flush=True)
        for r in c.get("runs", []):
            print(f"  {r['name']}: {r['status']}" + "".join(f"; {p[:500]}" for p in r.get("problems", [])), flush=True)
    probe.say(f"{report['verdict']}; wrote {out / 'doctor.json'} and {out / 'doctor.md'}")
    return report


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="lmforge doctor", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", default="runs/doctor", help="directory for doctor.json, doctor.md and the checks' "
                    "work (shards, runs) (default: %(default)s)")
    ap.add_argument("--gpu-run", action=argparse.BooleanOptionalAction, default=None,
                    help="run the GPU checks (NCCL all-reduce, pretraining and resume); default: when torch sees a "
                         "CUDA device. --gpu-run on a node where none answers is a failure (exit 1), so `make "
                         "gpu-check` cannot pass on a broken GPU node; --no-gpu-run checks facts and optimizers only")
    ap.add_argument("--cpu-run", action="store_true", help="without CUDA: also pretrain the tiny preset 5 steps on 2 "
                    "CPU processes (gloo, DeepSpeed's CPU accelerator; about a minute)")
    ap.add_argument("--steps", type=int, default=20, help="GPU pretraining steps, saved and resumed at half "
                    "(default: %(default)s)")
    ap.add_argument("--model", default="tiny", help="model preset of the pretraining check; tiny measures the "
                    "plumbing, not the GPU: bert_small or larger gives an MFU worth reading (default: %(default)s)")
    ap.add_argument("--seq-len", type=int, default=64, help="tokens per sequence of the pretraining check's shards "
                    "(built once per length under --report; default: %(default)s)")
    ap.add_argument("--micro-batch-size", type=int, default=8, help="sequences per GPU per step; the default keeps "
                    "the check quick, an MFU worth reading needs a GPU's worth, e.g. --model bert_base --seq-len 128 "
                    "--micro-batch-size 64 (default: %(default)s)")
    ap.add_argument("--max-mib", type=int, default=256, help="largest NCCL all-reduce, MiB; sizes 1, 4, 16, ... up "
                    "to it (default: %(default)s)")
    a = ap.parse_args(argv)
    if a.steps < 2 or a.steps % 2:
        ap.error(f"--steps must be even and >= 2 (saved and resumed at half), got {a.steps}")
    if a.seq_len < 16 or a.micro_batch_size < 1:
        ap.error(f"--seq-len must be >= 16 and --micro-batch-size >= 1, got {a.seq_len} and {a.micro_batch_size}")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(list(sys.argv[1:] if argv is None else argv))
    report = run_doctor(a.report, gpu_run=a.gpu_run, cpu_run=a.cpu_run, steps=a.steps, model=a.model,
                        max_mib=a.max_mib, seq_len=a.seq_len, micro_batch_size=a.micro_batch_size)
    return 0 if report["verdict"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
