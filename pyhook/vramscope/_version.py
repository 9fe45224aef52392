"""The release version: the one source for the hook and the monitor (docs/install.md).

The Go program embeds this file (pyhook/version.go) and the packaging reads
it (pyproject.toml), so ``vramscope.__version__``, the wheel's version and
``vramscope version`` cannot differ. Keep it one line of this exact shape.
"""

__version__ = "0.1.0"
