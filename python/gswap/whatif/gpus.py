"""GPU presets for the what-if cost model: memory, peak throughput per precision, memory bandwidth
and the pinned host link that swaps travel over.

Figures are the vendors' dense (no sparsity) peaks for the SXM parts; the efficiencies say what a
real kernel reaches (the same model as policy/'s reference traces: 60% of the tensor-core peak for
large GEMMs and convolutions, 78% of HBM bandwidth for streaming kernels, 3 us for any kernel).
"""

from __future__ import annotations

import dataclasses
import fractions
import math
import re
from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int          # device memory
    bf16_tflops: float         # dense bf16/fp16 tensor-core peak
    tf32_tflops: float         # dense tf32 tensor-core peak (fp32 matmuls with TF32 allowed)
    fp32_tflops: float         # fp32 CUDA-core peak (fp32 matmuls without TF32)
    hbm_tbps: float            # device memory bandwidth, TB/s
    link_gbps: float           # pinned host<->device copy bandwidth per direction, GB/s
    matmul_efficiency: float = 0.6
    memory_efficiency: float = 0.78
    min_kernel_us: float = 3.0
    # Memory the CUDA context, cuBLAS/cuDNN workspaces and the allocator's own slack take before
    # any tensor: the default budget for batch searches is memory_bytes - reserved_bytes.
    reserved_bytes: int = 1 * GiB

    def describe(self) -> str:
        return (f"{self.name} ({self.memory_bytes / GiB:.0f} GiB, {self.bf16_tflops:g} bf16 / "
                f"{self.tf32_tflops:g} tf32 / {self.fp32_tflops:g} fp32 TFLOP/s, "
                f"{self.hbm_tbps:g} TB/s, host link {self.link_gbps:g} GB/s)")


PRESETS: dict[str, GPU] = {
    # H100 SXM5 80GB; the host link is PCIe Gen5 x16 (pinned copies reach about 50 GB/s).
    "h100": GPU("H100 SXM", 80 * GiB, 989.4, 494.7, 66.9, 3.35, 50.0),
    # H200 SXM 141GB (HBM3e); same compute as the H100.
    "h200": GPU("H200 SXM", 141 * 10**9, 989.4, 494.7, 66.9, 4.8, 50.0),
    # A100 SXM4 80GB; PCIe Gen4 x16 (about 25 GB/s pinned).
    "a100": GPU("A100 SXM", 80 * GiB, 312.0, 156.0, 19.5, 2.039, 25.0),
}

_FIELDS = {f.name: f for f in dataclasses.fields(GPU)}
_REQUIRED = [f.name for f in dataclasses.fields(GPU)
             if f.default is dataclasses.MISSING and f.name != "name"]

# As gswapctl and gswapd read sizes (proto/settings.h): decimal units (KB, MB, ...) are powers of
# 1000, binary ones and the bare letters powers of 1024.
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 10**3, "m": 1 << 20, "mb": 10**6, "g": 1 << 30,
          "gb": 10**9, "t": 1 << 40, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}


_MAX_BYTES = (1 << 64) - 1  # as gswapctl reads sizes: what does not fit in 64 bits is refused


def parse_size(text: str) -> int:
    """Bytes from '80GiB', '141GB', '512MiB' or a plain number (whole bytes, rounded down, at most
    2^64 - 1, as gswapctl reads sizes)."""
    if not isinstance(text, str):
        raise TypeError(f"a size is a string such as '24GiB', not {type(text).__name__}")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"'{text}' is not a size (bytes with a unit such as 24GiB or 80GB)")
    # Exact arithmetic: a float loses whole bytes above 2^53 and overflows on long numbers.
    size = math.floor(fractions.Fraction(m.group(1)) * _UNITS[m.group(2).lower()])
    if size > _MAX_BYTES:
        raise ValueError(f"'{text}' is not a size: more than 2^64 - 1 bytes")
    return size


def parse_gpu(spec: str) -> GPU:
    """A preset name (h100, h200, a100), a preset with overrides (h100:link_gbps=25), or a custom GPU
    with every figure given:
    custom:memory_bytes=24GiB,bf16_tflops=165,tf32_tflops=82.6,fp32_tflops=82.6,hbm_tbps=1.0,link_gbps=25
    """
    name, _, overrides = spec.partition(":")
    key = name.strip().lower()
    values: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in overrides.split(","))):
        field, eq, value = item.partition("=")
        field = {"memory": "memory_bytes", "reserved": "reserved_bytes"}.get(field, field)
        if not eq or field not in _FIELDS:
            raise ValueError(f"--gpu {spec}: '{item}' is not FIELD=VALUE with a field among "
                             f"{', '.join(sorted(_FIELDS))}")
        if field == "name":
            values[field] = value
        elif field.endswith("_bytes"):
            values[field] = parse_size(value)
        else:
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"--gpu {spec}: {field}={value} is not a number") from None
            # Rates and times: finite, at least 1e-6 and at most 1e15 (a rate of 0 divides by
            # zero, and one of 1e-320 makes times overflow to inf, which no trace may hold).
            if not math.isfinite(number) or number < 1e-6 or number > 1e15:
                raise ValueError(f"--gpu {spec}: {field}={value} must be a number above 0 "
                                 "(at least 1e-6 and at most 1e15)")
            values[field] = number
    if key == "custom":
        missing = [f for f in _REQUIRED if f not in values]
        if missing:
            raise ValueError(f"--gpu custom needs {', '.join(missing)}")
        values.setdefault("name", "custom GPU")
        gpu = GPU(**values)  # type: ignore[arg-type]
    elif key not in PRESETS:
        raise ValueError(f"unknown GPU '{name}' (known: {', '.join(PRESETS)}, custom:FIELD=VALUE,...)")
    else:
        gpu = PRESETS[key]
        if values:
            values.setdefault("name", gpu.name + " (modified)")
            gpu = dataclasses.replace(gpu, **values)  # type: ignore[arg-type]
    if gpu.memory_bytes <= gpu.reserved_bytes:
        raise ValueError(f"--gpu {spec}: the memory must be more than the reserve")
    return gpu
