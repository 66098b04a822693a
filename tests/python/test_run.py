"""`gswapctl run` (and `gswap run`, which is the same command) sets the frameworks up for one
allocation per tensor, leaving alone what the user set."""

import os
import subprocess
import sys

import pytest

from conftest import SOURCE

FRAMEWORK = {
    "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync",
    "XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    "TF_GPU_ALLOCATOR": "cuda_malloc_async",
}
PRINT_ENV = "import os, json; print(json.dumps({k: os.environ.get(k) for k in %r}))" % (
    sorted(FRAMEWORK) + ["PYTORCH_ALLOC_CONF"],)


def _clean_env(build_dir, **extra):
    env = {k: v for k, v in os.environ.items() if k not in FRAMEWORK
           and k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING")}
    env.update(GSWAP_DAEMON="off", GSWAP_SUMMARY="0", PYTHONPATH=str(SOURCE / "python"),
               LD_LIBRARY_PATH=str(build_dir / "tests" / "simcuda"))
    env.update(extra)
    return env


def _run(cmd, env):
    import json
    p = subprocess.run(cmd + ["--", sys.executable, "-c", PRINT_ENV], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def test_gswapctl_run_sets_every_framework_allocator(build_dir):
    seen, err = _run([str(build_dir / "bin" / "gswapctl"), "run"], _clean_env(build_dir))
    for k, v in FRAMEWORK.items():
        assert seen[k] == v
    lines = [l for l in err.splitlines() if l.startswith("gswapctl: one allocation per tensor")]
    assert len(lines) == 1 and "kept as set" not in lines[0]


def test_gswapctl_run_leaves_a_variable_the_user_set(build_dir):
    env = _clean_env(build_dir, TF_GPU_ALLOCATOR="cuda_malloc",
                     PYTORCH_ALLOC_CONF="expandable_segments:False")
    seen, err = _run([str(build_dir / "bin" / "gswapctl"), "run"], env)
    assert seen["TF_GPU_ALLOCATOR"] == "cuda_malloc"
    # PYTORCH_ALLOC_CONF is PyTorch's newer name for the same setting: the user chose.
    assert seen["PYTORCH_ALLOC_CONF"] == "expandable_segments:False"
    assert seen["PYTORCH_CUDA_ALLOC_CONF"] is None
    assert seen["XLA_PYTHON_CLIENT_ALLOCATOR"] == "platform"
    assert seen["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert "kept as set: PYTORCH_CUDA_ALLOC_CONF, TF_GPU_ALLOCATOR" in err


@pytest.mark.parametrize("user_set", [
    {},
    {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"},
    {"PYTORCH_CUDA_ALLOC_CONF": "backend:native", "TF_GPU_ALLOCATOR": "cuda_malloc"},
    {"PYTORCH_ALLOC_CONF": "expandable_segments:False", "XLA_PYTHON_CLIENT_ALLOCATOR": "default"},
], ids=["none", "jax-preallocate", "torch-and-tf", "torch-new-name-and-jax"])
def test_gswap_run_sets_what_gswapctl_run_sets(tool_env, user_set):
    """The same framework settings, and the same line saying so, for every mix of values the user
    set (which both leave as they are)."""
    env = _clean_env(tool_env, **user_set)
    env["PATH"] = os.environ["PATH"]
    via_gswap, err_gswap = _run([sys.executable, "-m", "gswap", "run", "--budget", "64MiB"], env)
    via_ctl, err_ctl = _run([str(tool_env / "bin" / "gswapctl"), "run", "--budget", "64MiB"], env)
    assert via_gswap == via_ctl
    for k, v in user_set.items():
        assert via_gswap[k] == v
    for k, v in FRAMEWORK.items():
        if k not in user_set and not (k == "PYTORCH_CUDA_ALLOC_CONF"
                                      and "PYTORCH_ALLOC_CONF" in user_set):
            assert via_gswap[k] == v

    def said(err):
        return [l for l in err.splitlines() if l.startswith("gswapctl: one allocation per tensor")]

    assert len(said(err_gswap)) == 1 and said(err_gswap) == said(err_ctl)


def test_gswap_run_without_a_command_says_how(tool_env):
    env = _clean_env(tool_env)
    env["PATH"] = os.environ["PATH"]
    p = subprocess.run([sys.executable, "-m", "gswap", "run"], env=env, capture_output=True,
                       text=True)
    assert p.returncode == 1
    assert "no command given after --" in p.stderr
