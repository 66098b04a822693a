"""Shared set-up of the Python package tests (tests/python/CMakeLists.txt runs them with pytest in
the environment scripts/setup-python.sh makes). The build tree's tools come from these variables:

  GSWAP_BUILD_DIR   the CMake build directory (bin/gswapctl, interpose/libgswap.so, simcuda)
  GSWAP_SOURCE_DIR  the checkout (the package sources in python/, pyproject.toml)
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("GSWAP_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("GSWAP_BUILD_DIR", SOURCE / "build"))
sys.path.insert(0, str(SOURCE / "python"))
# Commands the tests start (python -m gswap) import the same sources.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(SOURCE / "python"), os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    ctl = BUILD / "bin" / "gswapctl"
    if not ctl.exists():
        pytest.fail(f"{ctl} is missing: build the project first (scripts/build.sh)")
    return BUILD


@pytest.fixture
def tool_env(build_dir, monkeypatch):
    """The package's gswapctl lookup finds the build tree's gswapctl on PATH."""
    monkeypatch.setenv("PATH", f"{build_dir / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return build_dir


def run_python(code: str, env=None, **kw) -> subprocess.CompletedProcess:
    """Runs code in a fresh interpreter with the package sources importable."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE / "python"), e.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, **kw)
