"""CRC-32 (IEEE, zlib's) for body checks: ISA-L's folding implementation when the ``fast`` extra is installed.

``isal.isal_zlib.crc32`` computes exactly ``zlib.crc32`` (same polynomial, same init/xor-out) but with
carry-less multiplication, ~6x faster per core; the pure-Python install falls back to :func:`zlib.crc32`.
Equality of the two is a test (``tests/test_rocketmq_fastpath.py``).
"""
from __future__ import annotations

import zlib

try:  # optional fast path (extra "fast")
    from isal.isal_zlib import crc32 as _isal_crc32
except Exception:  # pragma: no cover - exercised when isal is absent
    _isal_crc32 = None

crc32 = _isal_crc32 if _isal_crc32 is not None else zlib.crc32
IMPLEMENTATION = "isal" if _isal_crc32 is not None else "zlib"

__all__ = ["crc32", "IMPLEMENTATION"]
