"""The one error for a missing `chinese` extra."""

from __future__ import annotations

import importlib
from types import ModuleType

INSTALL_HINT = "pip install -e '.[cpu,chinese]'"


class MissingExtraError(ImportError):
    """A flag needs a package of the `chinese` extra that is not installed."""


def import_extra(module: str, flag: str) -> ModuleType:
    """Imports `module`, or raises a one-line error naming the flag and the extra.

    Args:
      module: the package to import ("opencc", "jieba").
      flag: the flag and value that needs it, e.g. "--chinese_segmenter=jieba".
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"error: {flag} needs the 'chinese' extra ({module}): "
                                f"{INSTALL_HINT}") from None
