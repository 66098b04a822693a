"""Where the native parts installed with the package are: gswapctl, gswapd and libgswap.so sit in
the package folder as bin/ and lib/, the layout gswapctl expects (it finds ../lib/libgswap.so, and
the library finds ../bin/gswapd)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def gswapctl() -> str:
    """The gswapctl installed with this package; else one on PATH (a source checkout)."""
    bundled = PACKAGE_DIR / "bin" / "gswapctl"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    found = shutil.which("gswapctl")
    if found:
        return found
    raise FileNotFoundError(
        f"gswapctl is not installed with this gswap package ({bundled} is missing) nor on PATH; "
        "install the package with `pip install .` from a gswap checkout")


def libgswap() -> str:
    """The libgswap.so installed with this package."""
    bundled = PACKAGE_DIR / "lib" / "libgswap.so"
    if bundled.is_file():
        return str(bundled)
    raise FileNotFoundError(f"libgswap.so is not installed with this gswap package ({bundled})")
