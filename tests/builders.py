"""The tests' one door to the unit builders of every family, encoded with the construct schemas of formats/
(the independent source: a test compares what mqtool reads with what the schema wrote), and the schema
round-trip helper. The encoders themselves live in the fixture builders (fixtures/build_*.py), which write
the committed fixtures with them and which bench/ uses too (bench/fixture_builders.py loads them):

* RocketMQ: :func:`rocketmq_unit` (one commitlog unit, any version, IPv4 or IPv6 hosts), its struct-packed twin
  :func:`rocketmq_packed_unit` (IPv4; generated volume, tests/test_rocketmq_builders.py keeps it equal),
  :func:`rocketmq_units`; index files, the index key hash (:func:`rocketmq_builder`).
* Kafka (:func:`kafka_builder`): ``record``, ``batch_v2``, ``frame_v2`` (a batch around a stored area),
  ``restamp_crc``, ``legacy_message``, ``control``, ``COMPRESS`` (the clients' framings), ``write_segments``;
  here :func:`kafka_batch`, :func:`kafka_codec_batch`, :func:`kafka_multisegment_store`.
* LiteMQ (:func:`litemq_builder`): its records through ``mqtool.litemq.records.encode_record``, ``fill_to`` /
  ``filler`` (a record of exactly the room left).
* :func:`roundtrip`: parse → build gives the same bytes.
* Whole stores: :func:`kafka_multisegment_store`, :func:`long_topic_store`, the geometry sweep's
  :func:`rocketmq_geometry_store` and :func:`kafka_geometry_partition`; :func:`damage_segments`.

Tests keep their own *defaults* as thin wrappers (e.g. ``make_message``); the encoding is written once
(tests/test_common_builders.py fails on an encoder elsewhere).
"""
from __future__ import annotations

import functools
import random
import sys
from pathlib import Path

from formats import kafka as K
from formats import rocketmq as F
from formats.common import java_string_hash

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def roundtrip(schema, data: bytes, **ctx):
    """parse → build gives the same bytes; returns the parsed object."""
    obj = schema.parse(data, **ctx)
    assert schema.build(obj, **ctx) == data
    return obj


# ---- the fixture builders: one writer per format, shared with fixtures/ and bench/ ----------------------------------

def _load(name: str):
    if str(FIXTURES.parent) not in sys.path:
        sys.path.insert(0, str(FIXTURES.parent))
    from bench.fixture_builders import load

    return load(name)


@functools.lru_cache(maxsize=None)
def rocketmq_builder():
    """fixtures/build_rocketmq.py (``unit``, ``packed_unit``, ``index_files``, ``index_key_hash``, ``T0``,
    ``build``)."""
    return _load("build_rocketmq")


@functools.lru_cache(maxsize=None)
def kafka_builder():
    """fixtures/build_kafka.py (``record``, ``batch_v2``, ``frame_v2``, ``restamp_crc``, ``legacy_message``,
    ``legacy_v1``, ``control``, ``COMPRESS``, ``write_segments``, ``T0``)."""
    return _load("build_kafka")


@functools.lru_cache(maxsize=None)
def litemq_builder():
    """fixtures/build_litemq.py (``fill_to``, ``filler``, ``encode_record``, ``new_fields``, ``T0``)."""
    return _load("build_litemq")


# ---- RocketMQ ----------------------------------------------------------------------------------------------------

rocketmq_unit = rocketmq_builder().unit                  # one commitlog unit from the construct schema
rocketmq_packed_unit = rocketmq_builder().packed_unit    # its struct-packed twin (IPv4 only): generated volume
T0 = rocketmq_builder().T0                               # the units' store timestamp (ms, in 2026)


def rocketmq_units(n: int, base: int = 0, start: int = 0, **kw) -> bytes:
    """``n`` consecutive valid units whose PHYSICALOFFSET matches where they sit (segment base + start)."""
    out = bytearray()
    for i in range(n):
        out += rocketmq_unit(body=f"message {i}".encode(), phys=base + start + len(out), queue_offset=i, **kw)
    return bytes(out)


def make_message(version="v1", body=b"hello", topic="TopicA", props="KEYS\x01k1 k2\x02TAGS\x01t", sysflag=0,
                 phys=0, born="127.0.0.1:1", store="10.0.0.5:10911", queue_offset=7):
    """A unit with the format tests' defaults (queue 1, offset 7, born 1000 / stored 2000); text topic and
    properties."""
    return rocketmq_unit(topic.encode(), body, props.encode(), version=version, sysflag=sysflag, phys=phys,
                         queue_id=1, queue_offset=queue_offset, born=born, store=store, born_ts=1000, store_ts=2000)


# ---- Kafka --------------------------------------------------------------------------------------------------------

def kafka_batch(base: int, n: int = 1, pad: int = 0, **kw) -> bytes:
    """A v2 batch of ``n`` records ``k<i>``/``v<i>`` (values padded with ``pad`` zero bytes)."""
    B = kafka_builder()
    recs = [B.record(i, i, f"k{i}".encode(), f"v{i}".encode() + bytes(pad)) for i in range(n)]
    return B.batch_v2(base, recs, base_ts=B.T0, max_ts=B.T0 + n, **kw)


def kafka_codec_batch(base: int, records: list[bytes], codec: int, **kw) -> bytes:
    """A v2 batch of ``records`` (from ``kafka_builder().record``) with its records area compressed by ``codec``
    in the clients' framing (gzip, snappy-java's xerial stream, Kafka's LZ4 frame, zstd: the fixture builder's
    ``COMPRESS``); the other keywords (``base_ts``, ``max_ts``, ``attrs``, ``pid``...) as ``batch_v2``'s."""
    B = kafka_builder()
    return B.batch_v2(base, records, codec=codec, compress=B.COMPRESS[codec], **kw)


# ---- Kafka: a generated multi-segment partition ------------------------------------------------------------------

def _segments(base_offsets_and_batches) -> dict[int, bytes]:
    return {base: b"".join(batches) for base, batches in base_offsets_and_batches}


def _write_partition(root: Path, segs: dict[int, bytes], name="orders-0", epochs=None) -> Path:
    """A partition dir with the segments and their index files as recovery writes them."""
    part = root / name
    kafka_builder().write_segments(part, segs, 4096)
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


def rocketmq_segment_store(root: Path, n: int, make, size: int = 65536) -> list[tuple[int, int]]:
    """A RocketMQ store at ``root`` of one commitlog segment of ``size`` bytes: units 0..n-1 side by side from
    offset 0, unit i being ``make(i, offset)`` (its PHYSICALOFFSET is that offset), zeros after them. Returns
    [(offset, size)] of the units."""
    data, at = bytearray(), []
    for i in range(n):
        u = make(i, len(data))
        at.append((len(data), len(u)))
        data += u
    seg = root / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(bytes(data) + bytes(size - len(data)))
    return at


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


# ---- stores of a chosen geometry (tests/test_common_geometry_sweep.py) -----------------------------------------
#
# Built with the construct schemas and the brokers' own rules as the format references state them -- not with
# mqtool's rebuild code:
#
# * RocketMQ (shared/reference/rocketmq.md §4, §6): one commitlog segment; consumequeue files of
#   ``cq_size`` bytes named by their first byte's queue offset, the last one zero-filled to full size; index
#   files of ``slots`` hash slots and ``entries`` entries, filled as ``IndexService#buildIndex`` /
#   ``IndexFile#putKey`` do (a new file once indexCount reaches maxIndexNum; a new file starts with the previous
#   file's end values, its first entry's timeDiff taken against them); each index file named by its first
#   entry's store time (the broker's creation time is not in the data), 1 ms later when that would not sort
#   after the previous name.
# * Kafka (shared/reference/kafka.md §5.3): a partition whose ``.index``/``.timeindex`` follow
#   ``LogSegment.append``'s rule for a given ``index.interval.bytes`` (an entry for a batch once more than the
#   interval was appended since the last entry; the time index takes the largest timestamp so far when the
#   offset index gets an entry, and once more when the segment is closed).

GEOMETRY_SEGMENT = 1 << 20            # the geometry stores' one commitlog segment


def rocketmq_geometry_store(root: Path, slots: int, entries: int, cq_size: int, n_keys: int, seed: int) -> dict:
    """Write a store whose index files hold ``n_keys`` keys; returns what was built (files, keys)."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    log = bytearray()
    queues: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    keys_at: list[tuple[str, str, int]] = []          # (topic, key, offset) of every indexed key
    stamped: list[tuple[int, int, list[str]]] = []    # (offset, store time, index keys) per message
    left, i, ts = n_keys, 0, T0
    while left > 0:
        topic = "GeoA" if i % 3 else "GeoB"
        q = i % 2
        ts += rng.choice((1, 7, 400, 1500))
        uniq = f"0A0000010000{seed % 65536:04X}{i:016X}"
        n_extra = min(left - 1, rng.choice((1, 1, 2)))
        keys = [f"k{seed}-{i}-{j}" for j in range(n_extra)]
        tags = f"Tag{i % 4}"
        props = [("UNIQ_KEY", uniq), ("TAGS", tags)] + ([("KEYS", " ".join(keys))] if keys else [])
        qoff = len(queues.get((topic, q), []))
        data = rocketmq_unit(topic.encode(), f"body {i}".encode(), F.properties_to_string(props).encode(),
                             phys=len(log), queue_id=q, queue_offset=qoff, store_ts=ts)
        off = len(log)
        log += data
        queues.setdefault((topic, q), []).append((off, len(data), java_string_hash(tags)))
        index_keys = [uniq] + keys
        stamped.append((off, ts, [f"{topic}#{k}" for k in index_keys]))
        keys_at += [(topic, k, off) for k in index_keys]
        left -= len(index_keys)
        i += 1
    assert len(log) + F.END_FILE_MIN_BLANK_LENGTH < GEOMETRY_SEGMENT
    files["commitlog/" + f"{0:020d}"] = bytes(log) + bytes(GEOMETRY_SEGMENT - len(log))
    for (topic, q), units in queues.items():
        for name, data in rocketmq_builder().cq_files(units, cq_size):
            files[f"consumequeue/{topic}/{q}/{name}"] = data
    for name, data in rocketmq_builder().index_files(stamped, slots, entries):
        files[f"index/{name}"] = data
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return {"files": files, "keys": keys_at, "messages": i}


def kafka_geometry_partition(part: Path, interval: int, seed: int, n_segments: int = 3) -> dict[str, bytes]:
    """A partition dir of ``n_segments`` segments of v2 batches of random sizes, indexes per the broker's
    append rule at ``interval``; returns {file name: bytes} of the index files written."""
    kb = kafka_builder()
    rng = random.Random(seed)
    part.mkdir(parents=True, exist_ok=True)
    written = {}
    base, ts = 0, kb.T0
    for _ in range(n_segments):
        log, offset_idx, time_idx = bytearray(), bytearray(), bytearray()
        since, max_ts, max_ts_off, last_time = 0, -1, -1, -1
        n_batches = rng.randint(1, 40)
        off = base
        for _b in range(n_batches):
            n = rng.randint(1, 4)
            ts += rng.randint(-5, 30)                      # timestamps may go back: the time index must not
            recs = [kb.record(j, j, b"k%d" % (off + j), b"v" * rng.randint(0, 600)) for j in range(n)]
            batch = kb.batch_v2(off, recs, base_ts=ts, max_ts=ts + n - 1)
            last = off + n - 1
            if ts + n - 1 > max_ts:
                max_ts, max_ts_off = ts + n - 1, last
            if since > interval:
                offset_idx += K.OffsetIndexEntry.build(dict(relativeOffset=last - base, position=len(log)))
                if max_ts > last_time:
                    time_idx += K.TimeIndexEntry.build(dict(timestamp=max_ts, relativeOffset=max_ts_off - base))
                    last_time = max_ts
                since = 0
            log += batch
            since += len(batch)
            off = last + 1
        if max_ts > last_time:                             # closing the segment: the last max timestamp
            time_idx += K.TimeIndexEntry.build(dict(timestamp=max_ts, relativeOffset=max_ts_off - base))
        name = f"{base:020d}"
        for suffix, data in ((".log", log), (".index", offset_idx), (".timeindex", time_idx)):
            (part / (name + suffix)).write_bytes(bytes(data))
            if suffix != ".log":
                written[name + suffix] = bytes(data)
        base = off
    return written


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
    """A v2 control batch at ``base`` with one control record per entry of ``types``
    (fixtures/build_kafka.control_record).
    ``txn`` (the transactional bit) defaults to: any ABORT/COMMIT in ``types``."""
    from formats import kafka as K

    B = kafka_builder()
    ts = B.T0 if ts is None else ts
    recs = [B.control_record(i, t) for i, t in enumerate(types)]
    if txn is None:
        txn = any(t in (K.CONTROL_ABORT, K.CONTROL_COMMIT) for t in types)
    attrs = K.CONTROL_FLAG_MASK | (K.TRANSACTIONAL_FLAG_MASK if txn else 0)
    return B.batch_v2(base, recs, base_ts=ts, max_ts=ts, pid=pid, epoch=epoch, attrs=attrs)


def kafka_legacy_message(offset: int, value: bytes, *, magic: int = 1, ts: int = -1, key: bytes | None = None,
                         attributes: int = 0, crc: int | None = None) -> bytes:
    """One legacy (v0/v1) message (fixtures/build_kafka.legacy_message: size and CRC-32 computed), its CRC field
    then overwritten with ``crc`` when given (a wrong CRC on purpose)."""
    raw = bytearray(kafka_builder().legacy_message(offset, key, value, magic=magic, ts=ts, attributes=attributes))
    if crc is not None:
        raw[12:16] = crc.to_bytes(4, "big")         # offset (8) and size (4), then the CRC
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
