"""gswap for Python programs.

Under gswap (`gswap run -- python train.py`), these functions reach libgswap.so's C API
(include/gswap.h): iteration marks and allocation names. Outside gswap every one of them is a
no-op that returns False (0 for name_parameters), so a training script can call them
unconditionally. Their arguments are checked the same way with and without gswap: a call that
raises TypeError or ValueError under gswap raises it outside gswap too.

    import gswap
    for batch in loader:
        gswap.mark_iteration()
        ...

The what-if tools (recording a model's trace on the meta device and predicting its step time under
a memory budget) are in gswap.whatif and need PyTorch; importing gswap alone does not.
"""

from __future__ import annotations

import operator
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
    gswap took the mark; False outside gswap, and under gswap before CUDA is initialised in this
    process (gswap takes marks from the first cuInit on; in a forked child, from the child's own).
    """
    return _api.call("gswap_mark_iteration") == _api.GSWAP_OK


_MAX_NAME_BYTES = 63  # what gswap keeps of a name (include/gswap.h)


def _device_pointer(obj) -> int:
    """An int in [0, 2**64) from a pointer or a tensor; TypeError or ValueError otherwise."""
    if isinstance(obj, bool):
        raise TypeError("expected a device pointer (int) or a tensor, got bool")
    if isinstance(obj, int):
        ptr = obj
    elif callable(getattr(obj, "data_ptr", None)):  # a torch.Tensor, or anything shaped like one
        ptr = obj.data_ptr()
        if isinstance(ptr, bool) or not isinstance(ptr, int):
            raise TypeError(f"{type(obj).__name__}.data_ptr() returned {type(ptr).__name__}, "
                            "not an int")
    elif hasattr(type(obj), "__index__"):  # an integer type of another library (numpy.uint64)
        ptr = operator.index(obj)
    else:
        raise TypeError(f"expected a device pointer (int) or a tensor, got {type(obj).__name__}")
    if not 0 <= ptr < 1 << 64:
        raise ValueError(f"a device pointer is an unsigned 64-bit address, got {ptr:#x}")
    return ptr


def _name_bytes(name) -> bytes:
    """The UTF-8 bytes gswap keeps of a name: at most _MAX_NAME_BYTES, cut between characters."""
    if not isinstance(name, str):
        raise TypeError(f"a name is a str, got {type(name).__name__}")
    if "\0" in name:
        raise ValueError("a name cannot contain a NUL character ('\\0')")
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"a name must be encodable as UTF-8: {e.reason} at index {e.start}") from None
    if len(raw) > _MAX_NAME_BYTES:  # drop the character the cut would split, not half of it
        raw = raw[:_MAX_NAME_BYTES].decode("utf-8", "ignore").encode("utf-8")
    return raw


def name_allocation(ptr_or_tensor, name: str) -> bool:
    """Names the device allocation containing a pointer (or a tensor's data).

    ptr_or_tensor: an int in [0, 2**64) (not a bool), an object whose data_ptr() returns one (a
    torch.Tensor), or another integer type (numpy.uint64). name: a str without NUL characters that
    UTF-8 can encode (no lone surrogates); of a longer name the first 63 bytes of its UTF-8 are kept,
    cut before a character that does not fit. Anything else raises TypeError or ValueError, with or
    without gswap.

    The name appears in gswapd's traces, plan dumps and timelines. Returns True when gswap knows
    the allocation; False outside gswap, for memory gswap does not manage (a null pointer, a CPU
    tensor, an allocation below the swap threshold), and under gswap before CUDA is initialised.
    """
    ptr = _device_pointer(ptr_or_tensor)
    raw = _name_bytes(name)
    return _api.call("gswap_name_allocation", ptr, raw) == _api.GSWAP_OK


def name_parameters(module, prefix: str = "") -> int:
    """Names the allocation of every parameter and buffer of a torch.nn.Module by its qualified
    name (`layer1.0.conv1.weight`). Returns how many gswap took (0 outside gswap). TypeError for
    a module without named_parameters() and named_buffers(), or a prefix that is not a str."""
    for method in ("named_parameters", "named_buffers"):
        if not callable(getattr(module, method, None)):
            raise TypeError(f"expected a torch.nn.Module, got {type(module).__name__} "
                            f"(no {method}())")
    if isinstance(module, type):  # the class itself, whose methods need an instance
        raise TypeError(f"expected a torch.nn.Module instance, got the class {module.__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix is a str, got {type(prefix).__name__}")
    if not enabled():
        return 0
    named = 0
    tensors = list(module.named_parameters(prefix=prefix)) + list(module.named_buffers(prefix=prefix))
    for qualified, tensor in tensors:
        if getattr(tensor, "is_cuda", False):
            named += name_allocation(tensor, qualified)
    return named
