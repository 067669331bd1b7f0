"""The benchmarks by name: one record per `lmforge bench <name>`, and the modules a bench runs as a process of its own.

lmforge/cli.py dispatches `lmforge bench <name>` and prints `lmforge bench --help` from `BENCHES`; `make bench` is
`lmforge bench --make`, which runs the records with `make` set, in this table's order, with those arguments;
docs/BENCHES.md describes each (tests/unit/test_bench_registry.py keeps the three in step). A plain table of
strings: reading it imports no bench and none of their libraries.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bench:
    """One `lmforge bench <name>`."""

    name: str
    """The word after `lmforge bench`."""
    module: str
    """The module whose `main(argv)` runs it (in the checkout's bench/, not in the installed package)."""
    summary: str
    """One line for `lmforge bench --help`."""
    make: tuple[str, ...] | None = None
    """The arguments `make bench` runs it with (() for none); None: `make bench` leaves it out."""


@dataclass(frozen=True)
class Helper:
    """A bench module run as a process of its own (`python -m <module>`), not as `lmforge bench <name>`."""

    module: str
    run_by: str
    """Who runs it, and why it is a process of its own."""


BENCHES: tuple[Bench, ...] = (
    Bench("corpus", "bench.corpus.cleaning", "cleaning and MinHash speed against datatrove, datasketch and rensa; "
          "near-duplicate quality; agreement with datatrove's filters, URL filter, PII and decontamination", make=()),
    Bench("extraction", "bench.corpus.extraction", "resiliparse against trafilatura on newspaper4k's gold texts",
          make=()),
    Bench("hostile", "bench.corpus.hostile", "every cleaning step on crafted 1 MB pages beside a real page and "
          "datatrove's filters (about 25 minutes)"),
    Bench("langid", "bench.corpus.langid", "language-id accuracy on held-out English and Russian text", make=()),
    Bench("scale", "bench.corpus.scale", "the corpus stage at 10k, 100k and 1M documents: wall time and peak RSS",
          make=()),
    Bench("tokenizer", "bench.data.tokenizer", "fertility and round trips of the four tokenizer types, on make demo's "
          "corpus", make=()),
    Bench("data", "bench.data.shards", "the shards stage against HF datasets, the loader against the collator, "
          "bytes per token, on make demo's corpus", make=()),
    Bench("train", "bench.train.throughput", "tokens/s and MFU of lmforge's training step against the HF Trainer, "
          "and each system's host work per step", make=("--resume",)),
    Bench("learn", "bench.train.learn", "held-out loss at equal tokens: lmforge's pretraining against the HF Trainer",
          make=("--presets", "tiny", "demo")),
    Bench("transfer", "bench.transfer.payoff", "does pretraining pay? lmforge's model and MiniLM fine-tuned on real "
          "tasks beside the controls, then compressed (--gpu: on one GPU)", make=("--resume",)),
    Bench("attention", "bench.train.attention", "row or document attention in packed rows: step time and held-out "
          "loss"),
    Bench("ablate", "bench.transfer.ablate", "a corpus ablation on the transfer bench's real text against the "
          "published directions"),
    Bench("gpu", "bench.train.gpu", "lmforge's pretraining step on one GPU against a plain PyTorch loop and the HF "
          "Trainer (a smoke run on a CPU)"),
)

HELPERS: tuple[Helper, ...] = (
    Helper("bench.train.step_peers", "bench gpu and bench train's host work: the plain loop and the HF Trainer on "
           "lmforge's model and rows, one process per system and shape"),
    Helper("bench.train.hf_trainer", "bench train and bench learn: the HF Trainer, under torchrun for 2 processes"),
    Helper("bench.train.learn_masks", "bench learn's masks ablations: the HF Trainer with its collator replaced"),
    Helper("bench.train.gpu_block", "by hand on a GPU (docs/BENCHMARKS.md \"gpu\"), one process per inductor setting"),
    Helper("bench.transfer.gpu", "bench transfer --gpu, infra/gpu/run.sh on the device, and itself for the HF "
           "Trainer's peer (--hf-peer)"),
)


def bench(name: str) -> Bench:
    """The record of `lmforge bench <name>`; KeyError for a name it does not have."""
    for b in BENCHES:
        if b.name == name:
            return b
    raise KeyError(name)


def make_runs() -> list[tuple[str, ...]]:
    """What `make bench` runs, in order: each `lmforge bench` argv (name first)."""
    return [(b.name, *b.make) for b in BENCHES if b.make is not None]
