"""``python -m vramscope ARGS``: the same as the ``vramscope`` command."""

import sys

from ._cli import main

sys.exit(main())
