"""CRC-32 (IEEE, zlib's) for body checks: ISA-L's folding implementation when the ``fast`` extra is installed;
and CRC-32C (Castagnoli, Kafka's record batches) from the ``crc32c`` package.

``isal.isal_zlib.crc32`` computes exactly ``zlib.crc32`` (same polynomial, same init/xor-out) but with
carry-less multiplication, ~6x faster per core; the pure-Python install falls back to :func:`zlib.crc32`.
Equality of the two is a test (``tests/test_rocketmq_fastpath.py``).

``crc32c`` (``from mqtool.fastcrc import crc32c``) is the package's own compiled function, loaded when first
imported from here without running the package's ``__init__``, which reads every installed distribution's
metadata for its version and imports its command line (~140 M instructions, more than a small ``verify``:
issue #20). Where the compiled module is not found, the package is imported as usual.
"""
from __future__ import annotations

import zlib

try:  # optional fast path (extra "fast")
    from isal.isal_zlib import crc32 as _isal_crc32
except Exception:  # pragma: no cover - exercised when isal is absent
    _isal_crc32 = None

crc32 = _isal_crc32 if _isal_crc32 is not None else zlib.crc32
IMPLEMENTATION = "isal" if _isal_crc32 is not None else "zlib"

__all__ = ["crc32", "IMPLEMENTATION"]       # and crc32c (loaded when imported)


def __getattr__(name: str):
    if name == "crc32c":
        fn = _load_crc32c()
        globals()["crc32c"] = fn
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load_crc32c():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    if "crc32c" in sys.modules:
        return sys.modules["crc32c"].crc32c
    spec = importlib.util.find_spec("crc32c")       # finds the package without running it
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(base, "_crc32c" + suffix)
            if os.path.isfile(path):
                loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
                module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
                loader.exec_module(module)
                return module.crc32c
    from crc32c import crc32c

    return crc32c
