"""`pip install .` in a fresh virtual environment gives a `gswap` command whose `run` trains the
reference workload on the simulated GPU under a budget, with the same weights as without gswap."""

import os
import subprocess
import sys
import venv

import pytest

from conftest import BUILD, SOURCE


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    env_dir = tmp_path_factory.mktemp("fresh-venv")
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("GSWAP_JOBS", "2"))
    env.pop("PYTHONPATH", None)
    # A build directory beside the project's build makes a second install incremental.
    p = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                        "-C", f"build-dir={BUILD / 'python-wheel'}", str(SOURCE)],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return env_dir


def _minitrain(args, env):
    p = subprocess.run(args, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    fields = dict(l.split(": ", 1) for l in p.stdout.splitlines() if ": " in l)
    return fields, p.stderr


def test_pip_install_gives_a_working_gswap_run(installed):
    gswap = installed / "bin" / "gswap"
    assert gswap.exists()
    site = next((installed / "lib").glob("python3*/site-packages/gswap"))
    for part in ("bin/gswapctl", "bin/gswapd", "lib/libgswap.so"):
        assert (site / part).exists(), part
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD")}
    env.update(LD_LIBRARY_PATH=str(BUILD / "tests" / "simcuda"), SIMCUDA_CAPACITY="1GiB",
               GSWAP_DAEMON="off")
    minitrain = [str(BUILD / "tests" / "workloads" / "minitrain"), "--layers", "6", "--width",
                 "256", "--batch", "8192", "--iters", "2"]
    plain, _ = _minitrain(minitrain, env)
    budget = int(plain["peak_bytes"]) * 3 // 4  # swaps, and leaves room for every launch
    under, err = _minitrain([str(gswap), "run", "--budget", str(budget), "--", *minitrain], env)
    assert under["checksum"] == plain["checksum"]
    summary = [l for l in err.splitlines() if l.startswith("gswap summary:")]
    assert len(summary) == 1 and "swapped_out=0 " not in summary[0]
    assert "gswapctl: one allocation per tensor:" in err


def test_installed_package_imports_as_a_no_op(installed):
    p = subprocess.run([str(installed / "bin" / "python"), "-c",
                        "import gswap; print(gswap.enabled(), gswap.mark_iteration())"],
                       capture_output=True, text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "False"]


def test_installed_gswap_run_sets_the_framework_allocators(installed):
    """The installed command runs its bundled gswapctl, with the same framework settings."""
    import json
    wanted = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync",
              "XLA_PYTHON_CLIENT_ALLOCATOR": "platform", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
              "TF_GPU_ALLOCATOR": "cuda_malloc_async"}
    env = {k: v for k, v in os.environ.items()
           if k not in wanted and k not in ("PYTHONPATH", "LD_PRELOAD", "PYTORCH_ALLOC_CONF")}
    env.update(LD_LIBRARY_PATH=str(BUILD / "tests" / "simcuda"), GSWAP_DAEMON="off",
               GSWAP_SUMMARY="0", TF_GPU_ALLOCATOR="cuda_malloc")
    code = "import os, json; print(json.dumps({k: os.environ.get(k) for k in %r}))" % sorted(wanted)
    p = subprocess.run([str(installed / "bin" / "gswap"), "run", "--", sys.executable, "-c", code],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {**wanted, "TF_GPU_ALLOCATOR": "cuda_malloc"}
    assert "kept as set: TF_GPU_ALLOCATOR" in p.stderr
