"""`python -m gswap` is the `gswap` command."""
import sys

from .cli import main

sys.exit(main())
