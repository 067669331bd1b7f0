"""Model presets by name: the sizes of each model lmforge trains, without torch or transformers.

    preset("tiny")            # a ModelConfig; MODEL_PRESETS lists them all
    "bert_base" in MODEL_PRESETS

Light on purpose: `lmforge pretrain` reads and validates its options in the launching process, which then starts
torchrun's workers; importing transformers there cost ~4 s of every pretraining stage's start (the workers import
it anyway). training.models.model turns a ModelConfig into a Hugging Face model, per family (MODEL_FAMILIES).
Presets are plain functions (torchtitan's `debug()` style); add one by writing a function and listing it in
MODEL_PRESETS.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

FAMILIES = ("any", "roberta", "gpt2", "llama", "t5")
"""ModelConfig.family's values; training.models.model.MODEL_FAMILIES holds each one's builders."""

POSITION_INITS = ("random", "sinusoidal")
"""ModelConfig.position_init's values: how a learned position table starts (training.models.model.sinusoidal_positions)."""


@dataclass(frozen=True)
class ModelConfig:
    hidden_size: int
    """Width of every layer (BERT's H)."""
    num_layers: int
    """Transformer blocks (BERT's L)."""
    num_heads: int
    """Attention heads; hidden_size must divide by it."""
    intermediate_size: int
    """Feed-forward width, 4 * hidden_size in BERT."""
    num_kv_heads: int = 0
    """Key/value heads of a Llama-style decoder (grouped-query attention, Ainslie et al. 2023: each serves
    num_heads / num_kv_heads query heads); 0: one per query head. The other families ignore it."""
    dropout: float = 0.1
    """Dropout on hidden states and attention probabilities (BERT's 0.1)."""
    prenorm: bool = False
    """LayerNorm before attention and feed-forward instead of after (pre-LN, as GPT-2, Cramming and
    MosaicBERT): transformers' RobertaPreLayerNormForMaskedLM instead of BertForMaskedLM. Pre-LN keeps
    gradients well scaled at a high learning rate without a long warm-up (Xiong et al. 2020)."""
    max_position: int = 512
    """Learned positions (BERT's 512, GPT-2's 1024), independent of the training rows' length: a model
    trained on 128-token rows still accepts longer inputs (positions past the training length stay
    untrained, as in BERT's first 90% of steps). T5's relative positions have no table and ignore it."""
    position_init: str = "random"
    """How a learned position table (BERT, RoBERTa, GPT-2) starts: `random` (N(0, 0.02), as the published models)
    or `sinusoidal` (Vaswani et al.'s sines and cosines, scaled to the same 0.02 RMS, so that from the first step
    the dot product of two positions depends on their distance). Still learned either way; rotary (Llama) and
    relative (T5) positions have no table and ignore it."""
    tie_embeddings: bool = True
    """The output projection shares the token embedding matrix (BERT, GPT-2, T5 v1.0: the published
    architectures keep it). Untied, a token's input row learns only from the contexts it appears in; tied,
    every softmax also pushes the rows of tokens absent from the batch along the hidden states' common
    direction, and Adam's normalised step moves a rare row as far as a frequent one (Gao et al. 2019,
    representation degeneration). The CPU-scale presets (tiny, demo and Turc et al.'s miniatures) untie: the demo preset on the transfer
    bench's 13M-token corpus, 60 CPU-minutes, reached a held-out MLM loss of 4.74 untied against 5.96
    tied, its rows' mean cosine 0.01 against 0.78, and its WSJ tagger went from 5.1 points under its
    random-init twin to 2.6 over it (docs/BENCHMARKS.md, transfer: recipe measurements)."""
    family: str = "any"
    """The architecture the sizes belong to: `any` (the model follows the shards' objective: BERT for
    MLM, a Llama-style decoder for causal, T5 for t5_span), or one objective's model only: `roberta`
    (RoBERTa's masked LM), `llama` or `gpt2` (causal shards) or `t5` (t5_span shards)."""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {self.family!r}")
        if self.position_init not in POSITION_INITS:
            raise ValueError(f"position_init must be one of {', '.join(POSITION_INITS)}, got {self.position_init!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}")
        if min(self.hidden_size, self.num_layers, self.num_heads, self.intermediate_size) < 1:
            raise ValueError(f"model sizes must be positive: {self}")
        if self.num_kv_heads < 0 or (self.num_kv_heads and self.num_heads % self.num_kv_heads):
            raise ValueError(f"num_kv_heads {self.num_kv_heads} must divide num_heads {self.num_heads} (0: as many)")


@dataclass(frozen=True)
class Architecture:
    """What the FLOPs count (training.models.flops.model_shape) needs to know of an architecture."""

    gated_mlp: bool = False
    """A gated feed-forward (SwiGLU: gate, up and down matrices) instead of two matrices."""
    grouped_kv: bool = False
    """Key/value heads shared by groups of query heads (ModelConfig.num_kv_heads)."""
    head_transform: bool = True
    """BERT's H x H transform before the vocabulary decoder."""
    encoder_decoder: bool = False


ARCHITECTURES = {"bert": Architecture(), "roberta": Architecture(), "gpt2": Architecture(head_transform=False),
                 "llama": Architecture(gated_mlp=True, grouped_kv=True, head_transform=False),
                 "t5": Architecture(encoder_decoder=True)}
"""Each architecture a preset can build (training.models.model.ARCHITECTURES and MODEL_FAMILIES build them)."""
ANY_FAMILY = {"masked_lm": "bert", "causal_lm": "llama", "seq2seq": "t5"}
"""What an `any` preset builds for each model kind (training.models.model_kinds): BERT for masked-LM shards, a
Llama-style decoder for causal shards (GPT-2 is the `gpt2` family's), T5 for t5_span."""


def architecture(m: ModelConfig, model_kind: str) -> Architecture:
    """The architecture `m` builds for shards of `model_kind`."""
    return ARCHITECTURES[ANY_FAMILY[model_kind] if m.family == "any" else m.family]


def tiny() -> ModelConfig:
    """For tests: ~0.1M parameters in the blocks, trains in seconds."""
    return ModelConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256, tie_embeddings=False)


def demo() -> ModelConfig:
    """For the CPU demo: 4 * 12 * 128^2 = 0.8M parameters in the blocks, plus 128 per vocab entry
    (3.8M for a 30k vocab); a few minutes of 2-process training shows the loss falling.

    No dropout: a run of a few hundred steps sees each sequence a handful of times and cannot
    overfit, and dropout slows the early fall (the Cramming BERT recipe, Geiping & Goldstein
    2022, drops it too). Measured on 8k-vocab text, 2 x 16 sequences of 128 per step: with
    dropout 0.1 the loss sat at 6.1-6.4 from step 50 to 300; without, 5.95 at step 400 and 5.76
    at step 600, still falling.
    """
    return ModelConfig(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512, dropout=0.0, tie_embeddings=False)


def bert_base() -> ModelConfig:
    """BERT-base (110M) for reference; far too slow on CPU."""
    return ModelConfig(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072)


def bert_base_launch() -> ModelConfig:
    """bert_base's 12 layers and 12 heads at width 24 (head size 2, feed-forward 96), no dropout: a step whose
    arithmetic is negligible, so its time is the host's work of launching it (bench train's host-work figures)."""
    return ModelConfig(hidden_size=24, num_layers=12, num_heads=12, intermediate_size=96, dropout=0.0)


# Turc et al. 2019 ("Well-Read Students Learn Better"), the BERT miniatures: L layers, H wide, H/64
# heads, 4H feed-forward. Parameters in the blocks ~12 L H^2: tiny 0.4M, mini 3.1M, small 12.6M,
# medium 25.2M (plus H per vocabulary entry in the tied embedding).
def bert_tiny() -> ModelConfig:
    """BERT-Tiny, L=2 H=128."""
    return ModelConfig(hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512, tie_embeddings=False)


def bert_mini() -> ModelConfig:
    """BERT-Mini, L=4 H=256."""
    return ModelConfig(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024, tie_embeddings=False)


def bert_small() -> ModelConfig:
    """BERT-Small, L=4 H=512."""
    return ModelConfig(hidden_size=512, num_layers=4, num_heads=8, intermediate_size=2048, tie_embeddings=False)


def bert_medium() -> ModelConfig:
    """BERT-Medium, L=8 H=512."""
    return ModelConfig(hidden_size=512, num_layers=8, num_heads=8, intermediate_size=2048, tie_embeddings=False)


def roberta_base() -> ModelConfig:
    """RoBERTa-base (125M with its 50k vocabulary): BERT-base's sizes in RoBERTa's masked LM (positions
    numbered after the padding id, no next-sentence head); MLM shards only."""
    return ModelConfig(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072, family="roberta")


def gpt2() -> ModelConfig:
    """GPT-2 small (124M with its 50k vocabulary): 12 x 768, 1,024 positions; causal shards only."""
    return ModelConfig(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072, max_position=1024,
                       family="gpt2")


def smollm_135m() -> ModelConfig:
    """A Llama-style decoder of SmolLM-135M's sizes (Hugging Face, 2024): 30 blocks 576 wide, 9 query heads
    sharing 3 key/value heads, SwiGLU 1,536 wide, rotary positions up to 2,048, tied embeddings, no dropout
    (135M with its 49k vocabulary); causal shards only."""
    return ModelConfig(hidden_size=576, num_layers=30, num_heads=9, num_kv_heads=3, intermediate_size=1536,
                       dropout=0.0, max_position=2048, family="llama")


def t5_small() -> ModelConfig:
    """T5-small (60M with its 32k vocabulary): 6 encoder and 6 decoder blocks, 512 wide, 8 heads, 2,048
    feed-forward, dropout 0.1; t5_span shards only."""
    return ModelConfig(hidden_size=512, num_layers=6, num_heads=8, intermediate_size=2048, family="t5")


MODEL_PRESETS: dict[str, Callable[[], ModelConfig]] = {
    "tiny": tiny, "demo": demo, "bert_base": bert_base, "bert_base_launch": bert_base_launch,
    "bert_tiny": bert_tiny, "bert_mini": bert_mini, "bert_small": bert_small, "bert_medium": bert_medium,
    "roberta_base": roberta_base, "gpt2": gpt2, "smollm_135m": smollm_135m, "t5_small": t5_small,
}


def preset(name: str) -> ModelConfig:
    if name not in MODEL_PRESETS:
        raise ValueError(f"unknown model preset {name!r}; choose one of {sorted(MODEL_PRESETS)}")
    return MODEL_PRESETS[name]()
