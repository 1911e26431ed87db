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


def check_inflates(codec: str, data, max_size: int = 64 * 1024 * 1024, chunk: int = 1 << 16) -> int:
    """Inflate ``data`` chunk by chunk, keeping nothing, and return the inflated size.

    Raises :class:`CodecError` when the stream is damaged, truncated, followed by garbage, or inflates past
    ``max_size``. Memory stays at one ``chunk`` whatever the stream's header claims (``verify`` uses it to
    prove a compressed body is sound without holding the body).
    """
    total = 0

    def grow(n: int) -> None:
        nonlocal total
        total += n
        if total > max_size:
            raise CodecError(f"decompressed size exceeds {max_size} bytes")

    if codec in ("zlib", "gzip"):
        d = zlib.decompressobj(zlib.MAX_WBITS | (16 if codec == "gzip" else 0))
        buf = bytes(data)
        try:
            while True:
                grow(len(d.decompress(buf, chunk)))
                buf = d.unconsumed_tail
                if d.eof or not buf:
                    break
            if not d.eof:
                grow(len(d.flush(chunk)))
        except zlib.error as e:
            raise CodecError(f"{codec}: {e}") from None
        if not d.eof:
            raise CodecError(f"{codec}: truncated stream")
        if d.unused_data:
            raise CodecError(f"{codec}: {len(d.unused_data)} bytes after the end of the stream")
        return total
    if codec == "zstd":
        import zstandard

        # fed in small pieces: 32 input bytes make at most ~1 MiB of output (a 4-byte RLE block stands for up to
        # 128 KiB), so nothing grows with what a frame header claims
        step = 32
        buf = bytes(data)
        dctx = zstandard.ZstdDecompressor()
        try:
            while buf:
                d = dctx.decompressobj()
                pos = 0
                while pos < len(buf) and not d.eof:
                    grow(len(d.decompress(buf[pos:pos + step])))
                    pos += step
                if not d.eof:
                    raise CodecError("zstd: truncated frame")
                buf = d.unused_data + buf[pos:]
        except zstandard.ZstdError as e:
            raise CodecError(f"zstd: {e}") from None
        return total
    if codec == "lz4":
        import lz4.frame

        d = lz4.frame.LZ4FrameDecompressor()
        buf = bytes(data)
        try:
            grow(len(d.decompress(buf, max_length=chunk)))
            while not d.eof and not d.needs_input:
                grow(len(d.decompress(b"", max_length=chunk)))
        except RuntimeError as e:
            raise CodecError(f"lz4: {e}") from None
        if not d.eof:
            raise CodecError("lz4: truncated frame")
        if d.unused_data:
            raise CodecError(f"lz4: {len(d.unused_data)} bytes after the end of the frame")
        return total
    raise CodecError(f"unknown compression {codec!r}")
