"""Models the `whatif` command can name, each with its inputs and loss:

  torchvision:NAME      an image classifier from torchvision (resnet50, vit_b_16, ...), on
                        3x224x224 images (--image-size), cross-entropy over its classes
  gpt:KEY=VALUE,...     a GPT-2-style decoder (pre-norm transformer layers with causal attention,
                        tied embeddings) on token sequences, next-token cross-entropy; keys:
                        layers, hidden, heads, seq, vocab, dropout (default: GPT-2 small,
                        12/768/12/1024/50257, dropout 0.1)

Each spec becomes a Workload: a model factory, a batch factory and a loss, the same three things the
Python API (gswap.whatif.record) takes for any nn.Module.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Workload:
    name: str
    model: Callable[[], nn.Module]
    make_batch: Callable[[int, torch.device], tuple[Any, Any]]
    loss: Callable[[Any, Any], torch.Tensor]


class GPT(nn.Module):
    """A GPT-2-style language model built from PyTorch's own transformer layer."""

    def __init__(self, layers=12, hidden=768, heads=12, seq=1024, vocab=50257, dropout=0.1):
        super().__init__()
        self.seq = seq
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.tok(tokens) + self.pos(positions))
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device,
                                                              dtype=x.dtype)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.head(self.norm(x))


def _lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def gpt_workload(layers=12, hidden=768, heads=12, seq=1024, vocab=50257, dropout=0.1) -> Workload:
    def make_batch(batch: int, device: torch.device):
        tokens = torch.randint(0, vocab, (batch, seq + 1), device=device)
        return tokens[:, :-1], tokens[:, 1:]

    name = f"gpt(layers={layers}, hidden={hidden}, heads={heads}, seq={seq}, vocab={vocab})"
    return Workload(name, lambda: GPT(layers, hidden, heads, seq, vocab, dropout), make_batch,
                    _lm_loss)


def torchvision_workload(name: str, image_size: int = 224) -> Workload:
    import torchvision

    if name not in torchvision.models.list_models(module=torchvision.models):
        raise ValueError(f"torchvision has no classification model '{name}' "
                         f"(see torchvision.models.list_models())")
    num_classes = 1000

    def make_batch(batch: int, device: torch.device):
        images = torch.randn(batch, 3, image_size, image_size, device=device)
        return images, torch.randint(0, num_classes, (batch,), device=device)

    kwargs = {"image_size": image_size} if name.startswith("vit_") else {}
    return Workload(f"torchvision {name} ({image_size}x{image_size})",
                    lambda: torchvision.models.get_model(name, weights=None, **kwargs),
                    make_batch, F.cross_entropy)


def parse_model(spec: str, image_size: Optional[int] = None) -> Workload:
    kind, _, rest = spec.partition(":")
    if kind == "torchvision" and rest:
        return torchvision_workload(rest, image_size or 224)
    if kind == "gpt":
        args: dict[str, int] = {}
        for item in filter(None, (s.strip() for s in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq or key not in ("layers", "hidden", "heads", "seq", "vocab", "dropout"):
                raise ValueError(f"--model {spec}: '{item}' is not one of layers=, hidden=, heads=, "
                                 "seq=, vocab=, dropout=")
            try:
                args[key] = float(value) if key == "dropout" else int(value)
            except ValueError:
                raise ValueError(f"--model {spec}: {key}={value} is not "
                                 f"{'a number' if key == 'dropout' else 'a whole number'}") from None
            if key == "dropout" and not 0 <= args[key] < 1:
                raise ValueError(f"--model {spec}: dropout={value} must be at least 0 and below 1")
            if key != "dropout" and args[key] < 1:
                raise ValueError(f"--model {spec}: {key}={value} must be at least 1")
        defaults = inspect.signature(gpt_workload).parameters
        hidden = args.get("hidden", defaults["hidden"].default)
        heads = args.get("heads", defaults["heads"].default)
        if hidden % heads:
            raise ValueError(f"--model {spec}: hidden={hidden} is not a multiple of heads={heads}")
        return gpt_workload(**args)
    raise ValueError(f"--model {spec}: expected torchvision:NAME or gpt:KEY=VALUE,...")


__all__ = ["Workload", "GPT", "gpt_workload", "torchvision_workload", "parse_model"]
