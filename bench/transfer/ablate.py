"""Which data choice pays, measured on real text: a corpus ablation (flows/ablation/ablate.py) on the transfer bench's corpus.

    lmforge bench ablate [--resume] [--seeds 1 2 3] [--token-budget 3000000] [--arms baseline no-near-dedup ...]

The crawl is `bench transfer`'s (bench/kit/real_text.py: Debian documentation in English and Russian,
dictionaries, fortunes, Russian treebank sentences; fetched once into samples/.cache/transfer). Each arm's corpus
stage runs over all of it; one tokenizer (trained on the baseline's corpus) serves every arm; every model is
`--model` pretrained on the same `--token-budget` positions (2 processes), scored on the reference set
(masked-LM loss on every reference text) and fine-tuned on each task (`--tasks`, the same splits, `--seeds`),
with the random-init twin, the majority class and TF-IDF + logistic regression beside them.

The section in docs/BENCHMARKS.md holds each arm against the published direction:
- Lee et al. 2022 (near-duplicate removal lowers held-out perplexity): `no-near-dedup` against `baseline` on the
  reference loss; expected higher without near-dedup;
- the T5 paper (C4's heuristic filtering beats unfiltered C4 downstream) and FineWeb (each filter's aggregate score
  gain): `no-quality-rules` against `baseline` on each task and on the mean of the task differences; expected lower
  without the rules;
and says for each whether this scale reproduces the direction, goes the other way, or cannot tell (with the seeds at
which the observed difference would clear its interval). Every stage is an lmforge stage with its manifest under
`--work`; `--resume` keeps them (an interrupted pretraining continues from its checkpoint), so a long run can be
stopped and continued.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.kit.options import bench_parser, parse_bench
from bench.kit.tasks import TASKS
from common.config import opt
from flows.ablation.stats import paired, seeds_phrase

ROOT = Path(__file__).resolve().parents[2]
TITLE = "ablate: which data choice pays"
ARMS = ("baseline", "no-near-dedup", "no-quality-rules")


@dataclass
class AblateBenchConfig:
    work: str = opt("runs/bench-ablate", "where every stage writes (the ablation is <work>/ablation)")
    cache: str = opt(str(ROOT / "samples" / ".cache" / "transfer"), "the transfer bench's downloaded sources")
    crawl: list[str] = opt([], "crawl files, folders or globs instead of the transfer bench's corpus (a smaller run, "
                               "or your own crawl)")
    reference: str = opt(str(ROOT / "samples" / "reference" / "news-en.jsonl"), "the reference texts (JSONL)")
    arms: list[str] = opt(list(ARMS), "arm presets (flows/ablation/arms.py)")
    seeds: list[int] = opt([1, 2, 3], "seeds per arm (pretraining and fine-tuning)")
    tasks: list[str] = opt(["vader", "reuters", "wsj_pos"], "downstream tasks, each fine-tuned by the transfer bench's "
                                                            "recipe for it (bench/kit/tasks.py)")
    model: str = opt("demo", "the model preset every arm trains (demo: 4 x 128, the largest whose 9 models fit the bench's time here)")
    token_budget: int = opt(1_200_000, "positions each model trains on (2 x 16 x 128 per step)")
    vocab_size: int = opt(16000, "the shared tokenizer's vocabulary")
    lr: float = opt(1e-3, "peak pretraining learning rate")
    ft_min_steps: int = opt(800, "every fine-tune runs at least this many steps (finetune --min-steps), as in bench "
                                 "transfer: more epochs on the small tasks, no early stop before them")
    nproc: int = opt(2, "pretraining processes")
    bf16: bool = opt(False, "pretrain and fine-tune under bf16 autocast: only where the CPU has bf16 instructions "
                            "(AVX512-BF16, AMX); elsewhere it is emulated and several times slower than fp32")

    def stage_options(self) -> dict[str, dict[str, Any]]:
        """Every stage's options: the transfer bench's model and shards, the corpus defaults (what the arms vary)."""
        return {
            "corpus": {"num_shards": 4, "line_dedup": True},
            "tokenizer": {"vocab_size": self.vocab_size},
            "shards": {"seq_len": 128, "num_shards": 4, "valid_per_mille": 20, "mask_num_variants": 4},
            "pretrain": {"model": self.model, "micro_batch_size": 16, "lr": self.lr, "prenorm": True, "dropout": 0.0,
                         "bf16": self.bf16, "warmup_ratio": 0.06, "log_every": 50, "save_every": 250, "eval_batches": 20},
            "evaluate": {},
            "finetune": {"batch_size": 32, "lr": 3e-4, "bf16": self.bf16, "min_steps": self.ft_min_steps},
            "finetune_per_task": {t: {"epochs": p.epochs, "max_length": p.max_length, "max_train": p.max_train}
                                  for t, p in TASKS.items() if t in self.tasks},
        }


@dataclass
class Verdict:
    claim: str
    arm: str
    measure: str
    expected: str
    verdict: str


def _verdict(d: dict[str, Any] | None, expect_positive: bool) -> str:
    if not d or d.get("ci_low") is None:
        return "no interval (one seed)"
    if d["ci_low"] <= 0 <= d["ci_high"]:
        more = f"; {seeds_phrase(d['seeds_to_resolve'])} it at this spread" if d.get("seeds_to_resolve") else ""
        return f"cannot tell: {d['mean']:+.4f} [{d['ci_low']:+.4f}, {d['ci_high']:+.4f}]{more}"
    agrees = (d["mean"] > 0) == expect_positive
    return (f"{'reproduces the direction' if agrees else 'the other way'}: {d['mean']:+.4f} "
            f"[{d['ci_low']:+.4f}, {d['ci_high']:+.4f}]")


def majority_only(report: dict[str, Any], task: str) -> float | None:
    """The majority class's score where every fine-tuned model of every arm (and the random-init twin) scored
    exactly that: the fine-tune learnt nothing at this budget, so no difference between arms can show on the task."""
    c = (report.get("controls") or {}).get(task) or {}
    scores = [*[x for a in report["arms"].values() for x in ((a.get("tasks") or {}).get(task) or {}).get("by_seed", {}).values()],
              *c.get("scratch_by_seed", {}).values()]
    maj = c.get("majority")
    return maj if maj is not None and scores and all(x is not None and abs(x - maj) < 1e-9 for x in scores) else None


def _task_verdict(report: dict[str, Any], task: str, d: dict[str, Any] | None, expect_positive: bool) -> str:
    maj = majority_only(report, task)
    if maj is not None:
        return f"cannot tell: every model, pretrained or not, scores the majority class ({maj:.4f}) on every seed"
    return _verdict(d, expect_positive)


def judge(report: dict[str, Any]) -> list[Verdict]:
    """Each published direction against this run's paired differences (module docstring)."""
    arms, out = report["arms"], []
    nd, nq = arms.get("no-near-dedup", {}), arms.get("no-quality-rules", {})
    if "reference_loss" in nd:
        out.append(Verdict("Lee et al. 2022: near-dup removal lowers held-out perplexity", "no-near-dedup",
                           "reference loss, arm - baseline", "> 0",
                           _verdict(nd["reference_loss"].get("diff_to_baseline"), True)))
    if "reference_loss" in nq:
        out.append(Verdict("T5 / FineWeb: heuristic filtering helps", "no-quality-rules", "reference loss, arm - baseline",
                           "> 0", _verdict(nq["reference_loss"].get("diff_to_baseline"), True)))
    for task, t in (nq.get("tasks") or {}).items():
        out.append(Verdict("T5: C4's filtering beats unfiltered C4 downstream", "no-quality-rules",
                           f"{task} test {t['metric']}, arm - baseline", "< 0",
                           _task_verdict(report, task, t.get("diff_to_baseline"), False)))
    base = arms.get("baseline", {})
    for task, c in (report.get("controls") or {}).items():  # the budget is enough only if pretraining pays at all
        t = (base.get("tasks") or {}).get(task)
        if t and c.get("scratch_by_seed"):
            d = paired({int(k): v for k, v in t["by_seed"].items() if v is not None},
                       {int(k): v for k, v in c["scratch_by_seed"].items() if v is not None})
            out.append(Verdict("the model learnt something: pretrained beats its random-init twin", "baseline",
                               f"{task} test {t['metric']}, pretrained - random init", "> 0",
                               _task_verdict(report, task, d, True)))
    if nq.get("tasks") and base.get("tasks"):  # FineWeb's aggregate: the mean over tasks, per seed, paired
        seeds = set.intersection(*[set(t["by_seed"]) for t in [*nq["tasks"].values(), *base["tasks"].values()]])
        agg = {name: {s: sum(t["by_seed"][s] for t in a["tasks"].values()) / len(a["tasks"]) for s in seeds}
               for name, a in (("arm", nq), ("base", base))}
        d = paired(agg["arm"], agg["base"]) if seeds else None
        out.append(Verdict("FineWeb: the filter steps raise the aggregate score", "no-quality-rules",
                           "mean of task scores, arm - baseline", "< 0", _verdict(d, False)))
    return out


def _cleaning_line(report: dict[str, Any]) -> str:
    shared = [n for n, a in report["arms"].items() if a.get("cleaned")]
    if shared:
        return f"{', '.join(shared)} read one shared cleaning of the crawl (they differ only in deduplication)."
    return "Each arm ran its own corpus stage over the whole crawl."


def reading(report: dict[str, Any], verdicts: list[Verdict]) -> list[str]:
    """What each arm changed in the corpus, and whether the downstream rows can judge anything at this budget."""
    arms, base = report["arms"], report["arms"].get("baseline", {})
    out = []
    if base.get("reference_unigram_control") is not None and base.get("reference_loss", {}).get("mean") is not None:
        from training.evaluation.lm_controls import context_line

        line, warning = context_line(base["reference_loss"]["mean"], base["reference_unigram_control"],
                                     "the baseline's reference loss")
        out.append(f"{line[0].upper()}{line[1:]}." + (f" So {warning}." if warning else ""))
    for name, a in arms.items():
        if name == "baseline" or "error" in a or "error" in base:
            continue
        kept = a["docs_kept"] / base["docs_kept"] - 1 if base.get("docs_kept") else 0.0
        out.append(f"{name} changes the corpus by {a['docs_kept'] - base['docs_kept']:+,} documents ({kept:+.1%}): "
                   f"{a['docs_kept']:,} kept against the baseline's {base['docs_kept']:,}; {a['train_tokens']:,} "
                   f"train tokens against {base['train_tokens']:,}, so {a['epochs']:.3f} epochs against "
                   f"{base['epochs']:.3f} at the same budget.")
    learnt = [v for v in verdicts if v.claim.startswith("the model learnt something")]
    if learnt and not any(v.verdict.startswith("reproduces") for v in learnt):
        out.append("At this budget the pretrained model beats its random-init twin on no task (the rows above), so "
                   "no downstream row can judge a data choice; the reference loss can. The transfer section gives the "
                   "budget at which pretraining pays on this corpus; nine models of that size are past this bench's "
                   "3 hours on 2 cores.")
    return out


def render(res: dict[str, Any]) -> str:
    from flows.ablation.report import pretraining_verdicts

    report, cfg = res["report"], res["config"]
    lines = [f"`lmforge bench ablate`: {len(report['arms'])} arms x {len(report['seeds'])} seeds of `{cfg['model']}` "
             f"at {cfg['token_budget']:,} positions each, on the transfer bench's corpus (Debian documentation in "
             "English and Russian, dictionaries, fortunes; its licences in that section); one tokenizer, the reference "
             f"set `{Path(cfg['reference']).name}` (newspaper4k's English gold texts, decontaminated from every arm), "
             f"tasks {', '.join(cfg['tasks'])} on shared splits. Every stage's wall time summed over their manifests: "
             f"{res['stage_minutes']:.0f} minutes (one after another on 2 cores, so the bench's length however often "
             f"it was resumed); this invocation {res['minutes']:.0f} minutes. " + _cleaning_line(report), "",
             "Did pretraining pay (the baseline arm, as the card says it):", "",
             *[f"- {v}" for v in pretraining_verdicts(report)], "", "### Held against the published results", "",
             "| published claim | arm | measure | expected | this run |", "|---|---|---|---|---|"]
    lines += [f"| {v.claim} | {v.arm} | {v.measure} | {v.expected} | {v.verdict} |" for v in res["verdicts"]]
    lines += ["", "### Reading it", "", *[f"- {x}" for x in reading(report, res["verdicts"])]]
    lines += ["", "### The ablation's report", ""]
    body = Path(res["report_md"]).read_text().split("\n", 2)[2]  # without its title
    if body.startswith("Did pretraining pay"):  # said at the top of this section already
        body = body[body.index("\nRecipe: ") + 1:]
    lines += [body.replace("![reference loss and task scores per arm](report.png)",
                           "![reference loss and task scores per arm](benchmarks/ablate.png)")]
    return "\n".join(lines)


def stage_minutes(root: Path) -> float:
    """Every stage's wall time under `root`, from its manifest (stages kept from earlier invocations included)."""
    return sum(json.loads(m.read_text()).get("wall_seconds") or 0 for m in root.rglob("manifest.json")) / 60


def parse(argv: list[str] | None) -> tuple[AblateBenchConfig, argparse.Namespace]:
    ap = bench_parser("lmforge bench ablate", __doc__, AblateBenchConfig)
    ap.add_argument("--resume", action="store_true", help="keep every finished stage of an earlier run")
    ap.add_argument("--out", default=str(ROOT / "docs" / "BENCHMARKS.md"), help="the benchmarks file to update")
    ap.add_argument("--render-only", action="store_true", help="run nothing: write the section again from the "
                    "finished run's report.json under --work (its verdicts with this version's judge)")
    return parse_bench(ap, AblateBenchConfig, argv)


def main(argv: list[str] | None = None) -> int:
    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    from bench.kit.real_text import build
    from flows.ablation.ablate import AblationConfig, run_ablation

    cfg, a = parse(argv)
    work = Path(cfg.work).resolve()
    if a.render_only:
        return render_only(cfg, work, Path(a.out))
    if not a.resume and work.exists():
        shutil.rmtree(work)
    t0 = time.time()
    crawl = list(cfg.crawl) or [str(p) for p in build(Path(cfg.cache))]
    ablation = AblationConfig(crawl=crawl, reference=cfg.reference, arms=list(cfg.arms), name="ablation",
                              runs_dir=str(work), preset="full", seeds=list(cfg.seeds), tasks=list(cfg.tasks),
                              token_budget=cfg.token_budget, nproc=cfg.nproc, stage_timeout_minutes=240)

    @flow(name="lmforge-bench-ablate", persist_result=True, log_prints=True,
          task_runner=ThreadPoolTaskRunner(max_workers=8))
    def bench_ablate() -> dict[str, Any]:
        return run_ablation(ablation, cfg.stage_options())

    out = bench_ablate()
    publish(cfg, work, Path(a.out), out["report"], out["failed"], (time.time() - t0) / 60)
    return 1 if out["failed"] else 0


def publish(cfg: AblateBenchConfig, work: Path, out: Path, report_md: str, failed: dict[str, str], minutes: float,
            measured: str | None = None) -> None:
    """The section in `out` (and its plot and data) from the ablation's report.json under `work`."""
    from bench.kit.report import write_section
    from flows.ablation.outputs import write_outputs
    from flows.ablation.report import differences

    report = json.loads((work / "ablation" / "report.json").read_text())
    report["preset"] = "lmforge bench ablate's own"  # the bench passes every stage's options (stage_options above)
    report["sentences"] = differences(report["arms"])  # in this version's words (the figures are the run's)
    report_md = str(write_outputs(report, work / "ablation"))  # report.md/html/png by this version's renderer
    res = {"config": asdict(cfg), "report": report, "report_md": report_md, "failed": failed, "minutes": minutes,
           "stage_minutes": stage_minutes(work / "ablation"), "verdicts": judge(report)}
    png = work / "ablation" / "report.png"
    if png.exists():
        (out.parent / "benchmarks").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, out.parent / "benchmarks" / "ablate.png")
    write_section(out, TITLE, render(res), {**res, "verdicts": [asdict(v) for v in res["verdicts"]]}, measured)
    print(f"bench ablate: wrote {out} ({minutes:.0f} minutes)")


def render_only(cfg: AblateBenchConfig, work: Path, out: Path) -> int:
    """--render-only: the finished run's figures, this version's verdicts; the time is the run's, from its report."""
    path = work / "ablation" / "report.json"
    if not path.exists():
        raise SystemExit(f"lmforge bench ablate: no finished run under {work} ({path} is missing); run it first")
    report = json.loads(path.read_text())
    failed = {name: a["error"] for name, a in report["arms"].items() if "error" in a}
    measured = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime))
    data = out.parent / "benchmarks" / "ablate-which-data-choice-pays.json"
    minutes = json.loads(data.read_text()).get("minutes", 0.0) if data.exists() else 0.0
    publish(cfg, work, out, str(work / "ablation" / "report.md"), failed, minutes, measured)
    return 1 if failed else 0
