"""Bounded decompression for message bodies (zlib, gzip, LZ4 frame, zstd, snappy).

Every decoder stops at ``max_size`` output bytes and raises :class:`CodecError` instead of inflating a
compression bomb into memory.
"""
from __future__ import annotations

import zlib


class CodecError(Exception):
    pass


def _zlib_stream(data: bytes, wbits: int, max_size: int) -> bytes:
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(data, max_size + 1)
    except zlib.error as e:
        raise CodecError(f"zlib: {e}") from None
    if len(out) > max_size:
        raise CodecError(f"decompressed size exceeds {max_size} bytes")
    if not d.eof:
        raise CodecError("zlib: truncated stream")
    return out


def decompress(codec: str, data: bytes, max_size: int = 64 * 1024 * 1024) -> bytes:
    if codec == "zlib":
        return _zlib_stream(data, zlib.MAX_WBITS, max_size)
    if codec == "gzip":
        return _zlib_stream(data, zlib.MAX_WBITS | 16, max_size)
    if codec == "zstd":
        import zstandard

        import io

        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as r:
                out = r.read(max_size + 1)
        except zstandard.ZstdError as e:
            raise CodecError(f"zstd: {e}") from None
        if len(out) > max_size:
            raise CodecError(f"decompressed size exceeds {max_size} bytes")
        return out
    if codec == "lz4":
        import lz4.frame

        try:
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=max_size + 1)
        except RuntimeError as e:
            raise CodecError(f"lz4: {e}") from None
        if len(out) > max_size:
            raise CodecError(f"decompressed size exceeds {max_size} bytes")
        return out
    raise CodecError(f"unknown compression {codec!r}")


def compress(codec: str, data: bytes, level: int = 5) -> bytes:
    """Used by fixture builders and tests."""
    if codec == "zlib":
        return zlib.compress(data, level)
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=level).compress(data)
    if codec == "lz4":
        import lz4.frame

        return lz4.frame.compress(data)
    raise CodecError(f"unknown compression {codec!r}")
