"""Records one training iteration of any nn.Module as a gswap-trace (policy/README.md).

    trace = record(model, make_batch, loss_fn, batch_size=64, gpu="h100")
    trace.save("resnet50.json")       # for `gswapctl simulate --trace resnet50.json`

The iteration is zero_grad, forward, loss, backward and the optimizer step, run twice: the first
creates the optimizer's state (as any real first step does) and counts the launches for the
progress bar; the second, in its steady state, is the one recorded.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import torch

from .costmodel import CostModel
from .gpus import GPU, parse_gpu
from .recorder import CallTracker, Recorder, Recording, annotate_inplace, annotate_recompute

Batch = tuple[Any, Any]  # (model inputs, loss target)


def _call(model: torch.nn.Module, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def default_optimizer(params) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=1e-4)


class _GpuKernelChoices:
    """Kernels chosen as on a GPU, for the thread that records only.

    Optimizers default to their foreach kernels on a GPU but to a loop of per-tensor ops on other
    devices: on the recording device, they choose as on a GPU. scaled_dot_product_attention on a
    GPU runs one fused kernel (flash attention for bf16/fp16 without a mask, memory-efficient
    attention otherwise) that keeps only the output and the log-sum-exp for backward; on the meta
    device PyTorch would take the unfused math path, which materialises the attention matrix: it
    is routed to the fused kernel a GPU would pick. The module attributes are replaced (not
    intercepted with a torch-function mode), so that calls from inside torch.nn.functional
    (multi_head_attention_forward) are routed too.

    The replacements are installed once while any thread records, and act only in threads that
    record: another thread's attention on the CPU runs PyTorch's own path, and recordings in
    several threads at once neither see each other's choices nor leave a replacement behind."""

    _lock = threading.Lock()
    _users = 0
    _originals: dict = {}
    _local = threading.local()  # .device_type: the recording device of this thread, if any

    @classmethod
    @contextlib.contextmanager
    def on(cls, device_type: str):
        import torch.nn.functional as F
        import torch.optim.optimizer as optim_mod
        with cls._lock:
            if cls._users == 0:
                cls._originals = {"sdpa": F.scaled_dot_product_attention,
                                  "foreach": optim_mod._get_foreach_kernels_supported_devices}
                F.scaled_dot_product_attention = cls._routed_attention
                optim_mod._get_foreach_kernels_supported_devices = cls._foreach_devices
            cls._users += 1
        outer = getattr(cls._local, "device_type", None)
        cls._local.device_type = device_type
        try:
            yield
        finally:
            cls._local.device_type = outer
            with cls._lock:
                cls._users -= 1
                if cls._users == 0:
                    # Put back what was there, unless something else replaced ours meanwhile.
                    if F.scaled_dot_product_attention is cls._routed_attention:
                        F.scaled_dot_product_attention = cls._originals["sdpa"]
                    if optim_mod._get_foreach_kernels_supported_devices is cls._foreach_devices:
                        optim_mod._get_foreach_kernels_supported_devices = cls._originals["foreach"]

    @classmethod
    def _recording_here(cls) -> Optional[str]:
        return getattr(cls._local, "device_type", None)

    @staticmethod
    def _routed_attention(*args, **kwargs):
        self = _GpuKernelChoices
        if self._recording_here() is not None:
            out = _GpuAttention._fused(*args, **kwargs)
            if out is not None:
                return out
        return self._originals["sdpa"](*args, **kwargs)

    @staticmethod
    def _foreach_devices():
        self = _GpuKernelChoices
        devices = self._originals["foreach"]()
        here = self._recording_here()
        return [*devices, here] if here is not None else devices


class _GpuAttention:

    @staticmethod
    def _fused(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
               enable_gqa=False):
        if enable_gqa or query.dim() != 4 or query.shape[-1] > 256 or query.shape[-1] % 8:
            return None  # cases the fused kernels do not take: PyTorch's own path
        if query.device.type == "cpu":
            return None  # the GPU kernels have no CPU form; PyTorch's CPU path is fused too
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
        if attn_mask is None and query.dtype in (torch.bfloat16, torch.float16):
            return torch.ops.aten._scaled_dot_product_flash_attention(
                query, key, value, dropout_p, is_causal, False, scale=scale)[0]
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:  # as SDPA converts a boolean mask
                attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill_(
                    attn_mask.logical_not(), float("-inf"))
            attn_mask = attn_mask.expand(query.shape[0], query.shape[1], query.shape[2],
                                         key.shape[2])
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, attn_mask, grad, dropout_p, is_causal, scale=scale)[0]


@dataclass
class Trace:
    """A recorded iteration and the GPU it was costed for."""

    recording: Recording
    gpu: GPU
    info: dict = field(default_factory=dict)

    @property
    def launches(self) -> int:
        return len(self.recording.launches)

    @property
    def step_time_us(self) -> float:
        """The iteration's time with unlimited memory (one stream: the sum of kernel times)."""
        return sum(l.dur_us for l in self.recording.launches)

    def live_bytes(self) -> list[int]:
        """Live bytes at each launch, by the rules of policy/analysis.cpp."""
        n = self.launches
        diff = [0] * (n + 1)
        for r in self.recording.regions:
            if r.folded:
                continue
            first = r.alloc_seq
            last = (r.free_seq if r.free_seq is not None else n) - 1
            if r.last_access >= 0:  # allocated at least while it is used
                last = max(last, r.last_access)
            if n == 0 or first >= n or last < first:
                continue
            diff[first] += r.bytes
            diff[last + 1] -= r.bytes
        out, cur = [], 0
        for i in range(n):
            cur += diff[i]
            out.append(cur)
        return out

    @property
    def peak_bytes(self) -> int:
        return max(self.live_bytes(), default=0)

    def to_json(self) -> dict:
        regions = []
        for r in self.recording.regions:
            if r.folded:
                continue
            j = {"id": r.id, "bytes": r.bytes, "alloc_seq": r.alloc_seq, "free_seq": r.free_seq}
            if r.recompute is not None:
                j["recompute"] = r.recompute
            regions.append(j)
        launches, t = [], 0.0
        for l in self.recording.launches:
            launches.append({"seq": l.seq, "start_us": round(t, 3), "dur_us": round(l.dur_us, 3),
                             "stream": 0, "regions": l.regions, "kernel": l.kernel})
            t += l.dur_us
        bw = self.gpu.link_gbps * 1e9
        doc = {"format": "gswap-trace", "version": 1,
               "device": {"capacity_bytes": self.gpu.memory_bytes, "h2d_bytes_per_s": bw,
                          "d2h_bytes_per_s": bw},
               "regions": regions, "launches": launches}
        if launches:
            doc["iterations"] = [{"first_seq": 0, "last_seq": len(launches) - 1}]
        doc["recorded_by"] = {"tool": "gswap whatif", **self.info}  # readers ignore unknown fields
        return doc

    def save(self, path: str) -> None:
        # A time that is not finite is no JSON number: refused (ValueError), never written as
        # Infinity, which gswapctl could not read.
        text = json.dumps(self.to_json(), separators=(",", ":"), allow_nan=False)
        with open(path, "w") as f:
            f.write(text)


def _prepare_model(model, device: torch.device, dtype: Optional[torch.dtype]) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        with device:
            model = model()
    else:
        # Never change the caller's module (it may hold real weights): the recorded steps update
        # weights, gradients and optimizer state, and cast and switch to training mode; all of
        # that happens to a copy.
        model = copy.deepcopy(model).to(device)
    if dtype is not None:
        model = model.to(dtype)
    return model.train()


class TrainingStep:
    """One training iteration (zero_grad, forward, loss, backward, optimizer step) of a model on a
    device; `phase(name)` is told where each part starts."""

    def __init__(self, model, make_batch, loss_fn, optimizer=default_optimizer, *,
                 batch_size: int, device: Union[str, torch.device] = "meta",
                 dtype: Optional[torch.dtype] = None):
        self.device = torch.device(device)
        self.net = _prepare_model(model, self.device, dtype)
        self.opt = optimizer(self.net.parameters())
        self.make_batch, self.loss_fn, self.batch_size = make_batch, loss_fn, batch_size

    def __call__(self, phase: Callable[[str], None] = lambda name: None) -> None:
        phase("other")
        self.opt.zero_grad(set_to_none=True)
        inputs, target = self.make_batch(self.batch_size, self.device)
        phase("forward")
        out = _call(self.net, inputs)
        loss = self.loss_fn(out, target)
        del out, inputs, target
        phase("backward")
        loss.backward()
        del loss
        phase("optimizer")
        self.opt.step()
        phase("other")


def _steady_launches(warmup: Recorder) -> int:
    """Launches of a steady-state iteration, from the first one: less the optimizer's one-time
    state initialisation (launches that only created state still alive at the end)."""
    once = 0
    for l in warmup.launches:
        if l.phase != "optimizer":
            continue
        made = [r for r in warmup.regions if r.producer == l.seq]
        if made and all(r.free_seq is None for r in made):
            once += 1
    return len(warmup.launches) - once


def record(model: Union[torch.nn.Module, Callable[[], torch.nn.Module]],
           make_batch: Callable[[int, torch.device], Batch],
           loss_fn: Callable[[Any, Any], torch.Tensor],
           optimizer: Callable[[Any], torch.optim.Optimizer] = default_optimizer,
           *, batch_size: int, gpu: Union[str, GPU] = "h100", device: Union[str, torch.device] = "meta",
           dtype: Optional[torch.dtype] = None, gpu_kernels: Optional[bool] = None,
           progress: bool = True, description: str = "recording") -> Trace:
    """Records one steady-state training iteration as a gswap-trace.

    model: an nn.Module, or a function building one (called under the recording device, so a
        model built on the meta device never holds real weights). A module is copied: the steps
        recorded (weights, gradients, optimizer state, dtype, training mode) never touch it.
    make_batch(batch_size, device) -> (inputs, target): inputs are passed to the model (a tuple
        as positional arguments, a dict as keyword arguments), target to loss_fn.
    loss_fn(output, target) -> a scalar tensor.
    optimizer(params) -> a torch.optim.Optimizer (default AdamW).
    device: "meta" (default: no memory, no computation, any size) or "cpu".
    dtype: cast the model to this dtype (torch.bfloat16); the inputs are make_batch's.
    gpu_kernels: choose kernels as on a GPU where PyTorch would choose differently on `device`
        (fused attention, foreach optimizers); default: on for meta, off otherwise.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: a whole number at least 1, not {batch_size!r}")
    if not isinstance(gpu, (str, GPU)):
        raise TypeError(f"gpu: a name such as 'h100' or a gswap.whatif.GPU, not {gpu!r}")
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype: a torch.dtype such as torch.bfloat16, or None, not {dtype!r}")
    gpu = parse_gpu(gpu) if isinstance(gpu, str) else gpu
    device = torch.device(device)
    if gpu_kernels is None:
        gpu_kernels = device.type == "meta"
    emulation = _GpuKernelChoices.on(device.type) if gpu_kernels else contextlib.nullcontext()
    with emulation:
        step = TrainingStep(model, make_batch, loss_fn, optimizer, batch_size=batch_size,
                            device=device, dtype=dtype)
        warmup = Recorder()
        with CallTracker(warmup), warmup:
            step(lambda name: setattr(warmup, "phase", name))
        warmup.stop()
        bar = None
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=_steady_launches(warmup), desc=description, unit=" kernels",
                       leave=False, mininterval=0.2)
        rec = Recorder(CostModel(gpu), on_launch=bar.update if bar is not None else None)
        try:
            with CallTracker(rec), rec:
                step(lambda name: setattr(rec, "phase", name))
        finally:
            rec.stop()
            if bar is not None:
                bar.close()
    recording = rec.result()
    annotate_inplace(recording)
    annotate_recompute(recording)
    info = {"batch_size": batch_size, "device": str(device), "gpu": gpu.name,
            "torch": torch.__version__}
    return Trace(recording, gpu, info)
