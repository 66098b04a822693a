"""The C API of libgswap.so (include/gswap.h) through ctypes.

Nothing links against libgswap: under gswap the library is already in the process (LD_PRELOAD),
so its functions are found with dlsym(RTLD_DEFAULT), which is what ctypes.CDLL(None) does. Outside
gswap the lookup finds nothing and every call is a no-op.

To bind a function added to gswap.h, add one line to _FUNCTIONS with the API version that
introduced it; a library older than that version leaves it unbound, and its wrapper is a no-op.
"""

from __future__ import annotations

import ctypes
import threading
import warnings
from typing import Callable, NamedTuple, Optional

# Mirrors include/gswap.h.
GSWAP_API_VERSION = 1
GSWAP_OK = 0
GSWAP_ERROR_VERSION = -1
GSWAP_ERROR_INVALID = -2
GSWAP_ERROR_NOT_READY = -3
GSWAP_ERROR_UNSUPPORTED = -4
GSWAP_ERROR_DEVICE = -5

ERROR_NAMES = {
    GSWAP_ERROR_VERSION: "GSWAP_ERROR_VERSION",
    GSWAP_ERROR_INVALID: "GSWAP_ERROR_INVALID",
    GSWAP_ERROR_NOT_READY: "GSWAP_ERROR_NOT_READY",
    GSWAP_ERROR_UNSUPPORTED: "GSWAP_ERROR_UNSUPPORTED",
    GSWAP_ERROR_DEVICE: "GSWAP_ERROR_DEVICE",
}


class _Signature(NamedTuple):
    argtypes: tuple
    restype: object
    since: int  # the GSWAP_API_VERSION that introduced the function


_FUNCTIONS: dict[str, _Signature] = {
    "gswap_api_version": _Signature((), ctypes.c_int, 1),
    "gswap_check_version": _Signature((ctypes.c_int,), ctypes.c_int, 1),
    "gswap_mark_iteration": _Signature((), ctypes.c_int, 1),
    "gswap_name_allocation": _Signature((ctypes.c_ulonglong, ctypes.c_char_p), ctypes.c_int, 1),
}


class _Binding:
    """The bound functions, looked up once, on first use."""

    def __init__(self) -> None:
        self.functions: dict[str, Callable[..., int]] = {}
        self.library_version: Optional[int] = None
        self.reason = ""


_lock = threading.Lock()
_binding: Optional[_Binding] = None


def _lookup(process: ctypes.CDLL, name: str) -> Optional[Callable[..., int]]:
    try:
        fn = getattr(process, name)
    except AttributeError:
        return None
    sig = _FUNCTIONS[name]
    fn.argtypes = sig.argtypes
    fn.restype = sig.restype
    return fn


def _bind() -> _Binding:
    b = _Binding()
    process = ctypes.CDLL(None)
    check = _lookup(process, "gswap_check_version")
    version = _lookup(process, "gswap_api_version")
    if check is None or version is None:
        b.reason = "libgswap.so is not loaded in this process (run the program with `gswap run`)"
        return b
    b.library_version = int(version())
    # gswap.h: check the version first; on a mismatch the other functions must not be used.
    if check(GSWAP_API_VERSION) != GSWAP_OK:
        b.reason = (f"the loaded libgswap.so serves API version {b.library_version}, "
                    f"which cannot serve this package's version {GSWAP_API_VERSION}")
        warnings.warn(f"gswap: {b.reason}; gswap calls are ignored", RuntimeWarning, stacklevel=3)
        return b
    for name, sig in _FUNCTIONS.items():
        if sig.since <= b.library_version:
            fn = _lookup(process, name)
            if fn is not None:
                b.functions[name] = fn
    return b


def binding() -> _Binding:
    global _binding
    if _binding is None:
        with _lock:
            if _binding is None:
                _binding = _bind()
    return _binding


def call(name: str, *args) -> Optional[int]:
    """Calls a bound function; None when it is not bound (outside gswap, or an older library)."""
    fn = binding().functions.get(name)
    if fn is None:
        return None
    return int(fn(*args))
