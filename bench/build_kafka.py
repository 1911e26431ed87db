"""Build a realistic Kafka partition for the benchmark, from the construct schemas in :mod:`formats.kafka`.

What a broker with default settings would leave after idempotent producers wrote to one partition
(``bench-0``) with a mix of ``compression.type`` settings:

* ``bench-0/<baseOffset>.log``: v2 record batches (``DefaultRecordBatch``), rolled at ``segment_bytes``
  (default 1 GiB, ``log.segment.bytes``). Codecs mixed per batch: none 30 %, lz4 20 %, zstd 20 %, snappy 15 %,
  gzip 15 %; 10..200 records per batch (``linger.ms`` batching), keys ``user-N``, JSON-like values of
  80..1,000 bytes, one or two headers; four idempotent producers (producerId, epoch 0, running sequences);
  CreateTime timestamps; partitionLeaderEpoch 0.
* ``.index`` / ``.timeindex`` per segment with the broker's recovery rule (``index.interval.bytes`` = 4096:
  an entry when more than 4096 bytes were appended since the last one; the time index takes the running max
  timestamp when it goes up, plus the closing entry), an empty ``.txnindex``, ``leader-epoch-checkpoint`` and
  ``partition.metadata``.

Records areas are built by fixtures/build_kafka.py's ``record`` (construct) into a pool of templates per codec
and compressed with its ``COMPRESS`` (the clients' framings: gzip; snappy-java's xerial stream; Kafka's LZ4
frame; zstd); every batch reuses a template (a records area holds only deltas) under its own header, packed
with the ``struct.Struct`` derived from ``K.RecordBatchHeader``, with a fresh CRC-32C. The first batches are
also framed by the fixture builder's ``frame_v2`` (construct) and compared byte for byte. Deterministic for a
given size.
"""
from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

from crc32c import crc32c

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fixture_builders import load  # noqa: E402
from formats import kafka as K  # noqa: E402

HEADER = struct.Struct(K.struct_format(K.RecordBatchHeader))      # 61 bytes, derived from the schema
OFFSET_ENTRY = struct.Struct(K.struct_format(K.OffsetIndexEntry))
TIME_ENTRY = struct.Struct(K.struct_format(K.TimeIndexEntry))
assert HEADER.size == K.V2_HEADER_SIZE

PARTITION = "bench-0"
TOPIC = "bench"
T0 = 1795338600000                 # 2026-11-22T09:10:00Z
CODEC_MIX = [(K.CODEC_NONE, 30), (K.CODEC_LZ4, 20), (K.CODEC_ZSTD, 20), (K.CODEC_SNAPPY, 15), (K.CODEC_GZIP, 15)]
TEMPLATES_PER_CODEC = 48
PRODUCERS = [(4000 + i, 0) for i in range(4)]
CHECKED_WITH_CONSTRUCT = 50
FIXTURE = load("build_kafka")        # fixtures/build_kafka.py: record(), frame_v2(), COMPRESS (clients' framings)
COMPRESS = FIXTURE.COMPRESS


def _template(rng: random.Random, codec: int, words: list[bytes]) -> tuple[int, int, bytes]:
    """(record count, max timestamp delta, stored records area) of one producer batch."""
    n = rng.randint(10, 200)
    recs = []
    ts_delta = 0
    for i in range(n):
        ts_delta += rng.randint(0, 3)
        key = b"user-%d" % rng.randrange(100_000)
        fields = [b'"%s":"%s"' % (rng.choice(words), b" ".join(rng.choices(words, k=rng.randint(2, 12))))
                  for _ in range(rng.randint(2, 24))]
        value = b'{"seq":%d,%s}' % (i, b",".join(fields))
        headers = [(b"traceparent", b"00-%032x-%016x-01" % (rng.getrandbits(128), rng.getrandbits(64)))]
        if i % 3 == 0:
            headers.append((b"content-type", b"application/json"))
        recs.append(FIXTURE.record(i, ts_delta, key, value, headers))
    return n, ts_delta, COMPRESS[codec](b"".join(recs))


def build_store(root: Path, total_bytes: int, segment_bytes: int = 1 << 30, seed: int = 20261122,
                log=print) -> dict:
    """Write the log dir under ``root`` (must not exist); returns a description (counts, sizes)."""
    rng = random.Random(seed)
    part = root / PARTITION
    part.mkdir(parents=True)
    words = [bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 10))) for _ in range(600)]
    templates = {c: [_template(rng, c, words) for _ in range(TEMPLATES_PER_CODEC)] for c, _w in CODEC_MIX}
    codecs = [c for c, _w in CODEC_MIX]
    weights = [w for _c, w in CODEC_MIX]
    seqs = {pid: 0 for pid, _e in PRODUCERS}
    offset = 0
    ts = T0
    written = 0
    records = 0
    batches = 0
    segments = 0
    by_codec = {K.CODEC_NAMES[c]: 0 for c in codecs}
    while written < total_bytes:
        base_offset = offset
        seg = part / f"{base_offset:020d}.log"
        segments += 1
        pos = 0
        last_entry = 0
        max_ts, max_ts_off, last_time_ts = K.NO_TIMESTAMP, -1, K.NO_TIMESTAMP
        idx = bytearray()
        tidx = bytearray()
        with open(seg, "wb", buffering=8 << 20) as out:
            while written < total_bytes:
                codec = rng.choices(codecs, weights)[0]
                n, span, area = templates[codec][rng.randrange(TEMPLATES_PER_CODEC)]
                size = K.V2_HEADER_SIZE + len(area)
                if pos + size > segment_bytes and pos:
                    break                                   # roll (LogSegment.shouldRoll on size)
                pid, epoch = PRODUCERS[batches % len(PRODUCERS)]
                seq = seqs[pid]
                seqs[pid] = seq + n
                ts += rng.randint(1, 40)
                hdr = HEADER.pack(offset, size - K.LOG_OVERHEAD, 0, 2, 0, codec, n - 1, ts, ts + span, pid, epoch,
                                  seq, n)
                crc = crc32c(area, crc32c(hdr[K.V2_ATTRIBUTES_OFFSET:]))
                hdr = hdr[:K.V2_CRC_OFFSET] + crc.to_bytes(4, "big") + hdr[K.V2_CRC_OFFSET + 4:]
                if batches < CHECKED_WITH_CONSTRUCT:
                    ref = FIXTURE.frame_v2(offset, area, n, base_ts=ts, max_ts=ts + span, codec=codec, pid=pid,
                                           epoch=epoch, seq=seq)
                    assert ref == hdr + area, f"fast builder differs from construct at batch {batches}"
                # LogSegment.recover's index rule (the same one the broker applies while appending)
                if ts + span > max_ts:
                    max_ts, max_ts_off = ts + span, offset + n - 1
                if pos - last_entry > K.DEFAULT_INDEX_INTERVAL_BYTES:
                    idx += OFFSET_ENTRY.pack(offset + n - 1 - base_offset, pos)
                    if max_ts > last_time_ts:
                        tidx += TIME_ENTRY.pack(max_ts, max_ts_off - base_offset)
                        last_time_ts = max_ts
                    last_entry = pos
                out.write(hdr)
                out.write(area)
                pos += size
                written += size
                offset += n
                records += n
                batches += 1
                by_codec[K.CODEC_NAMES[codec]] += 1
        if max_ts > last_time_ts:
            tidx += TIME_ENTRY.pack(max_ts, max_ts_off - base_offset)
        seg.with_suffix(".index").write_bytes(bytes(idx))
        seg.with_suffix(".timeindex").write_bytes(bytes(tidx))
        seg.with_suffix(".txnindex").write_bytes(b"")
        log(f"  kafka segment {seg.name}: {records:,} records so far")
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (part / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    return {"messages": records, "batches": batches, "segments": segments, "data_bytes": written,
            "records_by_codec": by_codec, "samples": []}


if __name__ == "__main__":  # pragma: no cover
    out = Path(sys.argv[1])
    mb = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    print(build_store(out, mb << 20))
