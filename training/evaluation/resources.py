"""What a model costs, by MOROCCO's protocol (RussianNLP/MOROCCO: quality and cost measured together).

    python -m training.evaluation.resources MODEL_DIR --inputs ROWS.npy [--threads 2] [--inputs-count 2000]
    python -m training.evaluation.resources --serve     # one request a line on stdin, one JSON answer a line

In a process of its own (so one model's memory never counts against another's): a fresh one, or with --serve a
fork of a server that has imported torch, transformers and the modeling code of each model type it was asked
about (`transformers.models.bert.modeling_bert`, ...) and done nothing else, so a card's models pay those imports
once (~8 s of CPU each before) while each is still measured alone (training.evaluation.card.Measurer):
- parameters, with and without the embedding matrices (a tied output projection counted once);
- size on disk of the weight files;
- init time: loading the model from disk until it can run (its type's modeling code imported before, as in a
  process that serves models; the fresh process imports it first too);
- throughput at batch 32 over `inputs_count` inputs, repeated 5 times, the median, encoder only (the
  base model) and with the output head;
- latency at batch 1, p50 and p95 over `latency_count` inputs, encoder only and with the head;
- peak resident memory of the process (VmHWM), and how much of it came after importing torch and
  transformers (the model, its activations and the inputs: the kernel's peak mark is reset there);
- the torch threads used.
Inputs are real held-out rows (token ids with their lengths), written by the caller as .npy.
Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from training.models.model_kinds import KINDS

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def disk_bytes(model_dir: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(model_dir).iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def count_parameters(model) -> dict[str, int]:
    """Total and embedding parameters; a weight shared by two modules (tied embeddings) counts once."""
    import torch
    from torch.ao.nn.quantized import Embedding as Int8Embedding

    seen: set[int] = set()
    total = emb = 0
    for module in model.modules():
        if isinstance(module, Int8Embedding):  # int8 rows, not a Parameter
            n = module.weight().numel()
            total, emb = total + n, emb + n
            continue
        packed = getattr(module, "_packed_params", None)  # an int8 dynamic Linear keeps its weights packed
        if packed is not None and hasattr(packed, "_weight_bias"):
            w, b = packed._weight_bias()
            total += w.numel() + (b.numel() if b is not None else 0)
        for p in module.parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            total += p.numel()
            if isinstance(module, torch.nn.Embedding):
                emb += p.numel()
    return {"total": total, "embeddings": emb, "without_embeddings": total - emb}


def _batches(ids, lengths, batch: int):
    import torch

    for i in range(0, len(ids), batch):
        x = torch.from_numpy(ids[i:i + batch])
        n = torch.from_numpy(lengths[i:i + batch])
        yield {"input_ids": x, "attention_mask": (torch.arange(x.shape[1])[None, :] < n[:, None]).long()}


def closed_by_eos(ids, lengths, eos_id: int, pad_id: int):
    """Each row as one text closed by a single eos, as a tokenizer with T5's template makes a classifier's input: the
    row's eos tokens inside it (the shards pack documents, each closed by one) left out, then eos, then padding.
    T5ForSequenceClassification reads the decoder's state at the eos and refuses a batch whose rows hold different
    counts of it."""
    import numpy as np

    out, new = np.full_like(ids, pad_id), np.zeros_like(lengths)
    for r, n in enumerate(lengths):
        kept = ids[r, :n][ids[r, :n] != eos_id][:max(int(n) - 1, 0)]
        out[r, :len(kept)] = kept
        out[r, len(kept)] = eos_id
        new[r] = len(kept) + 1
    return out, new


def _forward(fn, feed: dict[str, Any]) -> None:
    import torch

    with torch.inference_mode():
        fn(**feed)


def measure(model_dir: str, ids, lengths, threads: int = 2, repeats: int = 5, inputs_count: int = 2000,
            latency_count: int = 200, batch: int = 32) -> dict[str, Any]:
    import numpy as np
    import torch

    from training.models.model_formats import load_model

    torch.set_num_threads(threads)
    import transformers  # noqa: F401 - imported before the baseline, so the figure below is the model's share
    from transformers import AutoModel  # noqa: F401

    import_modeling_code(model_dir)  # likewise (a no-op in a child of --serve, whose server imported it)

    import_peak = _status_bytes("VmHWM")
    baseline = _reset_peak()
    reps = int(np.ceil(inputs_count / len(ids)))
    ids, lengths = np.tile(ids, (reps, 1))[:inputs_count], np.tile(lengths, reps)[:inputs_count]
    t0 = time.perf_counter()
    model, kind = load_model(model_dir)
    model.eval()
    init = time.perf_counter() - t0
    if KINDS[kind].scores_task and getattr(model.config, "is_encoder_decoder", False):  # T5 with a task head
        ids, lengths = closed_by_eos(ids, lengths, model.config.eos_token_id, model.config.pad_token_id or 0)
    # the encoder alone: T5's stack (an encoder-decoder LM's or a T5 classifier's), else the model's base
    encoder = (model.get_encoder() if getattr(model.config, "is_encoder_decoder", False) else
               model.base_model if model.base_model is not model else None)
    runs = {"with_head": model, "encoder_only": encoder}
    out: dict[str, Any] = {"kind": kind, "threads": threads, "init_seconds": round(init, 3),
                           "parameters": count_parameters(model), "disk_bytes": disk_bytes(model_dir),
                           "inputs": inputs_count, "batch": batch, "seq_len": int(ids.shape[1]), "repeats": repeats}
    start = getattr(model.config, "decoder_start_token_id", None) or 0
    for name, m in runs.items():
        if m is None:
            continue
        # an encoder-decoder's full forward needs a decoder input: one start token per input
        dec = KINDS[kind].encoder_decoder and m is model
        feeds = [{**f, "decoder_input_ids": torch.full((f["input_ids"].shape[0], 1), start)} if dec else f
                 for f in _batches(ids, lengths, batch)]
        _forward(m, feeds[0])  # warm-up
        rates = []
        for _ in range(repeats):
            t = time.perf_counter()
            for f in feeds:
                _forward(m, f)
            rates.append(inputs_count / (time.perf_counter() - t))
        single = [{k: v[:1] for k, v in f.items()} for f in
                  (next(_batches(ids[i:i + 1], lengths[i:i + 1], 1)) for i in range(min(latency_count, len(ids))))]
        if dec:
            single = [{**f, "decoder_input_ids": torch.full((1, 1), start)} for f in single]
        lat = []
        for f in single:
            t = time.perf_counter()
            _forward(m, f)
            lat.append((time.perf_counter() - t) * 1000)
        q = statistics.quantiles(lat, n=20)
        out[name] = {"inputs_per_second_median": round(statistics.median(rates), 1),
                     "inputs_per_second_runs": [round(r, 1) for r in rates],
                     "latency_ms_p50": round(statistics.median(lat), 3), "latency_ms_p95": round(q[18], 3)}
    # VmHWM is this process's own peak: ru_maxrss would also carry the peak of the process that started
    # this one (Linux keeps it across fork and exec), so a big parent would show in every model's figure
    hwm = _status_bytes("VmHWM")
    if hwm is None:
        out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        out["peak_rss_over_imports_bytes"] = None
    else:
        out["peak_rss_bytes"] = max(hwm, import_peak or 0)
        out["peak_rss_over_imports_bytes"] = max(0, hwm - baseline) if baseline is not None else None
    return out


def _status_bytes(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak() -> int | None:
    """Reset the kernel's peak-RSS mark (Linux: write 5 to /proc/self/clear_refs) and return the current
    RSS, so the peak measured afterwards is the model's, not an import's transient; None if unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _status_bytes("VmRSS")


def import_modeling_code(model_dir: str | Path) -> str | None:
    """Import transformers' modeling module for the model type in `model_dir`'s config.json (the first call for a
    type costs ~5 s of CPU: torch._dynamo, DTensor and scipy come with it); the module's name, or None where there is
    no such config or module (the measuring child then imports what it needs itself, as a fresh process does)."""
    import importlib

    try:
        model_type = json.loads((Path(model_dir) / "config.json").read_text())["model_type"]
        name = f"transformers.models.{model_type.replace('-', '_')}.modeling_{model_type.replace('-', '_')}"
        importlib.import_module(name)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError):
        return None
    return name


def serve(stdin=sys.stdin, stdout=sys.stdout) -> int:
    """Answer measurement requests, each in a child forked for it: a line of JSON in (model, inputs, threads,
    repeats, inputs_count, latency_count), a line of JSON out (measure's, or {"error": ...}). The server imports
    (torch, transformers, each new model type's modeling code before its first fork) and computes nothing
    else, so no thread pool exists to be forked (each child makes its own) and each child's
    peak memory is that import's plus its model's, as in a fresh process."""
    import os

    if stdout is sys.stdout:  # the answers get the real stdout; anything else printed goes to stderr
        stdout = os.fdopen(os.dup(sys.stdout.fileno()), "w")
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    import torch  # noqa: F401 - what every child would import first; imported once here
    import transformers  # noqa: F401
    from transformers import AutoModel  # noqa: F401

    import training.models.model_formats  # noqa: F401

    for line in stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        import_modeling_code(req["model"])
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: measure, write, leave without running the server's cleanup
            os.close(r)
            code = 0
            try:
                import numpy as np

                data = np.load(req["inputs"])
                out = measure(req["model"], data["ids"], data["lengths"], req["threads"], req["repeats"],
                              req["inputs_count"], req["latency_count"])
            except BaseException as e:  # noqa: BLE001 - reported to the card, which raises it with the model's name
                out, code = {"error": f"{type(e).__name__}: {e}"}, 1
            with os.fdopen(w, "w") as f:
                f.write(json.dumps(out))
            os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            answer = f.read()
        _, status = os.waitpid(pid, 0)
        if not answer:
            answer = json.dumps({"error": f"the measuring process ended with status {status} and no answer"})
        stdout.write(answer + "\n")
        stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    if (sys.argv[1:] if argv is None else argv) == ["--serve"]:
        return serve()
    ap = argparse.ArgumentParser(prog="python -m training.evaluation.resources", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--inputs", required=True, help=".npz with `ids` (rows x seq_len) and `lengths`")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--inputs-count", type=int, default=2000)
    ap.add_argument("--latency-count", type=int, default=200)
    a = ap.parse_args(argv)
    data = np.load(a.inputs)
    print(json.dumps(measure(a.model, data["ids"], data["lengths"], a.threads, a.repeats, a.inputs_count,
                             a.latency_count)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
