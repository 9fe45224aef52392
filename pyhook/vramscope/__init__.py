"""vramscope: the training-side hook of the vramscope GPU-memory monitor.

``vramscope.watch(model, optimizer)`` marks the phases of each training step
(zero_grad, forward, loss, backward, step), reads the CUDA caching allocator
at each phase edge and in the background, accounts weights, gradients,
optimizer state and saved activations, and streams it all to the monitor over
a Unix socket (docs/protocol.md). Standard library only; it never blocks,
slows down or raises into the training loop.
"""

from ._api import Handle, census, mark, phase, watch
from ._config import default_socket_path
from ._version import __version__

__all__ = ["Handle", "census", "default_socket_path", "mark", "phase", "watch", "__version__"]
