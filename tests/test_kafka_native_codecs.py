"""The decoders of the compiled Kafka dump helper (``group_lines`` in mqtool/_native/kafka.c inflates snappy, lz4
and zstd records areas itself, through ``inflate``): every stream they take gives the bytes the data was made from
(the compressors of cramjam, python-lz4 and zstandard, in the clients' framings and their variants), and a stream
they take is never one mqtool.codecs refuses or reads differently (bit flips, cuts, bytes appended, hand-made
headers); the output limit holds whatever a stream states. Declining is always allowed (the Python codecs then
decode the batch); the tests make sure the clean streams Kafka clients write are not declined.
"""
from __future__ import annotations

import random
import struct

import pytest

from builders import kafka_builder
from formats import kafka as K
from mqtool import codecs as C
from mqtool.kafka import dump as D
from mqtool.kafka import records as R

NAT = D._native_walker()
pytestmark = pytest.mark.skipif(NAT is None, reason="compiled kafka helper not built, or MQTOOL_NATIVE=0 "
                                                    "(tests/test_common_native.py fails under CI when it is missing)")
LIMIT = 1 << 22


def _kinds():
    return D._area_kinds(NAT)


def _texts(rnd: random.Random) -> list[bytes]:
    return [b"", b"x", bytes(rnd.getrandbits(8) for _ in range(3000)), b"abc" * 70_000,
            b"".join(b'{"n":%d,"v":"%s"}' % (i, b"w" * (i % 37)) for i in range(9000)),
            bytes(rnd.choice(b"ab") for _ in range(200_000)), bytes(range(256)) * 600]


def _streams(data: bytes):
    """(codec, stream) in the framings producers write, several variants each."""
    import cramjam
    import lz4.frame
    import zstandard

    yield K.CODEC_SNAPPY, kafka_builder().xerial_snappy(data, 32 << 10)
    yield K.CODEC_SNAPPY, kafka_builder().xerial_snappy(data, 1 << 10)
    if data:
        yield K.CODEC_SNAPPY, bytes(cramjam.snappy.compress_raw(data))        # raw (non-Java clients)
    for size in (lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB, lz4.frame.BLOCKSIZE_MAX1MB,
                 lz4.frame.BLOCKSIZE_MAX4MB):
        for store_size in (True, False):
            for checksums in (False, True):
                yield K.CODEC_LZ4, lz4.frame.compress(data, block_size=size, block_linked=False,
                                                      content_checksum=checksums, block_checksum=checksums,
                                                      store_size=store_size)
    for level in (1, 3, 19):
        yield K.CODEC_ZSTD, zstandard.ZstdCompressor(level=level).compress(data)
    yield K.CODEC_ZSTD, zstandard.ZstdCompressor(write_checksum=True).compress(data)
    half = len(data) // 2
    yield K.CODEC_ZSTD, (zstandard.ZstdCompressor().compress(data[:half])
                         + zstandard.ZstdCompressor().compress(data[half:]))          # two frames


def test_all_three_codecs_are_inflated_by_the_helper():
    kinds = _kinds()
    assert set(kinds) == {K.CODEC_NONE, K.CODEC_SNAPPY, K.CODEC_LZ4, K.CODEC_ZSTD}


def test_clean_streams_give_their_data():
    rnd = random.Random(7)
    kinds = _kinds()
    for data in _texts(rnd):
        for codec, stream in _streams(data):
            assert NAT.inflate(kinds[codec], stream, LIMIT) == data, (codec, len(data))
            assert C.decompress_kafka(codec, stream, LIMIT) == data


def test_streams_the_python_codecs_refuse_are_declined():
    """Bit flips, cuts and appended bytes: the helper gives None or exactly what mqtool.codecs gives."""
    rnd = random.Random(11)
    kinds = _kinds()
    taken = refused = 0
    for data in _texts(rnd)[:5]:
        for codec, stream in _streams(data):
            for _ in range(12):
                m = bytearray(stream)
                how = rnd.randrange(4)
                if how == 0 and m:
                    for _ in range(rnd.randint(1, 3)):
                        m[rnd.randrange(len(m))] ^= 1 << rnd.randrange(8)
                elif how == 1:
                    del m[rnd.randrange(len(m) + 1):]
                elif how == 2:
                    m += bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 9)))
                else:
                    m = m[:rnd.randrange(len(m) + 1)] + m[rnd.randrange(len(m) + 1):]
                got = NAT.inflate(kinds[codec], bytes(m), LIMIT)
                try:
                    want = C.decompress_kafka(codec, bytes(m), LIMIT)
                except C.CodecError:
                    want = None
                if got is not None:
                    taken += 1
                    assert got == want, codec
                else:
                    refused += 1
    assert taken > 100 and refused > 100


def _zstd_header_claiming(size: int) -> bytes:
    # magic, frame header descriptor: single segment, 8-byte content size; then one raw block of 1 byte, last
    fhd = 0b11100000
    block = (1 | (0 << 1) | (1 << 3)).to_bytes(3, "little") + b"x"
    return struct.pack("<I", 0xFD2FB528) + bytes([fhd]) + struct.pack("<Q", size) + block


@pytest.mark.parametrize("claimed", [1, 2, 1 << 40, (1 << 64) - 3])
def test_a_zstd_frame_claiming_any_size(claimed):
    """The stated content size is checked against the limit before anything is written; a frame that states
    one size and holds another is declined (the Python codecs refuse it too)."""
    stream = _zstd_header_claiming(claimed)
    got = NAT.inflate(3, stream, LIMIT)
    assert got == (b"x" if claimed == 1 else None)
    if claimed > LIMIT:
        with pytest.raises(C.CodecError):
            C.decompress_kafka(K.CODEC_ZSTD, stream, LIMIT)


@pytest.mark.parametrize("codec", [K.CODEC_SNAPPY, K.CODEC_LZ4, K.CODEC_ZSTD])
def test_the_output_limit_holds(codec):
    data = b"0123456789abcdef" * 50_000                     # 800 KB, compresses to little
    kinds = _kinds()
    for _codec, stream in _streams(data):
        if _codec != codec:
            continue
        assert NAT.inflate(kinds[codec], stream, len(data)) == data
        assert NAT.inflate(kinds[codec], stream, len(data) - 1) is None
        assert NAT.inflate(kinds[codec], stream, 0) is None


def test_snappy_hostile_raw_streams():
    """Hand-made raw snappy: a copy reaching before the output, offset 0, a stated length the stream does not fill
    or overruns, a preamble wider than 32 bits: declined, as cramjam refuses them."""
    kinds = _kinds()
    cases = [
        bytes([5, 0x10]) + b"abcde",            # ok: literal of 5
        bytes([5, 0x0C]) + b"abcd",             # literal of 4, length says 5
        bytes([3, 0x10]) + b"abcde",            # literal of 5, length says 3
        bytes([8, 0x04]) + b"ab" + bytes([0x01 | (0 << 2), 0x05]),      # copy offset 5 > 2 written
        bytes([6, 0x04]) + b"ab" + bytes([0x01 | (0 << 2), 0x00]),      # offset 0
        bytes([6, 0x04]) + b"ab" + bytes([0x01 | (0 << 2), 0x02]),      # ok: copy 4 at offset 2 (overlapping)
        bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x1F]),                          # preamble past 32 bits
        bytes([0x80]),                                                  # cut preamble
        b"",
    ]
    for raw in cases:
        got = NAT.inflate(kinds[K.CODEC_SNAPPY], raw, 1 << 20)
        try:
            want = C.decompress_kafka(K.CODEC_SNAPPY, raw, 1 << 20)
        except C.CodecError:
            want = None
        assert got == want, raw
    assert NAT.inflate(kinds[K.CODEC_SNAPPY], cases[0], 1 << 20) == b"abcde"
    assert NAT.inflate(kinds[K.CODEC_SNAPPY], cases[5], 1 << 20) == b"abababab"[:6]


def test_group_lines_declines_hostile_jobs():
    """A count the area does not hold, an area past the limit, a stream that does not inflate: None for that batch
    only; an unknown area kind or output type is an error."""
    from builders import kafka_builder, kafka_codec_batch
    from mqtool.kafka.scan import scan
    from mqtool.ndjson import CleanLines
    from mqtool.options import DumpOptions

    B = kafka_builder()
    recs = [B.record(i, i, b"k", b"v" * i, [(b"h", b"x")]) for i in range(5)]
    raw = kafka_codec_batch(0, recs, K.CODEC_LZ4, base_ts=B.T0, max_ts=B.T0 + 5)
    b = next(e for e in scan(raw, "/x/00000000000000000000.log") if isinstance(e, R.Batch))
    bl = D.BatchLines(NAT, DumpOptions(deep=True))
    job = bl._job(b, bl.prepare(b))
    ok = NAT.group_lines((job,), R.NATIVE_AREA_MAX, 10)
    assert type(ok[0]) is CleanLines and ok[0].count(b"\n") == 6
    lie = job[:2] + (6,) + job[3:]
    huge = job[:2] + (1 << 40,) + job[3:]
    neg = job[:2] + (-1,) + job[3:]
    cut = (bytes(job[0])[:-3],) + job[1:]
    got = NAT.group_lines((job, lie, huge, neg, cut, job), R.NATIVE_AREA_MAX, 10)
    assert got[0] == ok[0] == got[5] and got[1:5] == [None] * 4
    assert NAT.group_lines((job,), 10, 10) == [None]          # inflates past the limit
    assert NAT.group_lines((job,), R.NATIVE_AREA_MAX, 0) == [None]      # a record above max_headers
    for bad in (job[:1] + (9,) + job[2:], job[:-1] + (str,), job[:-1] + (bytearray,)):
        with pytest.raises((ValueError, TypeError)):
            NAT.group_lines((bad,), R.NATIVE_AREA_MAX, 10)


def test_blocks_are_ordinary_bytes_objects():
    """group_lines makes its PreRenderedLines/CleanLines without zeroing them first: they hash, compare, slice and
    are freed like any bytes (the collector and a refcount check see nothing odd)."""
    import gc
    import sys

    from builders import kafka_builder, kafka_codec_batch
    from mqtool.kafka.scan import scan
    from mqtool.ndjson import CleanLines, PreRenderedLines
    from mqtool.options import DumpOptions

    B = kafka_builder()
    raw = kafka_codec_batch(0, [B.record(i, i, b"k", b"v", []) for i in range(3)], K.CODEC_ZSTD, base_ts=B.T0,
                            max_ts=B.T0 + 3)
    b = next(e for e in scan(raw, "/x/00000000000000000000.log") if isinstance(e, R.Batch))
    bl = D.BatchLines(NAT, DumpOptions(deep=True))
    job = bl._job(b, bl.prepare(b))
    refs = sys.getrefcount(CleanLines)
    for cls in (CleanLines, PreRenderedLines, bytes):
        blk = NAT.group_lines((job[:-1] + (cls,),), R.NATIVE_AREA_MAX, 10)[0]
        plain = bytes(blk)
        assert type(blk) is cls and blk == plain and hash(blk) == hash(plain) and blk[:7] == plain[:7]
        assert plain.endswith(b"\n") and plain.count(b"\n") == 4 and len(blk) == len(plain)
        del blk
    gc.collect()
    assert sys.getrefcount(CleanLines) == refs


def test_a_run_of_clean_batches_is_one_block():
    """run_group gives consecutive clean batches' lines as one block (True for the batches it covers); a batch
    that may carry a damage mark, or one declined, stands alone; the bytes are those of the batches one by one."""
    from builders import kafka_builder, kafka_codec_batch
    from mqtool.kafka.scan import scan
    from mqtool.ndjson import CleanLines, PreRenderedLines
    from mqtool.options import DumpOptions

    B = kafka_builder()
    raws = [kafka_codec_batch(10 * i, [B.record(k, k, b"k", b"v%d" % k, []) for k in range(3)], codec,
                              base_ts=B.T0, max_ts=B.T0 + 3)
            for i, codec in enumerate([K.CODEC_NONE, K.CODEC_LZ4, K.CODEC_ZSTD, K.CODEC_SNAPPY, K.CODEC_GZIP,
                                       K.CODEC_NONE])]
    batches = [e for e in scan(b"".join(raws), "/x/00000000000000000000.log") if isinstance(e, R.Batch)]
    batches[3].crc_ok = False                                   # lines with a damage mark
    bl = D.BatchLines(NAT, DumpOptions(deep=True))
    group = [(b, bl.prepare(b)) for b in batches]
    singles = [bl.run(b, job) for b, job in group]
    assert [type(s) for s in singles] == [CleanLines] * 3 + [PreRenderedLines] + [CleanLines] * 2
    got = bl.run_group(group)
    assert got[1:3] == [True, True] and got[3] == singles[3] and got[5] is True
    assert bytes(got[0]) == b"".join(singles[:3]) and bytes(got[4]) == b"".join(singles[4:])
    assert type(got[0]) is CleanLines and type(got[4]) is CleanLines


def test_cramjam_is_imported_only_where_python_inflates_snappy(tmp_path):
    """`dump kafka --deep` of a snappy batch: the compiled helper inflates it, so the Python snappy decoder's
    library (cramjam) is never imported (it was, with every codec library, at the codecs' first use); with the
    helpers off (MQTOOL_NATIVE=0) the Python decoder runs and imports it."""
    import os
    import subprocess
    import sys

    from builders import kafka_builder, kafka_codec_batch
    from conftest import ROOT

    B = kafka_builder()
    recs = [B.record(i, i, b"k%d" % i, b"value %d " % i * 40) for i in range(5)]
    part = tmp_path / "orders-0"
    part.mkdir()
    (part / f"{0:020d}.log").write_bytes(kafka_codec_batch(0, recs, K.CODEC_SNAPPY, base_ts=B.T0, max_ts=B.T0 + 4))
    code = ("import runpy, sys\nsys.argv = ['mqtool', 'dump', 'kafka', sys.argv[1], '--deep', '--json']\n"
            "try:\n    runpy.run_module('mqtool', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('cramjam' in sys.modules, file=sys.stderr)")
    seen = {}
    for native in ("1", "0"):
        out = subprocess.run([sys.executable, "-c", code, str(part)], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "MQTOOL_NATIVE": native})
        assert out.stdout.count('"kind":"record"') == 5, out.stderr
        seen[native] = out.stderr.strip().splitlines()[-1]
    assert seen == {"1": "False", "0": "True"}
