"""Bounded decompression for every family: the one codecs module.

Every decoder stops at its size limit and raises :class:`CodecError` (a :class:`mqtool.errors.DecodeError`;
:class:`CodecTooLarge` for the limit) instead of inflating a compression bomb into memory. The compression
libraries are imported on first use, never at start-up.

* Message bodies by codec name (RocketMQ, LiteMQ): :func:`decompress`, :func:`check_inflates`, :func:`compress`.
* Kafka record payloads by CompressionType id: :func:`decompress_kafka`, :func:`decompress_kafka_chunks`.
Decompression of Kafka record payloads as they are stored (CompressionType + the clients' framings).

* gzip: any RFC 1952 stream, multi-member accepted.
* snappy: snappy-java's xerial stream framing (magic, version, compat, then int32-BE-prefixed raw blocks),
  falling back to raw snappy when the magic is absent (non-Java clients).
* lz4: Kafka's LZ4 frame (``KafkaLZ4BlockInputStream``): the header checksum is *not* enforced, because
  magic v0 producers wrote a checksum over the magic too (KAFKA-3160); every other field is read normally.
* zstd: standard frames, possibly several, content size unknown.

Every function takes a ``limit`` (bytes) and raises :class:`CodecError` (:class:`CodecTooLarge` for the
limit) instead of growing past it. :func:`decompress_chunks` gives the same bytes as :func:`decompress` as a
stream of chunks of at most ``CHUNK`` bytes (those above ``WHOLE_MAX``), so a reader of a batch that inflates
to hundreds of MiB never holds more than a chunk and the record it is reading.

Fast paths (same bytes out; anything they do not fully handle goes to the careful code, which gives the
result or the precise error; ``tests/test_kafka_native.py`` checks fast == careful on generated and damaged
streams): gzip through ISA-L's inflate (``isal``, the ``fast`` extra) when installed; zstd frames that state
their content size are decoded one frame at a time with a reused decompressor (the streaming reader cost
~3 ms per small batch).
"""
from __future__ import annotations

import struct
import zlib

from mqtool.errors import DecodeError


class CodecError(DecodeError, ValueError):
    """The compressed bytes cannot be decoded (bad framing, truncated stream, output past the limit)."""


def decompress(codec: str, data, max_size: int = 64 * 1024 * 1024) -> bytes:
    """The inflated body, under the same rule as :func:`check_inflates` (a stream that is damaged, truncated,
    followed by garbage or larger than ``max_size`` raises :class:`CodecError`), so ``dump`` shows a
    ``body_error`` exactly where ``verify`` reports ``body-inflate-failed``."""
    return b"".join(_inflate(codec, data, max_size, 1 << 16))


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
    return sum(map(len, _inflate(codec, data, max_size, chunk)))


def _inflate(codec: str, data, max_size: int, chunk: int):
    """The inflated bytes of one body, piece by piece (at most ``chunk`` bytes each for zlib and lz4, ~1 MiB for
    zstd); raises :class:`CodecError` as :func:`check_inflates` says."""
    total = 0

    def grown(piece: bytes) -> bytes:
        nonlocal total
        total += len(piece)
        if total > max_size:
            raise CodecError(f"decompressed size exceeds {max_size} bytes")
        return piece

    if codec in ("zlib", "gzip"):
        d = zlib.decompressobj(zlib.MAX_WBITS | (16 if codec == "gzip" else 0))
        buf = bytes(data)
        try:
            while True:
                yield grown(d.decompress(buf, chunk))
                buf = d.unconsumed_tail
                if d.eof or not buf:
                    break
            if not d.eof:
                yield grown(d.flush(chunk))
        except zlib.error as e:
            raise CodecError(f"{codec}: {e}") from None
        if not d.eof:
            raise CodecError(f"{codec}: truncated stream")
        if d.unused_data:
            raise CodecError(f"{codec}: {len(d.unused_data)} bytes after the end of the stream")
        return
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
                    yield grown(d.decompress(buf[pos:pos + step]))
                    pos += step
                if not d.eof:
                    raise CodecError("zstd: truncated frame")
                buf = d.unused_data + buf[pos:]
        except zstandard.ZstdError as e:
            raise CodecError(f"zstd: {e}") from None
        return
    if codec == "lz4":
        import lz4.frame

        d = lz4.frame.LZ4FrameDecompressor()
        buf = bytes(data)
        try:
            yield grown(d.decompress(buf, max_length=chunk))
            while not d.eof and not d.needs_input:
                yield grown(d.decompress(b"", max_length=chunk))
        except RuntimeError as e:
            raise CodecError(f"lz4: {e}") from None
        if not d.eof:
            raise CodecError("lz4: truncated frame")
        if d.unused_data:
            raise CodecError(f"lz4: {len(d.unused_data)} bytes after the end of the frame")
        return
    raise CodecError(f"unknown compression {codec!r}")


# ---- Kafka record payloads (CompressionType ids and the clients' framings) ------------------------------------

class CodecTooLarge(CodecError):
    """The output would grow past the limit."""


_loaded = [False]
_ZSTD: list = [None]            # a ZstdDecompressor per thread (one is not safe to share between threads)


def _load() -> None:
    """Import the Kafka codecs' libraries and constants on first use (cramjam only where snappy is inflated
    here: :func:`_snappy_stream`)."""
    if _loaded[0]:
        return
    global lz4, zstandard, _fast_zlib, _DECODERS, _STREAMS
    global CODEC_GZIP, CODEC_LZ4, CODEC_NAMES, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, LZ4_FRAME_MAGIC, \
        XERIAL_SNAPPY_MAGIC
    import lz4.block
    import zstandard

    try:
        from isal import isal_zlib as _fast_zlib
    except ImportError:     # the `fast` extra is not installed: zlib only
        _fast_zlib = None
    from formats.kafka import (CODEC_GZIP, CODEC_LZ4, CODEC_NAMES, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD,
                               LZ4_FRAME_MAGIC, XERIAL_SNAPPY_MAGIC)

    import threading

    _ZSTD[0] = threading.local()
    _DECODERS = {CODEC_GZIP: gunzip, CODEC_SNAPPY: unsnappy, CODEC_LZ4: unlz4, CODEC_ZSTD: unzstd}
    _STREAMS = {CODEC_GZIP: _gunzip_stream, CODEC_SNAPPY: _snappy_stream, CODEC_LZ4: _lz4_stream,
                CODEC_ZSTD: _zstd_stream}
    _loaded[0] = True


DEFAULT_LIMIT = 256 * 1024 * 1024
CHUNK = 1 << 20                 # streamed output pieces
WHOLE_MAX = 4 << 20             # outputs up to this size come out whole (the fast paths)
_I32BE = struct.Struct(">i")
_U32LE = struct.Struct("<I")
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def gunzip(data, limit: int = DEFAULT_LIMIT) -> bytes:
    _load()
    buf = bytes(data)
    if _fast_zlib is not None:
        try:
            out = _gunzip_members(_fast_zlib, buf, limit)
        except (_fast_zlib.error, CodecError):
            out = None
        if out is not None:
            return out
    return _gunzip_careful(buf, limit)


def _gunzip_members(zmod, buf: bytes, limit: int) -> bytes | None:
    """Complete members only, at most ``limit`` bytes, nothing but zero padding after them; else None."""
    _load()
    out = []
    total = 0
    while buf:
        # zlib refuses reserved header flag bits; ISA-L does not: leave such members to zlib
        if len(buf) < 10 or buf[2] != 8 or buf[3] & 0xE0:
            return None
        d = zmod.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(buf, limit - total + 1)
        total += len(chunk)
        if total > limit or not d.eof:
            return None
        out.append(chunk)
        buf = d.unused_data
        if buf and not buf.startswith(b"\x1f\x8b"):
            if buf.strip(b"\x00"):
                return None
            break
    return b"".join(out)


def _gunzip_careful(buf: bytes, limit: int) -> bytes:
    _load()
    return b"".join(_gunzip_stream(buf, limit))


def _gunzip_stream(buf: bytes, limit: int):
    _load()
    total = 0
    while buf:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        data = buf
        while not d.eof:
            try:
                chunk = d.decompress(data, min(CHUNK, limit - total + 1))
            except zlib.error as e:
                raise CodecError(f"gzip: {e}") from None
            total += len(chunk)
            if total > limit:
                raise CodecTooLarge(f"gzip: more than {limit} bytes")
            if chunk:
                yield chunk
            data = d.unconsumed_tail
            if not chunk and not data and not d.eof:
                raise CodecError("gzip: truncated stream")
        buf = d.unused_data
        # trailing zero padding after the last member is tolerated
        if buf and not buf.startswith(b"\x1f\x8b"):
            if buf.strip(b"\x00"):
                raise CodecError("gzip: garbage after the stream")
            break


def unsnappy(data, limit: int = DEFAULT_LIMIT) -> bytes:
    _load()
    return b"".join(_snappy_stream(data, limit))


def _snappy_stream(data, limit: int):
    _load()
    import cramjam      # here, not in _load: the compiled Kafka helper inflates snappy without it

    buf = bytes(data)
    if buf.startswith(XERIAL_SNAPPY_MAGIC):
        pos = len(XERIAL_SNAPPY_MAGIC) + 8        # int32 version, int32 min-compatible version
        total = 0
        while pos < len(buf):
            if pos + 4 > len(buf):
                raise CodecError("snappy: truncated xerial block length")
            (n,) = _I32BE.unpack_from(buf, pos)
            pos += 4
            if n < 0 or pos + n > len(buf):
                raise CodecError(f"snappy: xerial block length {n} past the end")
            try:
                if cramjam.snappy.decompress_raw_len(buf[pos:pos + n]) > limit - total:
                    raise CodecTooLarge(f"snappy: more than {limit} bytes")
                chunk = bytes(cramjam.snappy.decompress_raw(buf[pos:pos + n]))
            except CodecError:
                raise
            except Exception as e:  # cramjam raises its own DecompressionError
                raise CodecError(f"snappy: {e}") from None
            total += len(chunk)
            if total > limit:
                raise CodecTooLarge(f"snappy: more than {limit} bytes")
            yield chunk
            pos += n
        return
    # raw snappy (non-Java clients) has no blocks: one piece, its stated size checked first
    try:
        n = cramjam.snappy.decompress_raw_len(buf)
        if n > limit:
            raise CodecTooLarge(f"snappy: more than {limit} bytes")
        yield bytes(cramjam.snappy.decompress_raw(buf))
    except CodecError:
        raise
    except Exception as e:
        raise CodecError(f"snappy: {e}") from None


def unlz4(data, limit: int = DEFAULT_LIMIT) -> bytes:
    """Kafka LZ4 frame; the header checksum byte is skipped, not checked (v0 wrote a wrong one)."""
    _load()
    return b"".join(_lz4_stream(data, limit))


def _lz4_stream(data, limit: int):
    _load()
    buf = bytes(data)
    if not buf.startswith(LZ4_FRAME_MAGIC):
        raise CodecError("lz4: no frame magic")
    if len(buf) < 7:
        raise CodecError("lz4: truncated frame header")
    flg, bd = buf[4], buf[5]
    if (flg >> 6) != 1:
        raise CodecError(f"lz4: unsupported frame version {flg >> 6}")
    block_checksum = bool(flg & 0x10)
    content_size = bool(flg & 0x08)
    # (flg & 0x04, a content checksum after the end mark, is not read: the batch CRC covers these bytes)
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
    if block_max is None:
        raise CodecError(f"lz4: bad block size id in BD 0x{bd:02x}")
    pos = 6 + (8 if content_size else 0) + 1      # + header checksum byte
    total = 0
    while True:
        if pos + 4 > len(buf):
            raise CodecError("lz4: truncated block size")
        (word,) = _U32LE.unpack_from(buf, pos)
        pos += 4
        if word == 0:
            break
        n = word & 0x7FFFFFFF
        if n > block_max or pos + n > len(buf):
            raise CodecError(f"lz4: block size {n} past the end")
        block = buf[pos:pos + n]
        pos += n + (4 if block_checksum else 0)
        if word & 0x80000000:
            chunk = block
        else:
            try:
                chunk = lz4.block.decompress(block, uncompressed_size=block_max)
            except Exception as e:
                raise CodecError(f"lz4: {e}") from None
        total += len(chunk)
        if total > limit:
            raise CodecTooLarge(f"lz4: more than {limit} bytes")
        yield chunk


def _zstd_sized_frames(buf: bytes, limit: int) -> bytes | None:
    """Frames that each state their content size (within ``limit`` in all), decoded whole, back to back up
    to the end of ``buf``; None for anything else (unknown size, skippable frame, trailing bytes, ...)."""
    _load()
    out = []
    total = 0
    while buf:
        size = zstandard.get_frame_parameters(buf).content_size
        if size == zstandard.CONTENTSIZE_UNKNOWN or size > limit - total:
            return None
        dctx = getattr(_ZSTD[0], "dctx", None)
        if dctx is None:
            dctx = _ZSTD[0].dctx = zstandard.ZstdDecompressor()
        d = dctx.decompressobj()
        chunk = d.decompress(buf)
        if not d.eof or len(chunk) != size:
            return None
        total += size
        out.append(chunk)
        buf = d.unused_data
    return b"".join(out)


def unzstd(data, limit: int = DEFAULT_LIMIT) -> bytes:
    _load()
    buf = bytes(data)
    try:
        out = _zstd_sized_frames(buf, limit)
    except zstandard.ZstdError:
        out = None
    if out is not None:
        return out
    return _unzstd_careful(buf, limit)


def _unzstd_careful(buf: bytes, limit: int) -> bytes:
    _load()
    return b"".join(_zstd_stream(buf, limit))


def _zstd_stream(buf: bytes, limit: int):
    _load()
    total = 0
    reader = zstandard.ZstdDecompressor().stream_reader(buf, read_across_frames=True)
    while True:
        try:
            chunk = reader.read(CHUNK)
        except zstandard.ZstdError as e:
            raise CodecError(f"zstd: {e}") from None
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise CodecTooLarge(f"zstd: more than {limit} bytes")
        yield chunk


def decompress_kafka(codec: int, data, limit: int = DEFAULT_LIMIT) -> bytes:
    """Decompress ``data`` stored with Kafka codec id ``codec``; raises CodecError."""
    _load()
    if codec == CODEC_NONE:
        return bytes(data)
    fn = _DECODERS.get(codec)
    if fn is None:
        raise CodecError(f"unknown compression codec id {codec}")
    return fn(data, limit)


def decompress_kafka_chunks(codec: int, data, limit: int = DEFAULT_LIMIT):
    """The bytes of :func:`decompress_kafka` as an iterator of chunks: outputs up to ``WHOLE_MAX`` bytes in one
    piece through the fast paths, larger ones streamed (pieces of at most ``CHUNK`` bytes, except a raw
    snappy stream, which has no blocks). Raises CodecError while iterating."""
    _load()
    if codec == CODEC_NONE:
        view = memoryview(data)
        for i in range(0, len(view), CHUNK):
            yield bytes(view[i:i + CHUNK])
        return
    if codec not in _DECODERS:
        raise CodecError(f"unknown compression codec id {codec}")
    try:
        yield decompress_kafka(codec, data, min(limit, WHOLE_MAX))
        return
    except CodecTooLarge:
        if limit <= WHOLE_MAX:
            raise
    yield from _STREAMS[codec](bytes(data), limit)


def kafka_codec_name(codec: int) -> str:
    _load()
    return CODEC_NAMES.get(codec, f"unknown({codec})")


_native_kinds: dict = {}         # {"of": the helper module, "kinds": its answer}


def kafka_native_codecs(helper) -> dict[int, int]:
    """Kafka codec id -> the area kind the compiled dump helper (``mqtool/_native/kafka.c`` ``group_lines``)
    inflates itself: 0 for uncompressed, and snappy, lz4 and zstd when it found the decoders of the libraries
    loaded here (python-lz4's block module, the zstandard package's cffi module: the same code, called without
    the GIL). Codecs not listed (gzip through ISA-L/zlib) are inflated by the functions above. The helper is
    configured once per module object."""
    if _native_kinds.get("of") is helper:
        return _native_kinds["kinds"]
    _load()
    import importlib.util

    def origin(name: str) -> str | None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        return spec.origin if spec is not None and spec.has_location else None

    snappy, lz4_ok, zstd_ok = helper.configure_codecs(
        origin("lz4.block._block"), origin("zstandard._cffi"), XERIAL_SNAPPY_MAGIC, LZ4_FRAME_MAGIC,
        tuple(_LZ4_BLOCK_MAX.items()))
    kinds = {CODEC_NONE: 0}
    for codec, kind, ok in ((CODEC_SNAPPY, 1, snappy), (CODEC_LZ4, 2, lz4_ok), (CODEC_ZSTD, 3, zstd_ok)):
        if ok:
            kinds[codec] = kind
    _native_kinds.update(of=helper, kinds=kinds)
    return kinds
