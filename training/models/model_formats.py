"""The formats a model directory can hold besides transformers' own, and loading any of them.

- int8 (`lmforge compress --method int8`, training/compression/compress.py): the float model's config and tokenizer,
  the dynamic-quantized `state_dict` as `int8.pt`, and `quantization.json`. transformers has no format
  for such a model, so `load_int8` rebuilds the architecture from the config, quantizes it the same way
  and loads the weights. Inference only: training stages refuse it (`refuse_quantized`).
- head-pruned (`lmforge compress --method prune`, training/compression/prune.py chooses the heads): config and
  tokenizer, the weights as `pruned.pt`, and `pruning.json` naming the heads removed per layer
  (transformers 5 dropped `prune_heads` and the `pruned_heads` config key); `load_pruned` rebuilds it.

`load_model(dir)` loads any of them, or a plain HF directory with the Auto class of its kind
(training.models.model_kinds); `ModelHandle.open(dir)` does it once for a stage that asks several things of one
model (the evaluation card: its kind, its weights, its tokenizer), which then passes the handle along.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.models.model_kinds import auto_class, check_tokenizer, model_kind

QUANT_FILE = "quantization.json"
INT8_WEIGHTS = "int8.pt"
PRUNE_FILE = "pruning.json"
PRUNED_WEIGHTS = "pruned.pt"


def load_model(model_dir: str | Path):
    """(model, kind), loaded with the Auto class of its kind (int8 and head-pruned models as
    training/compression/compress.py saved them)."""
    if is_quantized(model_dir):
        return load_int8(model_dir)
    if (Path(model_dir) / PRUNE_FILE).exists():
        return load_pruned(model_dir)
    kind = model_kind(model_dir)
    return auto_class(kind).from_pretrained(str(model_dir)), kind


@dataclass
class ModelHandle:
    """One model folder opened once: its kind (read from the folder once), the loaded model and, on first use,
    its tokenizer."""

    path: str
    kind: str
    model: Any
    _tokenizer: Any = field(default=None, repr=False)

    @classmethod
    def open(cls, model_dir: str | Path) -> ModelHandle:
        """A clear error for a folder that is not a model or has no tokenizer, before any weights load."""
        model_kind(model_dir)
        check_tokenizer(model_dir)
        model, kind = load_model(model_dir)
        return cls(str(model_dir), kind, model)

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.path)
        return self._tokenizer


# ---- int8 ------------------------------------------------------------------------------------------

def is_quantized(model_dir: str | os.PathLike) -> bool:
    return (Path(model_dir) / QUANT_FILE).exists()


def refuse_quantized(model_dir: str | os.PathLike, what: str) -> None:
    """A clear error when a training stage is pointed at an int8 model."""
    if is_quantized(model_dir):
        q = json.loads((Path(model_dir) / QUANT_FILE).read_text())
        raise ValueError(f"{model_dir} is an int8 dynamic-quantized model, for inference only; {what} needs the float "
                         f"model it was made from ({q.get('source', 'see quantization.json')})")


def quantize(model, scheme: str = "per_channel", embeddings: bool = True):
    """int8 dynamic quantization of the Linear layers (and weight-only int8 embedding rows), in place."""
    import torch
    from torch.ao import quantization as tq

    spec = {torch.nn.Linear: tq.per_channel_dynamic_qconfig if scheme == "per_channel" else tq.default_dynamic_qconfig}
    if embeddings:
        spec[torch.nn.Embedding] = tq.float_qparams_weight_only_qconfig
    with warnings.catch_warnings():  # torch deprecates quantized tensors in favour of torchao; not ours to fix
        warnings.simplefilter("ignore", UserWarning)
        q = tq.quantize_dynamic(model, spec, dtype=torch.qint8)
    from torch.ao.nn.quantized import Embedding as Int8Embedding

    for m in q.modules():
        # the int8 lookup needs contiguous ids; BERT's default token_type_ids are an expanded (strided) buffer
        if isinstance(m, Int8Embedding):
            m.register_forward_pre_hook(_contiguous_ids)
    return q


def _contiguous_ids(module, args):
    return (args[0].contiguous(), *args[1:])


def load_int8(model_dir: str | os.PathLike):
    """(model, kind) of a directory written by `compress --method int8`."""
    import torch
    import transformers as tf

    kind = model_kind(model_dir)
    spec = json.loads((Path(model_dir) / QUANT_FILE).read_text())
    # models quantized before the scheme was recorded: per-tensor Linear layers, fp32 embeddings
    model = quantize(auto_class(kind).from_config(tf.AutoConfig.from_pretrained(str(model_dir))).eval(),
                     spec.get("scheme", "per_tensor"), spec.get("int8_embeddings", False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        state = torch.load(Path(model_dir) / INT8_WEIGHTS, weights_only=True)
    model.load_state_dict(state)
    return model.eval(), kind



# ---- head-pruned -----------------------------------------------------------------------------------

def attention_blocks(model) -> list[Any]:
    """Each layer's attention module: it holds `self` (query/key/value, head counts) and `output.dense`."""
    blocks = [m for m in model.modules()
              if hasattr(m, "self") and hasattr(m, "output") and hasattr(m.self, "query")
              and hasattr(m.output, "dense")]
    if not blocks:
        raise ValueError(f"{type(model).__name__}: no BERT-style attention blocks (self.query/key/value, output.dense) "
                         "to prune heads from")
    return blocks


def prune(model, heads: dict[int, list[int]]):
    """Remove `heads` ({layer: [head, ...]}) in place; returns the model."""
    import torch
    from transformers.pytorch_utils import prune_linear_layer

    blocks = attention_blocks(model)
    for layer, drop in heads.items():
        att = blocks[int(layer)]
        sa = att.self
        n, size = sa.num_attention_heads, sa.attention_head_size
        if not drop:
            continue
        if len(set(drop)) >= n or max(drop) >= n:
            raise ValueError(f"layer {layer}: cannot remove heads {drop} of {n} (at least one stays)")
        keep = torch.tensor([h * size + i for h in range(n) if h not in set(drop) for i in range(size)], dtype=torch.long)
        sa.query = prune_linear_layer(sa.query, keep)
        sa.key = prune_linear_layer(sa.key, keep)
        sa.value = prune_linear_layer(sa.value, keep)
        att.output.dense = prune_linear_layer(att.output.dense, keep, dim=1)
        sa.num_attention_heads = n - len(set(drop))
        sa.all_head_size = sa.num_attention_heads * size
    return model


def load_pruned(model_dir: str | os.PathLike):
    """(model, kind) of a directory written by `compress --method prune`."""
    import torch
    import transformers as tf

    kind = model_kind(model_dir)
    model = auto_class(kind).from_config(tf.AutoConfig.from_pretrained(str(model_dir)))
    spec = json.loads((Path(model_dir) / PRUNE_FILE).read_text())
    prune(model, {int(k): v for k, v in spec["pruned_heads"].items()})
    model.load_state_dict(torch.load(Path(model_dir) / PRUNED_WEIGHTS, weights_only=True))
    return model.eval(), kind
