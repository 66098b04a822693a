"""`import gswap` outside gswap is a no-op, and under `gswapctl run` it finds libgswap.so's C API."""

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
