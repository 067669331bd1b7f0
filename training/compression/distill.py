"""DistilBERT-style distillation of a pretrained BERT, DistilGPT2-style of a decoder, or of a T5, into a shallower
student (half its layers by default).

Run:

    python -m training.compression.distill --teacher runs/demo/pretrain/hf --shards runs/demo/shards \\
        --output runs/demo/distill --epochs 1

`--teacher` is the pretrain stage's `hf/` directory (the stage directory itself also works).
Writes `<output>/hf` (student and tokenizer), `<output>/metrics.json` and, last,
`<output>/manifest.json`.

The recipe is Sanh et al. 2019 (DistilBERT, huggingface/transformers examples/research_projects/
distillation): the student keeps the teacher's width, takes `--student-layers` of the teacher's
layers spread over its depth, first and last included (DistilBERT's extract_distilbert.py takes
0, 2, 4, 7, 9, 11 of BERT-base's 12; `student_layers` gives the same), the embeddings and the MLM
head, and trains on

    5.0 * KL(student/T || teacher/T) * T^2 + 2.0 * MLM cross-entropy + 1.0 * (1 - cos(h_s, h_t)),

T = 2, the KL and cosine terms over every attended position, with the teacher in eval mode
under no_grad. On causal shards the teacher is a decoder (the Llama-style one causal shards train, or a GPT-2) and
the recipe is DistilGPT2's (the same examples/research_projects/distillation code, `--mlm false`): the same three
terms, the KL over every attended position's next-token distribution and the student's own cross-entropy on the
next token (`--restrict-ce-to-mask` does not apply: every position predicts). On t5_span shards the teacher is
a T5 and the student keeps half of each stack (encoder and decoder, each stack's first block with its relative
position bias always), trained on the same three terms at every span-target position, the cosine over the decoder's
last hidden states: DistilBART's shrink-and-distil (Shleifer and Rush 2020) at pretraining time. Plain torch AdamW from the shared recipe (training.runtime.recipe); one process, or data-parallel
under pretraining's launcher (`lmforge distill --nproc N`: torchrun, each process a slice of every batch,
gradients summed over gloo/NCCL); the student is small and the teacher's forward dominates, so there
is no DeepSpeed engine here.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from transformers.utils import logging as hf_logging

from common.config import add_config_args, config_from_args, config_to_dict
from common.logs import setup as setup_logs
from schemas.manifest import MANIFEST_NAME, Manifest, atomic_write_json, describe_outputs, input_ref, write_manifest
from schemas.objectives import objective
from training.compression.distill_config import DistillConfig, check_inputs
from training.models.export import HF_DIR, METRICS_NAME, check_tokenizer, load_tokenizer, loss_summary, save_hf
from training.models.model import num_parameters
from training.models.model_kinds import KINDS
from training.pretraining.data import IGNORE_INDEX, RankLoader, ShardSet
from training.pretraining.step_stats import StepRows, log_window_steps
from training.runtime.accelerator import dist_backend
from training.runtime.recipe import (
    build_optimizer,
    init_data_parallel,
    mlm_loss,
    param_groups,
    rank_seed,
    schedule_fn,
    soft_label_kl,
    sum_gradients,
)

log = logging.getLogger("lmforge.distill")


# ---------------------------------------------------------------------------------------------
# The pure core: student init and the loss.


def student_layers(num_teacher_layers: int, depth: int = 0) -> list[int]:
    """`depth` teacher layers spread evenly over the teacher, first and last included (default: half,
    rounded up): round(i * (n - 1) / (k - 1)). 12 -> [0, 2, 4, 7, 9, 11] as DistilBERT; 4 -> [0, 3];
    one layer: [0], the layer that reads the embeddings."""
    n = num_teacher_layers
    k = depth or (n + 1) // 2
    if not 1 <= k <= n:
        raise ValueError(f"a {k}-layer student does not fit a {n}-layer teacher (1..{n})")
    if k == 1:
        return [0]
    return [int(i * (n - 1) / (k - 1) + 0.5) for i in range(k)]


def mlm_head(model):
    """The vocabulary head: a BERT-family masked LM's (BERT's `cls`, RoBERTa's and pre-LN RoBERTa's `lm_head`) or a
    decoder's (Llama's and GPT-2's `lm_head`)."""
    for name in ("cls", "lm_head"):
        head = getattr(model, name, None)
        if head is not None:
            return head
    raise ValueError(f"{type(model).__name__}: no vocabulary head (cls or lm_head); distill takes BERT-family masked "
                     "LMs and decoders")


def block_stacks(model) -> list[tuple[str, str, int]]:
    """Where the transformer blocks sit in the state dict, one (prefix, config key of its depth, depth) per stack:
    in each stack the one list of its depth's blocks of one class (bert.encoder.layer.,
    roberta_prelayernorm.encoder.layer., Llama's model.layers., GPT-2's transformer.h.; T5's encoder.block. and
    decoder.block., num_layers and num_decoder_layers)."""
    cfg = model.config
    if getattr(cfg, "is_encoder_decoder", False):
        parts = [(model.get_encoder(), "num_layers"), (model.get_decoder(), "num_decoder_layers")]
    else:
        parts = [(model, cfg.attribute_map.get("num_hidden_layers", "num_hidden_layers"))]  # GPT-2's n_layer
    where = {id(m): name for name, m in model.named_modules()}
    stacks = []
    for part, key in parts:
        n = getattr(cfg, key)
        found = next((name for name, sub in part.named_modules() if n and isinstance(sub, torch.nn.ModuleList)
                      and len(sub) == n and len({type(m) for m in sub}) == 1), None)
        if found is None:
            raise ValueError(f"{type(model).__name__}: no list of its {n} blocks; distill takes BERT-family encoders, "
                             "decoders and T5")
        stacks.append((".".join(x for x in (where[id(part)], found) if x) + ".", key, n))
    return stacks


def layer_prefix(model) -> str:
    """The first stack's prefix (block_stacks): an encoder's or a decoder's only one."""
    return block_stacks(model)[0][0]


def student_from_teacher(teacher, layers: list[int] | None = None):
    """A model of the teacher's class (BERT, RoBERTa, pre-LN RoBERTa, Llama, GPT-2, T5) with len(layers) blocks
    copied from `teacher` in each of its stacks (T5: the encoder's and the decoder's, each its own spread of
    len(layers) when the two differ in depth); embeddings, final norms, relative position biases (T5's, in each
    stack's first block, always kept) and the vocabulary head copied too."""
    stacks = block_stacks(teacher)
    picks = {}
    for prefix, key, n in stacks:
        picked = student_layers(n) if layers is None else (layers if n == stacks[0][2] else
                                                            student_layers(n, min(len(layers), n)))
        if not picked or max(picked) >= n:
            raise ValueError(f"layers {picked} do not fit a {n}-layer teacher")
        picks[prefix] = (key, picked)
    config = type(teacher.config).from_dict({**teacher.config.to_dict(),
                                             **{key: len(p) for key, p in picks.values()}})
    student = type(teacher)(config)
    source = teacher.state_dict()
    state = {}
    for k in student.state_dict():
        prefix = next((p for p in picks if k.startswith(p)), None)
        if prefix:
            i, rest = k[len(prefix):].split(".", 1)
            state[k] = source[f"{prefix}{picks[prefix][1][int(i)]}.{rest}"]
        else:
            state[k] = source[k]
    student.load_state_dict(state, strict=True)
    student.tie_weights()
    return student


PARTS = ("loss", "ce", "mlm", "cos")
"""The loss and its weighted terms, named as in the loss curve."""


def loss_at(s_sel: torch.Tensor, t_sel: torch.Tensor, labels_sel: torch.Tensor, s_h: torch.Tensor, t_h: torch.Tensor,
            cfg: DistillConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The loss and its PARTS (detached 0-d tensors: read at log steps only) from logits at the KL positions only
    (masked ones with restrict_ce_to_mask, else every attended one; `labels_sel` the labels there, IGNORE_INDEX where
    a position is not masked) and hidden states at attended ones. The KL (soft_label_kl) is batchmean over the
    selected positions, scaled by T^2."""
    labelled = labels_sel != IGNORE_INDEX
    loss_ce = soft_label_kl(s_sel, t_sel, cfg.temperature)
    loss_mlm = F.cross_entropy(s_sel[labelled], labels_sel[labelled], reduction="sum") / labelled.sum().clamp(min=1)
    loss_cos = F.cosine_embedding_loss(s_h, t_h, torch.ones(s_h.shape[0], device=s_h.device))
    loss = cfg.alpha_ce * loss_ce + cfg.alpha_mlm * loss_mlm + cfg.alpha_cos * loss_cos
    return loss, {k: v.detach() for k, v in zip(PARTS, (loss, loss_ce, loss_mlm, loss_cos))}


def distill_step(student, teacher, batch: dict[str, torch.Tensor], cfg: DistillConfig,
                 causal: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Forward both models on one batch and return the loss (student graph only).

    The MLM heads run only where the loss reads them (the KL positions), not over every position of the
    batch: with a 30k vocabulary the head is most of a small model's compute. Measured here on MiniLM
    (6 x 384, 30,522 tokens; a 3-layer student; 16 x 128 tokens, forward and backward, 2 threads): KL over
    every attended position 5.2 s per step with full-sequence heads, 4.0 s with heads at those positions;
    KL at the masked positions only 2.5 s and 1.3 s."""
    if "decoder_input_ids" in batch:
        return _seq2seq_step(student, teacher, batch, cfg)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    labels, att = batch["labels"], batch["attention_mask"].bool()
    if causal:  # each position predicts the next token: its label is the next position's (the last has none)
        labels = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE_INDEX)], dim=1)
    sel = (labels != IGNORE_INDEX) if cfg.restrict_ce_to_mask and not causal else att
    with torch.no_grad():
        t_h = teacher.base_model(**inputs).last_hidden_state
        t_sel = mlm_head(teacher)(t_h[sel])
    s_h = student.base_model(**inputs).last_hidden_state
    return loss_at(mlm_head(student)(s_h[sel]), t_sel, labels[sel], s_h[att], t_h[att], cfg)


def _seq2seq_step(student, teacher, batch: dict[str, torch.Tensor],
                  cfg: DistillConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """An encoder-decoder's step (T5 on t5_span batches): both models read the same corrupted input and decoder
    inputs; the KL, the student's cross-entropy and the cosine of the decoder's last hidden states are taken at
    every target position (a sentinel or a span's token, and the closing eos). The targets are a few tokens per
    row, so the vocabulary head runs over all of them."""
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "decoder_input_ids")}
    labels = batch["labels"]
    sel = labels != IGNORE_INDEX
    with torch.no_grad():
        t = teacher(**inputs, output_hidden_states=True)
    s = student(**inputs, output_hidden_states=True)
    return loss_at(s.logits[sel], t.logits[sel], labels[sel], s.decoder_hidden_states[-1][sel],
                   t.decoder_hidden_states[-1][sel], cfg)


# ---------------------------------------------------------------------------------------------
# The shell: setup -> fit -> validate -> save.


TEACHER_KINDS = {"masked_lm": ("masked LM", " (a bare encoder has no MLM head; fit one with `lmforge pretrain "
                                          "--init-from DIR --freeze-encoder`)"),
                 "causal_lm": ("causal LM", ""), "seq2seq": ("encoder-decoder (T5)", "")}
"""What a teacher of each model kind (training.models.model_kinds) is called in errors, and what to do when its
weights lack a part."""


def load_teacher(teacher_hf: Path, kind: str = "masked_lm"):
    """The teacher as the class its shards' model kind loads (masked LM, causal LM, T5's conditional generation; the
    config's architecture), every weight loaded: a pre-LN model read as a BERT would silently start from random
    weights."""
    from transformers import AutoConfig

    from training.models.model_kinds import auto_class

    config = AutoConfig.from_pretrained(teacher_hf)
    what, fix = TEACHER_KINDS[kind]
    try:
        teacher, info = auto_class(kind).from_pretrained(teacher_hf, output_loading_info=True)
    except ValueError as e:
        raise ValueError(f"{teacher_hf}: a {config.model_type} model is not a {what}; distill takes BERT-family "
                         f"masked LMs on MLM shards, decoders on causal shards and T5 on t5_span shards ({e})") from None
    missing = [k for k in info.get("missing_keys", []) if "position_ids" not in k]
    if missing:
        raise ValueError(f"{teacher_hf}: the teacher's weights lack {', '.join(sorted(missing)[:5])}"
                         f"{' ...' if len(missing) > 5 else ''}: not a complete {what}{fix}")
    block_stacks(teacher)
    mlm_head(teacher)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


@dataclass
class Setup:
    """What fit, validate and save share: this process's place, the checked inputs and the two models."""
    cfg: DistillConfig
    out: Path
    rank: int
    world: int
    teacher_hf: Path
    teacher_stage: Path
    shards: ShardSet
    tokenizer: Any
    teacher: Any
    student: Any
    layers: list[int]
    loader: RankLoader
    total: int
    causal: bool = False
    """Causal shards: a decoder, next-token targets (DistilGPT2's recipe)."""
    kind: str = "masked_lm"
    """The model kind its shards train (training.models.model_kinds): masked_lm, causal_lm or seq2seq."""


@dataclass
class Fitted:
    """What the fit did: its loss curve (PARTS and lr per step), steps, epoch reached, tokens over all processes."""
    curve: list[dict[str, Any]]
    step: int
    epoch: int
    tokens: int
    seconds: float


def run(cfg: DistillConfig) -> Path:
    """setup -> fit -> validate -> save; returns the output directory (rank 0 writes it)."""
    t0 = time.time()
    hf_logging.disable_progress_bar()
    s = setup(cfg)
    fitted = fit(s)
    if s.world > 1:  # the data-parallel processes are done; rank 0 validates and writes
        dist.destroy_process_group()
        if s.rank != 0:
            return s.out
    save(s, fitted, validate(s), t0)
    return s.out


def setup(cfg: DistillConfig) -> Setup:
    """The inputs checked before the output folder exists, then the student cut from the teacher and the loader."""
    out = Path(cfg.output)
    rank, world = init_data_parallel()
    if world > 1 and cfg.batch_size % world:
        raise SystemExit(f"distill: --batch-size {cfg.batch_size} does not split over {world} processes")
    teacher_hf, teacher_stage, shards = check_inputs(cfg)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST_NAME).unlink(missing_ok=True)  # a crashed rerun must not look finished
    tokenizer = load_tokenizer(teacher_hf, max_length=shards.seq_len)
    check_tokenizer(tokenizer, shards.vocab_size, shards.pad_id, shards.mask_id, f"{cfg.shards}/manifest.json")
    kind = objective(shards.objective).model_kind
    causal = KINDS[kind].shift_labels
    teacher = load_teacher(teacher_hf, kind)
    if teacher.config.vocab_size != shards.vocab_size:
        raise ValueError(f"{teacher_hf}: vocab_size {teacher.config.vocab_size} != shards' {shards.vocab_size}")
    torch.manual_seed(cfg.seed)
    layers = student_layers(teacher.config.num_hidden_layers, cfg.student_layers)
    student = student_from_teacher(teacher, layers).train()
    loader = RankLoader(shards.read("train"), rank, world, cfg.batch_size // world, cfg.seed, shards.num_variants)
    torch.manual_seed(rank_seed(cfg.seed, rank))  # each process its own dropout masks
    total = cfg.steps or cfg.epochs * loader.batches_per_epoch
    log.info("teacher %s (%d layers, %s params) -> student %d layers (%s params), layers %s | %d steps x %d seq",
             teacher_hf, teacher.config.num_hidden_layers, f"{num_parameters(teacher):,}",
             student.config.num_hidden_layers, f"{num_parameters(student):,}", layers, total, cfg.batch_size)
    if world > 1:
        log.info("data parallel: %d processes x %d sequences, gradients summed over %s (each loss scaled by 1/%d)",
                 world, cfg.batch_size // world, dist_backend(), world)
    return Setup(cfg, out, rank, world, teacher_hf, teacher_stage, shards, tokenizer, teacher, student, layers,
                 loader, total, causal, kind)


def fit(s: Setup) -> Fitted:
    """The loop: one optimizer step per global batch; the loss parts stay on the device until a log step."""
    cfg, student, world = s.cfg, s.student, s.world
    optimizer = build_optimizer("adamw", param_groups(student, cfg.weight_decay), cfg.lr)  # the shared recipe
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule_fn("linear", int(cfg.warmup_ratio * s.total),
                                                                         s.total))
    rows = StepRows(PARTS)
    step, epoch = 0, 0
    tokens = torch.zeros((), dtype=torch.float64)  # this process's; summed over processes after the fit
    t_fit = t_log = time.time()
    while step < s.total:
        for batch in s.loader.epoch(epoch):
            loss, parts = distill_step(student, s.teacher, batch, cfg, s.causal)
            optimizer.zero_grad(set_to_none=True)
            (loss / world).backward()  # equal shares of the global batch: sum_gradients' rule
            if world > 1:
                parts = dict(zip(PARTS, sum_gradients(student, [v / world for v in parts.values()])))
            torch.nn.utils.clip_grad_norm_(student.parameters(), cfg.clip)
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            step += 1
            tokens += batch["attention_mask"].sum()
            rows.add(step, lr, parts)
            if steps := log_window_steps(step, cfg.log_every, s.total):
                window = rows.flush()[-steps:]  # the window's one host read
                mean = {k: sum(p[k] for p in window) / steps for k in PARTS}
                log.info("step %d/%d | loss %.4f (kl %.3f, mlm %.3f, cos %.3f) | lr %.2e | %.2f s/step",
                         step, s.total, mean["loss"], mean["ce"], mean["mlm"], mean["cos"], lr,
                         (time.time() - t_log) / steps)
                t_log = time.time()
            if step >= s.total:
                break
        epoch += 1
    seconds = time.time() - t_fit
    if world > 1:
        dist.all_reduce(tokens)
    return Fitted(rows.flush(), step, epoch, int(tokens.item()), seconds)


def validate(s: Setup) -> dict[str, float | None]:
    """Student and teacher MLM loss on the same valid batches (rank 0, after the fit)."""
    cfg, valid = s.cfg, {"student_valid_mlm_loss": None, "teacher_valid_mlm_loss": None}
    if not (cfg.eval_batches and s.shards.splits.get("valid")):
        return valid
    table = s.shards.read("valid")
    bs = min(cfg.batch_size, table.num_rows)
    if bs:
        vl = RankLoader(table, 0, 1, bs, cfg.seed, s.shards.num_variants)
        valid = {"student_valid_mlm_loss": mlm_loss(s.student, vl.epoch(0), cfg.eval_batches, s.causal).loss,
                 "teacher_valid_mlm_loss": mlm_loss(s.teacher, vl.epoch(0), cfg.eval_batches, s.causal).loss}
        log.info("valid %s: student %.4f, teacher %.4f", KINDS[s.kind].loss_name,
                 valid["student_valid_mlm_loss"], valid["teacher_valid_mlm_loss"])
    return valid


def save(s: Setup, r: Fitted, valid: dict[str, float | None], t0: float) -> None:
    """hf/, metrics.json and, last, the manifest."""
    cfg, out, teacher, student = s.cfg, s.out, s.teacher, s.student
    hf_files = save_hf(student, s.tokenizer, out / HF_DIR)
    metrics = {"loss_curve": r.curve, **loss_summary(r.curve), **valid, "steps": r.step, "tokens_seen": r.tokens,
               "sequences_seen": r.step * cfg.batch_size, "world_size": s.world,
               "teacher_layers": teacher.config.num_hidden_layers,
               "student_layers": student.config.num_hidden_layers, "copied_layers": s.layers,
               "teacher_parameters": num_parameters(teacher), "student_parameters": num_parameters(student),
               "fit_seconds": r.seconds, "seconds_per_step": r.seconds / r.step, "wall_seconds": time.time() - t0}
    atomic_write_json(out / METRICS_NAME, metrics)
    write_manifest(out, Manifest(
        stage="distill",
        config=config_to_dict(cfg),
        inputs=[input_ref(s.teacher_stage), input_ref(cfg.shards)],
        counts={"steps": r.step, "sequences": r.step * cfg.batch_size, "tokens": r.tokens,
                "epochs_started": r.epoch + 1, **s.loader.counts},
        outputs=describe_outputs(out, [*(f.relative_to(out) for f in hf_files), METRICS_NAME]),
        extra={k: metrics[k] for k in ("first_loss", "last_loss", "loss_window", "student_valid_mlm_loss",
                                        "teacher_valid_mlm_loss", "copied_layers", "teacher_parameters",
                                        "student_parameters", "seconds_per_step")},
        wall_seconds=time.time() - t0,
    ))
    log.info("wrote %s: loss %.4f -> %.4f", out / MANIFEST_NAME, metrics["first_loss"], metrics["last_loss"])


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m training.compression.distill", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser, DistillConfig)
    cfg = config_from_args(DistillConfig, parser.parse_args(argv))
    # transformers probes for DeepSpeed when saving; without this it warns that it guessed CPU
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    rank = int(os.environ.get("RANK", "0"))
    setup_logs(logging.INFO if rank == 0 else logging.WARNING, f"%(asctime)s [rank{rank}] %(name)s: %(message)s")
    return run(cfg)


if __name__ == "__main__":
    main()
