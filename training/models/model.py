"""Model presets (training.models.presets) made into a Hugging Face model for the shards' objective.

MLM shards (mlm, whole_word, span) train a `BertForMaskedLM`, causal shards a Llama-style decoder
(`LlamaForCausalLM`: rotary positions, RMSNorm, SwiGLU, grouped-query attention; a `gpt2`-family preset
trains `GPT2LMHeadModel`), t5_span shards a T5 (`T5ForConditionalGeneration`), all of the preset's
sizes. The models are HF-native, so later stages load them with `AutoModelForMaskedLM`,
`AutoModelForCausalLM` or `AutoModelForSeq2SeqLM`; the sizes live in training.models.presets.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM

from schemas.objectives import objective as objective_record
from schemas.objectives import objectives_of_kind
from training.models.attention import document_mask
from training.models.model_formats import refuse_quantized
from training.models.model_kinds import KINDS
from training.models.presets import ANY_FAMILY, FAMILIES, MODEL_PRESETS, ModelConfig, preset  # noqa: F401  (re-exported)
from training.runtime.recipe import masked_accuracy, param_groups  # noqa: F401  (param_groups: re-exported)


def bert_config(m: ModelConfig, vocab_size: int, pad_id: int, max_position: int) -> BertConfig:
    """The HF config: vocab and pad id from the tokenizer, `max_position` learned positions."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=m.hidden_size,
        num_hidden_layers=m.num_layers,
        num_attention_heads=m.num_heads,
        intermediate_size=m.intermediate_size,
        hidden_dropout_prob=m.dropout,
        attention_probs_dropout_prob=m.dropout,
        max_position_embeddings=max_position,
        pad_token_id=pad_id,
        type_vocab_size=2,
        tie_word_embeddings=m.tie_embeddings,
    )


def prenorm_config(m: ModelConfig, vocab_size: int, pad_id: int, max_position: int):
    """The pre-LN masked LM's config. RoBERTa numbers positions from pad_id + 1, so it needs
    max_position + pad_id + 1 position embeddings; two token types, as BERT, for sentence pairs."""
    from transformers import RobertaPreLayerNormConfig

    return RobertaPreLayerNormConfig(
        vocab_size=vocab_size, hidden_size=m.hidden_size, num_hidden_layers=m.num_layers,
        num_attention_heads=m.num_heads, intermediate_size=m.intermediate_size, hidden_dropout_prob=m.dropout,
        attention_probs_dropout_prob=m.dropout, max_position_embeddings=max_position + pad_id + 1,
        pad_token_id=pad_id, bos_token_id=None, eos_token_id=None, type_vocab_size=2,
        tie_word_embeddings=m.tie_embeddings)


def gpt2_config(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None, max_position: int):
    """A GPT-2 of the preset's sizes: `max_position` learned positions, tied embeddings."""
    from transformers import GPT2Config

    return GPT2Config(vocab_size=vocab_size, n_positions=max_position, n_embd=m.hidden_size, n_layer=m.num_layers,
                      n_head=m.num_heads, n_inner=m.intermediate_size, resid_pdrop=m.dropout, embd_pdrop=m.dropout,
                      attn_pdrop=m.dropout, pad_token_id=pad_id, bos_token_id=eos_id, eos_token_id=eos_id,
                      tie_word_embeddings=m.tie_embeddings)


def llama_config(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None, max_position: int):
    """A Llama-style decoder of the preset's sizes (transformers' LlamaConfig): rotary positions up to
    `max_position` (no table), RMSNorm before each sublayer, a SwiGLU feed-forward `intermediate_size` wide,
    `num_kv_heads` key/value heads (grouped-query attention; 0: one per head), no biases. Llama has no hidden
    dropout; the preset's dropout applies to the attention probabilities."""
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=vocab_size, hidden_size=m.hidden_size, intermediate_size=m.intermediate_size,
                       num_hidden_layers=m.num_layers, num_attention_heads=m.num_heads,
                       num_key_value_heads=m.num_kv_heads or m.num_heads, hidden_act="silu",
                       max_position_embeddings=max_position, rms_norm_eps=1e-5, attention_dropout=m.dropout,
                       pad_token_id=pad_id, bos_token_id=eos_id, eos_token_id=eos_id,
                       tie_word_embeddings=m.tie_embeddings)


def t5_config(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None):
    """A T5 (v1.0 layout, ReLU feed-forward) with as many encoder and decoder blocks as the preset
    has layers; decoding starts from pad, as HF's T5 `_shift_right` (and the loader) do.

    The head is v1.0's whatever the preset's `tie_embeddings`: tied to the embeddings and fed the decoder's output
    scaled by d_model^-0.5. transformers 5 ties T5's head always and reads `tie_word_embeddings: false` as "do not
    scale" (T5 v1.1's flag), while transformers 4 unties the head on it; saved tied and scaled, the model is the same
    function in both. Unscaled, the tied head (drawn at std 1) gave logits of std sqrt(d_model): a first loss of 35
    nats at the tiny preset and 51 at demo, where ln(vocab) is 9 (measured, 8,000 tokens)."""
    from transformers import T5Config

    return T5Config(vocab_size=vocab_size, d_model=m.hidden_size, d_kv=m.hidden_size // m.num_heads,
                    d_ff=m.intermediate_size, num_layers=m.num_layers, num_decoder_layers=m.num_layers,
                    num_heads=m.num_heads, dropout_rate=m.dropout, feed_forward_proj="relu", pad_token_id=pad_id,
                    eos_token_id=eos_id, decoder_start_token_id=pad_id, tie_word_embeddings=True)


# ---- model families: which HF model a preset's sizes become, per model kind -----------------------

Builder = Callable[[ModelConfig, int, int, "int | None"], torch.nn.Module]
"""(preset, vocab_size, pad_id, eos_id) -> the training module (forward(**batch) -> loss, `.hf` to export)."""


def _prenorm_mlm(m: ModelConfig, vocab_size: int, pad_id: int) -> torch.nn.Module:
    from transformers import RobertaPreLayerNormForMaskedLM

    return SparseMLM(instantiate(RobertaPreLayerNormForMaskedLM, prenorm_config(m, vocab_size, pad_id, m.max_position)))


def _bert_mlm(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None) -> torch.nn.Module:
    if m.prenorm:
        return _prenorm_mlm(m, vocab_size, pad_id)
    return SparseMLM(build_model(bert_config(m, vocab_size, pad_id, m.max_position)))


def _roberta_mlm(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None) -> torch.nn.Module:
    if m.prenorm:
        return _prenorm_mlm(m, vocab_size, pad_id)
    from transformers import RobertaConfig, RobertaForMaskedLM

    c = prenorm_config(m, vocab_size, pad_id, m.max_position).to_dict()
    for k in ("model_type", "architectures", "transformers_version"):
        c.pop(k, None)
    return SparseMLM(instantiate(RobertaForMaskedLM, RobertaConfig(**c)))


def _gpt2(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None) -> torch.nn.Module:
    from transformers import GPT2LMHeadModel

    return HFLoss(instantiate(GPT2LMHeadModel, gpt2_config(m, vocab_size, pad_id, eos_id, m.max_position)), shift=True)


def _llama(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None) -> torch.nn.Module:
    from transformers import LlamaForCausalLM

    return HFLoss(instantiate(LlamaForCausalLM, llama_config(m, vocab_size, pad_id, eos_id, m.max_position)), shift=True)


def _t5(m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None) -> torch.nn.Module:
    from transformers import T5ForConditionalGeneration

    return HFLoss(instantiate(T5ForConditionalGeneration, t5_config(m, vocab_size, pad_id, eos_id)))


BUILDERS: dict[str, Builder] = {"bert": _bert_mlm, "llama": _llama, "t5": _t5}
"""The builders an `any` preset picks from (training.models.presets.ANY_FAMILY names which, per model kind)."""

MODEL_FAMILIES: dict[str, dict[str, Builder]] = {
    "any": {kind: BUILDERS[arch] for kind, arch in ANY_FAMILY.items()},
    "roberta": {"masked_lm": _roberta_mlm},
    "gpt2": {"causal_lm": _gpt2},
    "llama": {"causal_lm": _llama},
    "t5": {"seq2seq": _t5},
}
assert set(MODEL_FAMILIES) == set(FAMILIES), "training.models.presets.FAMILIES names the families built here"
"""Preset family (ModelConfig.family) -> the builder of each model kind (training.models.model_kinds) it has: `any`
follows the shards' objective, the others build one architecture. Adding a family: its builders here."""


def build_for_objective(objective: str, m: ModelConfig, vocab_size: int, pad_id: int, eos_id: int | None,
                        seq_len: int) -> torch.nn.Module:
    """The training module for the shards' objective: forward(**batch) -> loss, `.hf` the HF model to export.
    Positions: the preset's max_position (at least the rows' seq_len)."""
    obj = objective_record(objective)
    builders = MODEL_FAMILIES[m.family]
    if obj.model_kind not in builders:
        allowed = [o for kind in builders for o in objectives_of_kind(kind)]
        raise ValueError(f"a {m.family} preset trains on {'/'.join(allowed)} shards, these are {objective}; "
                         "choose a preset of that objective's family (or an `any` preset such as demo)")
    if m.prenorm and not obj.writes_mask:
        raise ValueError(f"prenorm chooses the masked LM's layout; the {objective} model (Llama or GPT-2, T5) is pre-LN already")
    if obj.absolute_positions and m.max_position < seq_len:
        raise ValueError(f"max_position {m.max_position} is shorter than the shards' rows ({seq_len} tokens)")
    module = builders[obj.model_kind](m, vocab_size, pad_id, eos_id)
    if m.position_init == "sinusoidal":
        sinusoidal_positions(module)
    return module


POSITION_TABLES = ("position_embeddings", "wpe")
"""Names of the learned position tables: BERT's and RoBERTa's `embeddings.position_embeddings`, GPT-2's `wpe`."""


def sinusoid_table(rows: int, width: int) -> torch.Tensor:
    """Vaswani et al.'s table: position p, pair i holds sin and cos of p / 10000^(2i / width)."""
    position = torch.arange(rows, dtype=torch.float64)[:, None]
    freq = torch.exp(-torch.arange(0, width, 2, dtype=torch.float64) * (torch.log(torch.tensor(10000.0)) / width))
    table = torch.zeros(rows, width, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)[:, : width // 2]
    return table


def sinusoidal_positions(module: torch.nn.Module) -> int:
    """Start every learned position table of `module` from the sinusoid table, scaled to the RMS of the model's random
    init (its config's initializer_range, 0.02), so positions weigh as much against the token embeddings as a
    random table would. RoBERTa numbers positions from
    padding_idx + 1: the rows up to the padding row keep their init. Gathers a ZeRO-3 partitioned table to write it.
    Returns the number of tables written; none is an error (the model has rotary or relative positions)."""
    hf = getattr(module, "hf", module)
    rms = getattr(hf.config, "initializer_range", 0.02)
    tables = [mod for name, mod in module.named_modules()
              if isinstance(mod, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in POSITION_TABLES]
    if not tables:
        raise ValueError(f"position_init sinusoidal: {type(hf).__name__} has no learned position table "
                         "(rotary or relative positions); use the default `random`")
    for table in tables:
        start = 0 if table.padding_idx is None else table.padding_idx + 1
        weight = table.weight
        gathered = contextlib.nullcontext()
        if hasattr(weight, "ds_id"):  # partitioned by deepspeed.zero.Init
            import deepspeed

            gathered = deepspeed.zero.GatheredParameters([weight], modifier_rank=0)
        with gathered, torch.no_grad():
            rows, width = weight.shape
            values = sinusoid_table(rows - start, width)
            values *= rms / values.pow(2).mean().sqrt()
            weight[start:] = values.to(weight.dtype)
    return len(tables)


WRAPPERS: dict[str, Callable[[torch.nn.Module], torch.nn.Module]] = {
    "masked_lm": lambda model: SparseMLM(model) if SparseMLM.head_of(model) is not None else HFLoss(model),
    "causal_lm": lambda model: HFLoss(model, shift=True),
    "seq2seq": lambda model: HFLoss(model),
}
"""A loaded HF model of each language-model kind -> the training module around it."""


def load_for_objective(objective: str, model_dir: str, vocab_size: int, pad_id: int, seq_len: int) -> torch.nn.Module:
    """The training module for the shards' objective around an existing HF model (continued pretraining).

    The model must fit the shards: the same vocabulary size and padding id (the tokenizer itself is
    compared by the caller) and positions for seq_len tokens. Weights the checkpoint lacks (a
    sentence-embedding model has no MLM head) are initialised by transformers and listed in the log.
    """
    import transformers
    from transformers import AutoConfig

    refuse_quantized(model_dir, "continued pretraining (--init-from)")
    config = AutoConfig.from_pretrained(model_dir)
    problems = []
    if config.vocab_size != vocab_size:
        problems.append(f"its vocabulary has {config.vocab_size} entries, the shards' tokenizer {vocab_size}")
    if getattr(config, "pad_token_id", None) not in (None, pad_id):
        problems.append(f"its pad id is {config.pad_token_id}, the shards' {pad_id}")
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if positions is not None and positions < seq_len:
        problems.append(f"it has {positions} positions, the shards' rows {seq_len} tokens")
    if problems:
        raise ValueError(f"--init-from {model_dir} does not fit the shards: " + "; ".join(problems)
                         + " (make the tokenizer with `lmforge tokenizer --from` the same model and rebuild the shards)")
    kind = objective_record(objective).model_kind
    auto = getattr(transformers, KINDS[kind].auto_class)
    model, info = auto.from_pretrained(model_dir, output_loading_info=True)
    wrapped = WRAPPERS[kind](model)
    wrapped.loading_info = {k: sorted(v) for k, v in info.items() if v}
    return wrapped


class HFLoss(torch.nn.Module):
    """A HF model whose own forward computes the loss from the loader's batch: a decoder (Llama, GPT-2) shifts the
    labels itself (the loader's causal labels are the inputs, -100 at padding); T5 takes
    input_ids, attention_mask, labels and decoder_input_ids as the loader builds them. Under `document`
    attention (training.models.attention) a causal batch's `doc_ids` become a causal mask within each document."""

    def __init__(self, model, shift: bool = False):
        super().__init__()
        self.hf, self.shift = model, shift
        self.attention_kernel = "sdpa"
        self.last_correct = self.last_counted = torch.zeros((), dtype=torch.long)

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:
        doc_ids = batch.pop("doc_ids", None)
        if doc_ids is not None:
            if not self.shift:
                raise ValueError("document attention is for masked and causal LMs; T5's encoder-decoder rows hold one "
                                 "document each already")
            batch["attention_mask"] = document_mask(doc_ids, self.attention_kernel, causal=True)
        out = self.hf(**batch)
        logits, labels = out.logits, batch["labels"]
        if self.shift:  # a decoder predicts token t + 1 at position t
            logits, labels = logits[:, :-1], labels[:, 1:]
        self.last_correct, self.last_counted = masked_accuracy(logits, labels)
        return out.loss


def build_model(config: BertConfig) -> BertForMaskedLM:
    """A freshly initialised masked LM (call torch.manual_seed first for a reproducible init)."""
    return instantiate(BertForMaskedLM, config)


def instantiate(cls, config):
    """A fresh HF model. Under ZeRO-3 (a live transformers HfDeepSpeedConfig) through `_from_config`, which
    builds it inside deepspeed.zero.Init, partitioned as it is created, and initialises each module's weights
    gathered; otherwise the plain constructor (the same init as always)."""
    from transformers.integrations import is_deepspeed_zero3_enabled

    return cls._from_config(config) if is_deepspeed_zero3_enabled() else cls(config)


class SparseMLM(torch.nn.Module):
    """The MLM loss with the vocabulary head applied only at masked positions.

    HF's `BertForMaskedLM.forward` projects every position onto the vocabulary and then ignores
    85% of them. Projecting only the labelled ~15% gives the same loss (mean cross-entropy over
    labelled tokens) for a fraction of the work: at seq 128, batch 16, hidden 128, a 30k vocab
    head costs 2,048 * 128 * 30,522 * 2 * 3 = 48 GFLOP per step in full versus 7 GFLOP sparse;
    measured on one CPU core, 1.30 s -> 0.39 s per step (8k vocab: 0.51 s -> 0.24 s). NVIDIA's
    and MosaicML's BERTs do the same ("sparse prediction"). The wrapped HF model is `.mlm`;
    that is what gets exported. Any masked LM whose head maps each position on its own works:
    BERT's `cls`, RoBERTa's (and pre-LN RoBERTa's) `lm_head`.
    """

    def __init__(self, mlm):
        super().__init__()
        if self.head_of(mlm) is None:
            raise ValueError(f"SparseMLM: {type(mlm).__name__} has neither a BERT `cls` nor a RoBERTa `lm_head`")
        self.mlm = mlm
        self.last_correct = self.last_counted = torch.zeros((), dtype=torch.long)
        """Top-1 hits and labelled tokens of the last forward (for the MLM accuracy in the metrics)."""
        self._head = self.head_loss
        self.attention_kernel = "sdpa"
        """training.models.attention's kernel for `document` attention: sdpa (dense mask) or flex (BlockMask)."""
        # RoBERTa numbers positions from pad_id + 1; a document's first token is position 0 in the loader's ids
        roberta = getattr(mlm.config, "model_type", "") in ("roberta", "roberta-prelayernorm")
        self.position_offset = mlm.config.pad_token_id + 1 if roberta else 0

    @staticmethod
    def head_of(mlm):
        head = getattr(mlm, "cls", None)
        return head if head is not None else getattr(mlm, "lm_head", None)

    @property
    def hf(self):
        """The model to export (HFLoss has the same attribute)."""
        return self.mlm

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                masked_index: torch.Tensor | None = None, masked_labels: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, doc_ids: torch.Tensor | None = None) -> torch.Tensor:
        """`masked_index`/`masked_labels` (from `sparse_targets`, built on the CPU before the batch moves): the
        flat positions to project and their labels, padded with -100. Without them the positions are found
        here by a boolean mask, which on a GPU costs a host sync. `doc_ids` and `position_ids` (the loader's,
        under `document` attention, training.models.attention): attention within each document, positions restarting."""
        mask = attention_mask if doc_ids is None else document_mask(doc_ids, self.attention_kernel)
        if position_ids is not None and self.position_offset:
            position_ids = position_ids + self.position_offset
        hidden = self.mlm.base_model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids).last_hidden_state
        if masked_index is None:
            keep = labels != -100
            loss, self.last_correct, self.last_counted = self.loss_at(hidden[keep], labels[keep])
            return loss
        loss, self.last_correct, self.last_counted = self._head(hidden, masked_index, masked_labels)
        return loss

    def head_loss(self, hidden: torch.Tensor, index: torch.Tensor, targets: torch.Tensor):
        """(mean loss, top-1 hits, labelled count) of the vocabulary head at the flat positions `index`."""
        return self.loss_at(hidden.flatten(0, 1).index_select(0, index), targets)

    def loss_at(self, picked: torch.Tensor, targets: torch.Tensor):
        logits = self.head_of(self.mlm)(picked)  # (masked tokens, vocab)
        correct, counted = masked_accuracy(logits, targets)
        # sum / count rather than mean: a batch with no masked token gives 0, not NaN
        loss = F.cross_entropy(logits.float(), targets, ignore_index=-100, reduction="sum")
        return loss / counted.clamp(min=1), correct, counted

    def compile_head(self, mode: str = "default") -> None:
        """torch.compile the head (gather, transform, decoder, loss) as one region (training.pretraining.compiled); its
        shapes are fixed when `sparse_targets` pads to a fixed size."""
        self._head = torch.compile(self.head_loss, mode=mode)


SPARSE_MULTIPLE = 8
"""`sparse_targets` pads the masked positions to a multiple of this: a batch of 16 x 128 at 15% masks
307 +- 16 positions, so steps see a handful of head shapes (tensor-core friendly) and waste < 8 rows."""


def sparse_targets(batch: dict[str, torch.Tensor], multiple: int = SPARSE_MULTIPLE,
                   size: int | None = None) -> dict[str, torch.Tensor]:
    """The batch plus SparseMLM's `masked_index` (flat positions of the labelled tokens, padded with position 0)
    and `masked_labels` (their labels, -100 at the padding), computed on the CPU tensors before they move.
    Padded to a multiple of `multiple`, or to exactly `size` (a compiled head then sees one shape every step;
    `masked_bound` gives a size no batch exceeds)."""
    flat = batch["labels"].reshape(-1)
    index = torch.nonzero(flat != -100).reshape(-1)
    n = index.numel()
    if size is not None and n > size:
        raise ValueError(f"a batch has {n} masked tokens, more than the fixed size {size} (masked_bound)")
    padded_size = size if size is not None else max(multiple, -(-n // multiple) * multiple)
    padded = torch.zeros(padded_size, dtype=torch.long)
    padded[:n] = index
    labels = torch.full((padded_size,), -100, dtype=flat.dtype)
    labels[:n] = flat[index]
    return {**batch, "masked_index": padded, "masked_labels": labels}


def masked_bound(rows: int, most_per_row: int, multiple: int = SPARSE_MULTIPLE) -> int:
    """A fixed masked-position count for `sparse_targets(size=...)`: `rows` times the most masks any row has
    (training.pretraining.data.most_masks_per_row), rounded up to `multiple`. At 15% of 128 tokens a row has at most ~20, a
    batch of 16 on average 307: the bound pads ~4% more rows into the head than the data has."""
    return max(multiple, -(-rows * most_per_row // multiple) * multiple)


def num_parameters(model) -> int:
    """Distinct parameters (the tied decoder/embedding matrix counts once); under ZeRO-3 each parameter's
    full size (`ds_numel`), not the rank's partition."""
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
