"""One set of unit builders for the tests, for every family, encoded with the construct schemas of formats/
(the independent source: a test compares what mqtool reads with what the schema wrote), and the schema
round-trip helper.

* RocketMQ: :func:`rocketmq_unit` (one commitlog unit, any version, IPv4 or IPv6 hosts), :func:`rocketmq_units`.
* Kafka: the fixture builder's record/batch writers (:func:`kafka_builder`), :func:`kafka_batch`.
* LiteMQ: the fixture builder (:func:`litemq_builder`).
* :func:`roundtrip`: parse → build gives the same bytes.

Tests keep their own *defaults* as thin wrappers (e.g. ``make_message``); the encoding is written once, here.
"""
from __future__ import annotations

import functools
import importlib.util
import zlib
from pathlib import Path

from formats import rocketmq as F

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
T0 = 1795338600000          # a store timestamp in 2026 (ms)


def roundtrip(schema, data: bytes, **ctx):
    """parse → build gives the same bytes; returns the parsed object."""
    obj = schema.parse(data, **ctx)
    assert schema.build(obj, **ctx) == data
    return obj


# ---- RocketMQ ----------------------------------------------------------------------------------------------------

def rocketmq_unit(topic: bytes = b"T", body: bytes = b"hello", props: bytes = b"KEYS\x01k1\x02TAGS\x01a", *,
                  version: str = "v1", sysflag: int = 0, phys: int = 0, queue_id: int = 0, queue_offset: int = 0,
                  born: str = "192.168.1.23:51234", store: str = "10.0.0.5:10911", born_ts: int | None = None,
                  store_ts: int = T0, body_crc: int | None = None) -> bytes:
    """One commitlog unit built by ``F.MESSAGE_SCHEMAS[version]``; TOTALSIZE from ``F.calc_msg_length``, the body
    CRC computed unless given; ``born_ts`` defaults to 3 ms before ``store_ts``. Topic and properties are raw
    bytes (UTF-8 or not); hosts as "a.b.c.d:port" or "[v6]:port" (set the sysFlag's v6 bits to match)."""
    total = F.calc_msg_length(version, sysflag, len(body), len(topic), len(props))
    return F.MESSAGE_SCHEMAS[version].build(dict(
        TOTALSIZE=total, BODYCRC=(zlib.crc32(body) & 0x7FFFFFFF) if body_crc is None else body_crc,
        QUEUEID=queue_id, FLAG=0, QUEUEOFFSET=queue_offset, PHYSICALOFFSET=phys, SYSFLAG=sysflag,
        BORNTIMESTAMP=store_ts - 3 if born_ts is None else born_ts, BORNHOST=born, STORETIMESTAMP=store_ts,
        STOREHOSTADDRESS=store, RECONSUMETIMES=0, PREPAREDTRANSACTIONOFFSET=0, BODYLENGTH=len(body), BODY=body,
        TOPICLENGTH=len(topic), TOPIC=topic, PROPERTIESLENGTH=len(props), PROPERTIES=props))


def rocketmq_units(n: int, base: int = 0, start: int = 0, **kw) -> bytes:
    """``n`` consecutive valid units whose PHYSICALOFFSET matches where they sit (segment base + start)."""
    out = bytearray()
    for i in range(n):
        out += rocketmq_unit(body=f"message {i}".encode(), phys=base + start + len(out), queue_offset=i, **kw)
    return bytes(out)


# ---- Kafka and LiteMQ: the fixture builders (one writer per format, shared with fixtures/) -------------------------

def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"fixtures_{name}", FIXTURES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.lru_cache(maxsize=None)
def kafka_builder():
    """fixtures/build_kafka.py (``record``, ``batch_v2``, ``legacy_v1``, ``control``, ``T0``), loaded under its own
    module name (bench/ has a build_kafka too)."""
    return _load("build_kafka")


@functools.lru_cache(maxsize=None)
def litemq_builder():
    """fixtures/build_litemq.py."""
    return _load("build_litemq")


def kafka_batch(base: int, n: int = 1, pad: int = 0, **kw) -> bytes:
    """A v2 batch of ``n`` records ``k<i>``/``v<i>`` (values padded with ``pad`` zero bytes)."""
    B = kafka_builder()
    recs = [B.record(i, i, f"k{i}".encode(), f"v{i}".encode() + bytes(pad)) for i in range(n)]
    return B.batch_v2(base, recs, base_ts=B.T0, max_ts=B.T0 + n, **kw)


def make_message(version="v1", body=b"hello", topic="TopicA", props="KEYS\x01k1 k2\x02TAGS\x01t", sysflag=0,
                 phys=0, born="127.0.0.1:1", store="10.0.0.5:10911", queue_offset=7):
    """A unit with the format tests' defaults (queue 1, offset 7, born 1000 / stored 2000); text topic and
    properties."""
    return rocketmq_unit(topic.encode(), body, props.encode(), version=version, sysflag=sysflag, phys=phys,
                         queue_id=1, queue_offset=queue_offset, born=born, store=store, born_ts=1000, store_ts=2000)


def kafka_codec_batch(base: int, records: list[bytes], codec: int, *, base_ts: int, max_ts: int, attrs: int = 0,
                      pid: int = -1, epoch: int = -1, seq: int = -1, ple: int = 0) -> bytes:
    """A v2 batch of ``records`` (from ``kafka_builder().record``) with its records area compressed by ``codec``
    in the clients' framing (gzip, snappy-java's xerial stream, Kafka's LZ4 frame, zstd: bench/build_kafka.py's
    ``COMPRESS``), header and CRC-32C from the schema."""
    import struct
    import sys

    from crc32c import crc32c

    from formats import kafka as K

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.build_kafka import COMPRESS

    area = COMPRESS[codec](b"".join(records))
    hdr = dict(baseOffset=base, batchLength=K.V2_HEADER_SIZE - K.LOG_OVERHEAD + len(area),
               partitionLeaderEpoch=ple, magic=2, crc=0, attributes=attrs | codec,
               lastOffsetDelta=len(records) - 1, baseTimestamp=base_ts, maxTimestamp=max_ts, producerId=pid,
               producerEpoch=epoch, baseSequence=seq, recordsCount=len(records))
    raw = bytearray(K.RecordBatch.build(dict(header=hdr, records=area)))
    raw[K.V2_CRC_OFFSET:K.V2_CRC_OFFSET + 4] = struct.pack(">I", crc32c(bytes(raw[K.V2_ATTRIBUTES_OFFSET:])))
    return bytes(raw)


# ---- Kafka: a generated multi-segment partition ------------------------------------------------------------------

def _segments(base_offsets_and_batches) -> dict[int, bytes]:
    return {base: b"".join(batches) for base, batches in base_offsets_and_batches}


def _write_partition(root: Path, segs: dict[int, bytes], name="orders-0", epochs=None) -> Path:
    """A partition dir with the segments and their index files as recovery writes them."""
    from mqtool.kafka.rebuild import TxnTracker, recover_segment

    part = root / name
    part.mkdir(parents=True)
    txn = TxnTracker()
    for base, data in segs.items():
        stem = f"{base:020d}"
        (part / f"{stem}.log").write_bytes(data)
        res = recover_segment(data, stem, base, 4096, True, txn)
        (part / f"{stem}.index").write_bytes(res.index_bytes())
        (part / f"{stem}.timeindex").write_bytes(res.timeindex_bytes())
        if res.aborted:
            (part / f"{stem}.txnindex").write_bytes(res.txnindex_bytes())
    if epochs:
        lines = ["0", str(len(epochs))] + [f"{e} {o}" for e, o in epochs]
        (part / "leader-epoch-checkpoint").write_text("\n".join(lines) + "\n")
    return part


def kafka_shift_segment(log: Path, by: int) -> Path:
    """Every batch of the Kafka segment ``log`` moved by ``by`` offsets (base offsets rewritten in place), the
    file renamed after its new base offset (its index files left as they are); returns the new path."""
    data = bytearray(log.read_bytes())
    pos = 0
    while pos + 12 <= len(data):
        v = int.from_bytes(data[pos:pos + 8], "big") + by
        data[pos:pos + 8] = v.to_bytes(8, "big")
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    log.unlink()
    new = log.with_name(f"{int(log.stem) + by:020d}.log")
    new.write_bytes(bytes(data))
    return new


def kafka_multisegment_store(root: Path) -> Path:
    """A Kafka log dir ``root/logdir`` with one partition ``orders-0`` of four segments of 40 batches (index
    files as recovery writes them): a transaction open across the 2nd roll and aborted in the 3rd segment,
    leader epoch 1 from offset 100 (and its leader-epoch-checkpoint)."""
    from formats import kafka as K

    B = kafka_builder()

    segs = []
    off = 0
    for s in range(4):
        base = off
        batches = []
        for i in range(40):
            ple = 0 if off < 100 else 1
            if s == 1 and i == 39:
                batches.append(kafka_batch(off, 2, attrs=K.TRANSACTIONAL_FLAG_MASK, pid=77, epoch=0, seq=0, ple=ple))
                off += 2
                continue
            if s == 2 and i == 3:
                batches.append(B.control(off, K.CONTROL_ABORT, 77, 0, B.T0 + off, ple=ple))
                off += 1
                continue
            batches.append(kafka_batch(off, 3, pad=40, ple=ple))
            off += 3
        segs.append((base, batches))
    store = root / "logdir"
    _write_partition(store, _segments(segs), epochs=[(0, 0), (1, 100)])
    return store


# ---- export partition values: topics too long (or too long once escaped) for a directory name ------------------

LONG_TOPIC = "T" * 150 + "\u00e9" * 150    # 300 characters, 450 UTF-8 bytes
PCT_TOPIC = "%" * 90                        # 90 bytes, 270 once escaped (%25 each): too long a name too
OK_TOPIC = "x" * 200                        # 200 bytes: fits, kept as it is


def long_topic_store(tmp_path: Path) -> Path:
    """A RocketMQ store (v2 units) whose topics are LONG_TOPIC, "short", LONG_TOPIC, PCT_TOPIC, OK_TOPIC."""
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    data = bytearray()
    for i, topic in enumerate([LONG_TOPIC, "short", LONG_TOPIC, PCT_TOPIC, OK_TOPIC]):
        data += rocketmq_unit(topic=topic.encode(), body=f"b{i}".encode(), phys=len(data), queue_offset=i,
                              version="v2")
    (store / "commitlog" / "00000000000000000000").write_bytes(bytes(data) + bytes(4096))
    return store


# ---- damage recipes for copies of real stores ----------------------------------------------------------------------

def damage_segments(store: Path) -> None:
    """Damage a copy of a multi-segment RocketMQ store (at least four commitlog segments) in every way a walk
    must resync from: garbage over headers, a zeroed page and a flipped byte in segment 1, bytes inserted into
    segment 2 (what follows shifts), the last segment truncated mid-record."""
    segs = sorted((store / "commitlog").iterdir())
    d1 = bytearray(segs[1].read_bytes())
    d1[1000:1100] = b"\xAB" * 100                # garbage over headers
    d1[8192:8192 + 4096] = bytes(4096)          # a zeroed page
    d1[20000] ^= 0x40                           # a flipped byte (CRC or framing)
    segs[1].write_bytes(d1)
    d2 = segs[2].read_bytes()
    garbage = bytes((i * 37 + 11) % 256 for i in range(333))
    segs[2].write_bytes(d2[:5000] + garbage + d2[5000:])   # inserted bytes shift what follows
    d4 = segs[-1].read_bytes()
    segs[-1].write_bytes(d4[:len(d4) // 2 + 7])              # truncated mid-record


# ---- Kafka fidelity (helper "kafka", session 10): control batches, legacy wrappers, preallocated indexes ----------

def kafka_control_batch(base: int, types: list[int], *, pid: int = -1, epoch: int = -1, ts: int | None = None,
                        txn: bool | None = None) -> bytes:
    """A v2 control batch at ``base`` with one control record per entry of ``types`` (key ControlRecordKey
    version 0 and that type; value an EndTxnMarker for ABORT/COMMIT, else 4 opaque bytes), built by the schema.
    ``txn`` (the transactional bit) defaults to: any ABORT/COMMIT in ``types``."""
    from formats import kafka as K

    B = kafka_builder()
    ts = B.T0 if ts is None else ts
    recs = []
    for i, t in enumerate(types):
        key = K.ControlRecordKey.build(dict(version=0, type=t, rest=b""))
        val = (K.EndTxnMarker.build(dict(version=0, coordinatorEpoch=3, rest=b""))
               if t in (K.CONTROL_ABORT, K.CONTROL_COMMIT) else b"\x00\x00\x00\x00")
        recs.append(B.record(i, 0, key, val))
    if txn is None:
        txn = any(t in (K.CONTROL_ABORT, K.CONTROL_COMMIT) for t in types)
    attrs = K.CONTROL_FLAG_MASK | (K.TRANSACTIONAL_FLAG_MASK if txn else 0)
    return B.batch_v2(base, recs, base_ts=ts, max_ts=ts, pid=pid, epoch=epoch, attrs=attrs)


def kafka_legacy_message(offset: int, value: bytes, *, magic: int = 1, ts: int = -1, key: bytes | None = None,
                         attributes: int = 0, crc: int | None = None) -> bytes:
    """One legacy (v0/v1) message built by ``K.LegacyMessage``: size from its bytes, CRC-32 of [16, end) unless
    ``crc`` is given (a wrong CRC on purpose)."""
    import struct

    from formats import kafka as K

    msg = dict(offset=offset, size=0, crc=0, magic=magic, attributes=attributes, timestamp=ts,
               keyLength=-1 if key is None else len(key), key=key, valueLength=len(value), value=value)
    raw = bytearray(K.LegacyMessage.build(msg))
    raw[8:12] = struct.pack(">i", len(raw) - 12)
    raw[12:16] = struct.pack(">I", zlib.crc32(bytes(raw[16:])) if crc is None else crc)
    return bytes(raw)


def kafka_legacy_wrapper(offset: int, inner: list[bytes], *, magic: int = 1, ts: int = -1) -> bytes:
    """A gzip legacy wrapper (magic ``magic``) at log offset ``offset`` whose value is the gzip of the
    ``inner`` messages (from :func:`kafka_legacy_message`), with a valid outer CRC-32."""
    import gzip

    from formats import kafka as K

    return kafka_legacy_message(offset, gzip.compress(b"".join(inner), mtime=0), magic=magic, ts=ts,
                                attributes=K.CODEC_GZIP)


def kafka_index_entries(entries: list[tuple[int, int]]) -> bytes:
    """``.index`` bytes of (relative offset, position) entries, built by the schema's entry struct."""
    from formats import kafka as K

    return b"".join(K.OffsetIndexEntry.build(dict(relativeOffset=r, position=p)) for r, p in entries)
