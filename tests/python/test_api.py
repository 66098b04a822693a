"""`import gswap` outside gswap is a no-op, and under `gswapctl run` it finds libgswap.so's C API;
its arguments are checked the same way in both; `gswap whatif` without PyTorch is one line."""

import os
import subprocess
import sys

from conftest import SOURCE, run_python


def test_import_without_the_library_is_a_no_op():
    p = run_python(
        "import gswap\n"
        "assert not gswap.enabled()\n"
        "assert 'not loaded' in gswap.why_disabled()\n"
        "assert gswap.api_version() is None\n"
        "assert gswap.mark_iteration() is False\n"
        "assert gswap.name_allocation(0x7f0000000000, 'weights') is False\n"
        "class Module:\n"
        "    def named_parameters(self, prefix=''): return iter(())\n"
        "    def named_buffers(self, prefix=''): return iter(())\n"
        "assert gswap.name_parameters(Module()) == 0\n"
        "print('no-op')\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "no-op"
    assert p.stderr == ""  # never an error, never a warning


def test_name_allocation_rejects_what_is_not_a_pointer():
    p = run_python("import gswap\n"
                   "try:\n    gswap.name_allocation('0x10', 'x')\n"
                   "except TypeError as e:\n    print('TypeError', e)\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("TypeError expected a device pointer")


def _exports(lib) -> set:
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True)
    return {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}


def test_under_gswap_the_binding_follows_the_library(build_dir):
    """Under gswapctl run the binding finds the C API when libgswap.so exports it (and then checks
    the version first), and stays a no-op when the library predates it."""
    lib = build_dir / "interpose" / "libgswap.so"
    exported = _exports(lib)
    env = dict(os.environ, GSWAP_DAEMON="off", GSWAP_SUMMARY="0",
               LD_LIBRARY_PATH=str(build_dir / "tests" / "simcuda"),
               PYTHONPATH=str(SOURCE / "python"))
    code = ("import gswap\n"
            "print(gswap.enabled(), gswap.api_version(), gswap.mark_iteration())\n")
    p = subprocess.run([str(build_dir / "bin" / "gswapctl"), "run", "--", sys.executable, "-c",
                        code], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    if "gswap_check_version" in exported:
        enabled, version, _ = p.stdout.split()
        assert enabled == "True" and int(version) >= 1
    else:
        assert p.stdout.split() == ["False", "None", "False"]


# Each call with its arguments, as a script evaluates them with and without gswap (PTR: a device
# allocation under gswap, a made-up address outside).
ARGUMENT_CASES = """
class Tensor:  # shaped like a torch.Tensor
    def __init__(self, ptr): self.ptr = ptr
    def data_ptr(self): return self.ptr
class Module:
    def named_parameters(self, prefix=''): return iter(())
    def named_buffers(self, prefix=''): return iter(())
cases = [
    ("pointer", lambda: gswap.name_allocation(PTR, "weights")),
    ("tensor", lambda: gswap.name_allocation(Tensor(PTR), "weights")),
    ("inside", lambda: gswap.name_allocation(PTR + 100, "weights")),
    ("long name", lambda: gswap.name_allocation(PTR, "n" * 10**6)),
    ("null", lambda: gswap.name_allocation(0, "x")),
    ("negative", lambda: gswap.name_allocation(-1, "x")),
    ("2**64", lambda: gswap.name_allocation(2**64, "x")),
    ("2**64 + PTR", lambda: gswap.name_allocation(2**64 + PTR, "wrapped")),
    ("tensor 2**64", lambda: gswap.name_allocation(Tensor(2**64 + PTR), "x")),
    ("bool", lambda: gswap.name_allocation(True, "x")),
    ("float", lambda: gswap.name_allocation(1.5, "x")),
    ("str pointer", lambda: gswap.name_allocation("0x10", "x")),
    ("tensor float", lambda: gswap.name_allocation(Tensor(1.5), "x")),
    ("None name", lambda: gswap.name_allocation(PTR, None)),
    ("bytes name", lambda: gswap.name_allocation(PTR, b"x")),
    ("int name", lambda: gswap.name_allocation(PTR, 5)),
    ("NUL in name", lambda: gswap.name_allocation(PTR, "a\\0b")),
    ("surrogate", lambda: gswap.name_allocation(PTR, "\\udcff")),
    ("module", lambda: gswap.name_parameters(Module())),
    ("None module", lambda: gswap.name_parameters(None)),
    ("object module", lambda: gswap.name_parameters(object())),
    ("bad prefix", lambda: gswap.name_parameters(Module(), prefix=3)),
    ("module class", lambda: gswap.name_parameters(Module)),
]
for label, call in cases:
    try:
        print(f"{label}: {call()!r}")
    except Exception as e:
        print(f"{label}: {type(e).__name__}")
"""

ALLOCATE = """
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
marked_before_init = gswap.mark_iteration()
assert cuda.cuInit(0) == 0
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_ulonglong()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), 4 << 20) == 0
PTR = ptr.value
print(f"mark before cuInit: {marked_before_init!r}")
print(f"mark after cuInit: {gswap.mark_iteration()!r}")
"""

# What each call gives: the same exceptions with and without gswap; under gswap, True for the
# allocation (named by a pointer into it too) and False for no allocation.
EXPECTED = {
    "pointer": "True", "tensor": "True", "inside": "True", "long name": "True", "null": "False",
    "negative": "ValueError", "2**64": "ValueError", "2**64 + PTR": "ValueError",
    "tensor 2**64": "ValueError", "bool": "TypeError", "float": "TypeError",
    "str pointer": "TypeError", "tensor float": "TypeError", "None name": "TypeError",
    "bytes name": "TypeError", "int name": "TypeError", "NUL in name": "ValueError",
    "surrogate": "ValueError", "module": "0", "None module": "TypeError",
    "object module": "TypeError", "bad prefix": "TypeError", "module class": "TypeError",
}


def _outcomes(stdout: str) -> dict:
    return dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)


def test_arguments_are_checked_the_same_with_and_without_gswap(build_dir):
    outside = run_python("import gswap\nPTR = 0x7f0000000000\n" + ARGUMENT_CASES)
    assert outside.returncode == 0, outside.stderr
    env = dict(os.environ, GSWAP_DAEMON="off", GSWAP_SUMMARY="0",
               LD_LIBRARY_PATH=str(build_dir / "tests" / "simcuda"),
               PYTHONPATH=str(SOURCE / "python"))
    under = subprocess.run([str(build_dir / "bin" / "gswapctl"), "run", "--", sys.executable, "-c",
                            "import gswap\nassert gswap.enabled(), gswap.why_disabled()\n" +
                            ALLOCATE + ARGUMENT_CASES],
                           env=env, capture_output=True, text=True)
    assert under.returncode == 0, under.stderr
    got_outside, got_under = _outcomes(outside.stdout), _outcomes(under.stdout)
    # gswap.h: a mark before cuInit is not taken (GSWAP_ERROR_NOT_READY), as the docstring says.
    assert got_under.pop("mark before cuInit") == "False"
    assert got_under.pop("mark after cuInit") == "True"
    assert got_under == EXPECTED
    assert got_outside == {k: ("False" if v == "True" else v) for k, v in EXPECTED.items()}


def test_a_long_name_is_cut_between_characters():
    import gswap
    assert gswap._name_bytes("x" * 62 + "\u00e9") == b"x" * 62
    assert gswap._name_bytes("x" * 61 + "\u00e9") == b"x" * 61 + "\u00e9".encode()
    assert gswap._name_bytes("caf\u00e9") == "caf\u00e9".encode()


def test_whatif_without_torch_is_one_line_and_exit_status_1():
    # PyTorch made unimportable, as where the `whatif` extra is not installed.
    p = run_python("import runpy, sys\n"
                   "sys.modules['torch'] = None\n"
                   "sys.argv = ['gswap', 'whatif', '--model', 'gpt:layers=1', '--batch', '1']\n"
                   "runpy.run_module('gswap', run_name='__main__')\n")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gswap whatif: needs PyTorch"), p.stderr
    assert "pip install 'gswap[whatif]'" in lines[0]
