"""Kernel durations from FLOPs and bytes: max(FLOPs / usable peak, bytes / usable bandwidth, floor).

FLOPs come from PyTorch's own formulas (torch.utils.flop_counter, which FlopCounterMode uses) for
the ops that do matrix work: matmuls, convolutions and fused attention, forward and backward.
Every other op is memory-bound and costs the bytes of its operands. The precision is the one the
op runs in: bf16/fp16 on tensor cores; fp32 matmuls on TF32 tensor cores only where PyTorch allows
TF32 (torch.backends.cuda.matmul.allow_tf32, off by default; cuDNN convolutions, on by default),
otherwise on the fp32 CUDA cores.
"""

from __future__ import annotations

import logging

import torch

from .gpus import GPU

# flop_counter warns once at import when triton is missing; triton kernels are not modelled here.
logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)
from torch.utils.flop_counter import flop_registry  # noqa: E402

_CONV = {"convolution", "_convolution", "cudnn_convolution", "convolution_overrideable",
         "_slow_conv2d_forward", "convolution_backward"}
_HALF = (torch.bfloat16, torch.float16)


def _tensor_bytes(t: torch.Tensor) -> int:
    n = t.numel() * t.element_size()
    try:  # an expanded tensor reads its storage, not every broadcast element
        return min(n, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return n


class CostModel:
    def __init__(self, gpu: GPU):
        self.gpu = gpu

    def matmul_tflops(self, op_name: str, dtype: torch.dtype) -> float:
        g = self.gpu
        if dtype in _HALF:
            return g.bf16_tflops
        if dtype == torch.float32:
            if op_name in _CONV:
                tf32 = torch.backends.cudnn.allow_tf32
            elif "attention" in op_name:
                tf32 = False  # fp32 fused attention runs on CUDA cores
            else:
                tf32 = torch.backends.cuda.matmul.allow_tf32
            return g.tf32_tflops if tf32 else g.fp32_tflops
        return g.fp32_tflops

    def flops(self, func, args, kwargs, out) -> float:
        fn = flop_registry.get(func._overloadpacket)
        if fn is None:
            return 0.0
        try:
            return float(fn(*args, **kwargs, out_val=out))
        except Exception:  # a formula that does not cover an unusual call: count its bytes only
            return 0.0

    def duration_us(self, func, args, kwargs, out, inputs: list[torch.Tensor],
                    outputs: list[torch.Tensor]) -> float:
        g = self.gpu
        seen: set[int] = set()
        moved = 0
        for t in inputs + outputs:
            if id(t) not in seen:
                seen.add(id(t))
                moved += _tensor_bytes(t)
        memory_us = moved / (g.hbm_tbps * 1e12 * g.memory_efficiency) * 1e6
        compute_us = 0.0
        flops = self.flops(func, args, kwargs, out)
        if flops > 0:
            dtype = next((t.dtype for t in inputs if t.is_floating_point()), torch.float32)
            peak = self.matmul_tflops(func._overloadpacket.__name__, dtype)
            compute_us = flops / (peak * 1e12 * g.matmul_efficiency) * 1e6
        return max(compute_us, memory_us, g.min_kernel_us)
