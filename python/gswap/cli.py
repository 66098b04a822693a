"""The `gswap` command.

  gswap run [--budget B] [--config F] -- CMD...   run CMD under gswap (gswapctl run)
  gswap whatif --model M --batch N --gpu G ...    predict step time under memory budgets
  gswap status | policy | trace | config | simulate ...   the gswapctl commands of the same name
"""

from __future__ import annotations

import os
import sys

from . import _paths

# Commands that are gswapctl's: `gswap X ...` is exactly `gswapctl X ...`.
GSWAPCTL_COMMANDS = ("run", "status", "policy", "trace", "config", "simulate")

USAGE = """usage: gswap COMMAND ...

  run [--budget B] [--config F] -- CMD...   run CMD under gswap; sets the framework allocators
                                            up for one allocation per tensor
  whatif --model M --batch N --gpu G        record one training iteration on the meta device and
                                            predict its step time under memory budgets (no GPU)
  status | policy | trace | config | simulate
                                            as gswapctl (`gswap COMMAND --help`)
"""


def _exec_gswapctl(argv: list[str]) -> None:
    ctl = _paths.gswapctl()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(ctl, [ctl, *argv])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from . import __version__
        print(f"gswap {__version__}")
        return 0
    command = argv[0]
    if command in GSWAPCTL_COMMANDS:
        try:
            _exec_gswapctl(argv)
        except FileNotFoundError as e:
            print(f"gswap: {e}", file=sys.stderr)
            return 1
    if command == "whatif":
        # gswap.whatif records models with PyTorch, an optional dependency (the `whatif` extra).
        try:
            from .whatif.cli import main as whatif_main
            return whatif_main(argv[1:])
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in ("torch", "torchvision"):
                raise
            print(f"gswap whatif: needs PyTorch and torchvision ({e}): "
                  "pip install 'gswap[whatif]'", file=sys.stderr)
            return 1
    print(f"gswap: unknown command '{command}'\n\n{USAGE}", file=sys.stderr, end="")
    return 2


if __name__ == "__main__":
    sys.exit(main())
