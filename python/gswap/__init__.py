"""gswap for Python programs.

Under gswap (`gswap run -- python train.py`), these functions reach libgswap.so's C API
(include/gswap.h): iteration marks and allocation names. Outside gswap every one of them is a
no-op that returns False, so a training script can call them unconditionally:

    import gswap
    for batch in loader:
        gswap.mark_iteration()
        ...

The what-if tools (recording a model's trace on the meta device and predicting its step time under
a memory budget) are in gswap.whatif and need PyTorch; importing gswap alone does not.
"""

from __future__ import annotations

from typing import Optional

from . import _api

__all__ = ["enabled", "why_disabled", "api_version", "mark_iteration", "name_allocation", "name_parameters",
           "GSWAP_API_VERSION"]

GSWAP_API_VERSION = _api.GSWAP_API_VERSION

try:
    from importlib.metadata import PackageNotFoundError, version as _dist_version

    try:
        __version__ = _dist_version("gswap")
    except PackageNotFoundError:  # running from a source checkout
        __version__ = "0+unknown"
except ImportError:  # pragma: no cover
    __version__ = "0+unknown"


def enabled() -> bool:
    """True when this process runs under a libgswap.so that serves this package's API version."""
    return bool(_api.binding().functions)


def why_disabled() -> str:
    """Why enabled() is False ("" when it is True)."""
    return _api.binding().reason


def api_version() -> Optional[int]:
    """The API version of the loaded libgswap.so, or None outside gswap."""
    return _api.binding().library_version


def mark_iteration() -> bool:
    """Marks an iteration boundary: the next kernel launch starts a training iteration.

    Optional (gswapd detects the iteration by itself); marks make it exact. Returns True when
    gswap took the mark, False outside gswap or before gswap manages any memory.
    """
    return _api.call("gswap_mark_iteration") == _api.GSWAP_OK


def _device_pointer(obj) -> int:
    if isinstance(obj, int):
        return obj
    data_ptr = getattr(obj, "data_ptr", None)  # a torch.Tensor, or anything shaped like one
    if callable(data_ptr):
        return int(data_ptr())
    raise TypeError(f"expected a device pointer (int) or a tensor, got {type(obj).__name__}")


def name_allocation(ptr_or_tensor, name: str) -> bool:
    """Names the device allocation containing a pointer (or a tensor's data).

    The name (at most 63 bytes are kept) appears in gswapd's traces, plan dumps and timelines.
    Returns True when gswap knows the allocation; False outside gswap, for memory gswap does not
    manage (a CPU tensor, an allocation below the swap threshold), or before gswap manages memory.
    """
    ptr = _device_pointer(ptr_or_tensor)
    if not _api.binding().functions:
        return False
    return _api.call("gswap_name_allocation", ptr, name.encode("utf-8")) == _api.GSWAP_OK


def name_parameters(module, prefix: str = "") -> int:
    """Names the allocation of every parameter and buffer of a torch.nn.Module by its qualified
    name (`layer1.0.conv1.weight`). Returns how many gswap took (0 outside gswap)."""
    if not enabled():
        return 0
    named = 0
    tensors = list(module.named_parameters(prefix=prefix)) + list(module.named_buffers(prefix=prefix))
    for qualified, tensor in tensors:
        if getattr(tensor, "is_cuda", False):
            named += name_allocation(tensor, qualified)
    return named
