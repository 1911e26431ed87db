"""Stores of a chosen geometry for the geometry sweep (tests/test_common_geometry_sweep.py), built with the construct
schemas and the brokers' own rules as the format references state them — not with mqtool's rebuild code:

* RocketMQ (shared/reference/rocketmq.md §4, §6): one commitlog segment; consumequeue files of
  ``cq_size`` bytes named by their first byte's queue offset, the last one zero-filled to full size; index
  files of ``slots`` hash slots and ``entries`` entries, filled as ``IndexService#buildIndex`` /
  ``IndexFile#putKey`` do (a new file once indexCount reaches maxIndexNum; a new file starts with the previous
  file's end values, its first entry's timeDiff taken against them); each index file named by its first
  entry's store time (the broker's creation time is not in the data), 1 ms later when that would not sort
  after the previous name.
* Kafka (shared/reference/kafka.md §5.3): a partition whose ``.index``/``.timeindex`` follow
  ``LogSegment.append``'s rule for a given ``index.interval.bytes`` (an entry for a batch once more than the
  interval was appended since the last entry; the time index takes the largest timestamp so far when the
  offset index gets an entry, and once more when the segment is closed).
"""
from __future__ import annotations

import random
from pathlib import Path

from formats import kafka as K
from formats import rocketmq as F
from formats.common import java_string_hash
from builders import T0, kafka_builder, rocketmq_builder, rocketmq_unit as unit

SEGMENT = 1 << 20


def _props(pairs) -> bytes:
    return F.properties_to_string(pairs).encode()


def rocketmq_store(root: Path, slots: int, entries: int, cq_size: int, n_keys: int, seed: int) -> dict:
    """Write a store whose index files hold ``n_keys`` keys; returns what was built (files, keys)."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    log = bytearray()
    queues: dict[tuple[str, int], list[bytes]] = {}
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
        data = unit(topic.encode(), f"body {i}".encode(), _props(props), phys=len(log), queue_id=q,
                    queue_offset=qoff, store_ts=ts)
        off = len(log)
        log += data
        queues.setdefault((topic, q), []).append(F.CqUnit.build(dict(offset=off, size=len(data),
                                                                     tagsCode=java_string_hash(tags))))
        index_keys = [uniq] + keys
        stamped.append((off, ts, [f"{topic}#{k}" for k in index_keys]))
        keys_at += [(topic, k, off) for k in index_keys]
        left -= len(index_keys)
        i += 1
    assert len(log) + F.END_FILE_MIN_BLANK_LENGTH < SEGMENT
    files["commitlog/" + f"{0:020d}"] = bytes(log) + bytes(SEGMENT - len(log))
    for (topic, q), units in queues.items():
        per = cq_size // F.CQ_STORE_UNIT_SIZE
        for start in range(0, len(units), per):
            chunk = b"".join(units[start:start + per])
            files[f"consumequeue/{topic}/{q}/{start * F.CQ_STORE_UNIT_SIZE:020d}"] = chunk + bytes(cq_size - len(chunk))
    for name, data in rocketmq_builder().index_files(stamped, slots, entries):
        files[f"index/{name}"] = data
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return {"files": files, "keys": keys_at, "messages": i}


# ---- Kafka ---------------------------------------------------------------------------------------------

def kafka_partition(part: Path, interval: int, seed: int, n_segments: int = 3) -> dict[str, bytes]:
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
