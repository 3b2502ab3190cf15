"""DeepSeek V4 / V4.1 prompt-protocol codec.

Everything here is implemented in Rust (`recipe-rs/`) and exposed through the `_native`
extension module; this package only re-exports it.
"""

from ._native import __version__

__all__ = ["__version__"]
