"""The measurements `lmforge doctor` (training/doctor/node.py) takes on this node: facts from torch and nvidia-smi,
optimizer loads, timed NCCL all-reduces, and tiny pretraining runs through the project's own launcher. Each
returns raw numbers; the arithmetic and the verdicts are training.doctor.node's.

Nothing here is run by the unit tests on a GPU: this machine has none. The CPU paths (facts, optimizers on the
CPU, the CPU pretraining smoke) are tested in tests/unit/test_doctor.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from training.launch.torchrun import REPO_ROOT, free_port
from training.runtime.recipe import OPTIMIZERS, build_optimizer, optimizer_choice, param_groups

VADER_FILES = ("tweets", "movieReviewSnippets", "amazonReviewSnippets", "nytEditorialSnippets")


def say(msg: str) -> None:
    print(f"doctor: {msg}", flush=True)


def nvidia_smi() -> tuple[str | None, int | None, str | None]:
    """(driver version, GPUs nvidia-smi lists, error) from `nvidia-smi --query-gpu=driver_version`; (None, None,
    why) without nvidia-smi or when it fails (no driver loaded, container without the NVIDIA runtime)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None, None, "nvidia-smi not on PATH"
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, None, f"nvidia-smi: {e}"
    rows = [r.strip() for r in out.stdout.splitlines() if r.strip()]
    if out.returncode != 0 or not rows:
        return None, None, f"nvidia-smi exited {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}"
    return rows[0], len(rows), None


def torch_facts() -> dict[str, Any]:
    """torch's build, cuDNN, NCCL, the GPUs it sees and the driver; `notes` say what looks wrong."""
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
                             "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                             "cuda_available": torch.cuda.is_available(), "gpus": [], "notes": []}
    try:  # a CPU wheel has no NCCL binding: torch._C._nccl_version is missing
        v = torch.cuda.nccl.version()
        facts["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except (AttributeError, RuntimeError):
        facts["nccl"] = None
    if facts["cuda_available"]:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            facts["gpus"].append({"index": i, "name": p.name, "memory_gib": p.total_memory / 2**30,
                                  "capability": f"{p.major}.{p.minor}", "multiprocessors": p.multi_processor_count})
    facts["driver"], smi_gpus, smi_error = nvidia_smi()
    if smi_error:
        facts["notes"].append(smi_error)
    if smi_gpus and not facts["cuda_available"]:
        facts["notes"].append(f"nvidia-smi lists {smi_gpus} GPU(s) but torch sees none: "
                              + ("a CPU wheel of torch (torch.version.cuda is None); install the CUDA wheel"
                                 if facts["cuda_build"] is None else
                                 f"the driver {facts['driver']} may be older than CUDA {facts['cuda_build']} needs"))
    return facts


def optimizer_rows(accelerator: str) -> list[dict[str, Any]]:
    """Each optimizer of training.runtime.recipe built by `build_optimizer` on a tiny model on the device and stepped once."""
    device = torch.device("cuda", 0) if accelerator == "cuda" else torch.device("cpu")
    rows = []
    for name in OPTIMIZERS:
        row: dict[str, Any] = {"name": name, "device": str(device), "choice": optimizer_choice(name, accelerator)}
        t0 = time.time()
        try:
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)).to(device)
            opt = build_optimizer(name, param_groups(model, 0.01), lr=1e-3, accelerator=accelerator)
            before = model[0].weight.detach().clone()
            model(torch.randn(4, 16, device=device)).square().mean().backward()
            opt.step()
            row["class"] = f"{type(opt).__module__}.{type(opt).__qualname__}"
            row["error"] = None if not torch.equal(before, model[0].weight.detach()) else "the step left the weights as they were"
        except Exception as e:  # noqa: BLE001  (any failure to load or step is the finding, named in the report)
            row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        row["seconds"] = time.time() - t0
        rows.append(row)
    return rows


def _allreduce_worker(rank: int, world: int, port: int, sizes: list[int], iters: int, out: str) -> None:
    """One process per GPU (torch.multiprocessing.spawn): time `iters` all-reduces of each size after 5 warm-up
    ones; the slowest rank's time per op is the result (every rank waits for it)."""
    import torch.distributed as dist

    torch.cuda.set_device(rank)  # before anything distributed
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    rows = []
    for nbytes in sizes:
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        took = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device="cuda")
        dist.all_reduce(took, op=dist.ReduceOp.MAX)
        rows.append({"bytes": nbytes, "seconds": took.item()})
        del buf
    if rank == 0:
        Path(out).write_text(json.dumps(rows))
    dist.destroy_process_group()


def allreduce_times(world: int, sizes: list[int], work: Path, iters: int = 20) -> list[dict[str, Any]]:
    """[{bytes, seconds per all-reduce}] across `world` local GPUs, one process each."""
    import torch.multiprocessing as mp

    out = work / "allreduce.json"
    out.unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    mp.spawn(_allreduce_worker, args=(world, free_port(), sizes, iters, str(out)), nprocs=world, join=True)
    return json.loads(out.read_text())


def vader_dir() -> Path:
    """The bundled vaderSentiment sample: under the working directory (the image's /opt/lmforge, a checkout)
    or the checkout this module is in."""
    for root in (Path.cwd(), Path(os.environ.get("LMFORGE_HOME", ".")), REPO_ROOT):
        if (root / "samples" / "labeled" / "vader").is_dir():
            return root / "samples" / "labeled" / "vader"
    raise FileNotFoundError("samples/labeled/vader not found under the working directory, $LMFORGE_HOME or "
                            f"{REPO_ROOT}: run lmforge doctor from the repository (or the image's /opt/lmforge)")


def vader_corpus(corpus: Path) -> Path:
    """A corpus stage's output (Parquet and manifest) holding the ~4,000 sentences of the bundled vaderSentiment
    sample: real text for the GPU checks and benchmarks where the crawl's corpus stage (Beam) cannot run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from schemas.manifest import Manifest, describe_outputs, write_manifest

    texts = [line.split("\t", 2)[2] for name in VADER_FILES
             for line in (vader_dir() / f"{name}_GroundTruth.txt").read_text(encoding="utf-8").splitlines()
             if line.count("\t") >= 2]
    rel = Path("data", "en", "part-00000.parquet")
    (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [f"vader-{i:05d}" for i in range(len(texts))], "text": texts}), corpus / rel)
    write_manifest(corpus, Manifest(stage="corpus", config={"doctor": True, "source": "samples/labeled/vader"},
                                    counts={"kept": len(texts)}, outputs=describe_outputs(corpus, [rel])))
    return corpus


def build_tiny_data(work: Path, seq_len: int = 64) -> tuple[Path, Path]:
    """(shards, tokenizer) for the pretraining checks, through the real stages (the tokenizer stage and the shards
    stage's Beam-free path) over ~4,000 human-written sentences of the bundled vaderSentiment sample; kept
    between runs of the doctor (the shards manifest is written last)."""
    from pipelines.shards.mask_config import MaskConfig
    from pipelines.shards.stage import ShardsConfig, run_local
    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer

    corpus, tok, shards = work / "corpus", work / "tokenizer", work / f"shards-{seq_len}"
    if (shards / "manifest.json").exists() and (tok / "manifest.json").exists():
        return shards, tok
    vader_corpus(corpus)
    run_tokenizer(TokenizerConfig(corpus=str(corpus), output=str(tok), model="wordpiece", vocab_size=2000,
                                  min_frequency=1))
    run_local(ShardsConfig(corpus=str(corpus), tokenizer=str(tok), output=str(shards), seq_len=seq_len,
                           valid_per_mille=50, mask=MaskConfig(objective="mlm", num_variants=2)))
    return shards, tok


def crash_copy(run: Path, step: int, to: Path) -> Path:
    """What a crash right after checkpoint `step` leaves: that tag and `latest`, metrics.jsonl, no manifest."""
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(run / "checkpoints" / f"global_step{step}", to / "checkpoints" / f"global_step{step}")
    (to / "checkpoints" / "latest").write_text(f"global_step{step}")
    shutil.copy(run / "metrics.jsonl", to / "metrics.jsonl")
    return to


def pretrain_once(cfg: Any, nproc: int, accelerator: str) -> dict[str, Any]:
    """One `launch_pretrain`; its metrics.json, the manifest's counts and the last train record of metrics.jsonl
    (throughput of the last log window), or the launcher's error with the log's tail."""
    from training.launch.torchrun import launch_pretrain
    from training.runtime.telemetry import METRICS_JSONL, read_metrics

    t0 = time.time()
    try:
        out = launch_pretrain(cfg, nproc=nproc, accelerator=accelerator)
    except (RuntimeError, ValueError) as e:
        return {"error": str(e)[-3000:], "seconds": time.time() - t0}
    train = [r for r in read_metrics(out / METRICS_JSONL) if r.get("kind") == "train"]
    return {"metrics": json.loads((out / "metrics.json").read_text()),
            "counts": json.loads((out / "manifest.json").read_text())["counts"],
            "last_record": train[-1] if train else {}, "seconds": time.time() - t0}
