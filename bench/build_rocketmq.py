"""Build a realistic RocketMQ store for the benchmark, from the construct schemas in :mod:`formats.rocketmq`.

What a broker with default settings would leave after receiving the messages (all IPv4, uncompressed, v1):

* ``commitlog/``: segments of ``segment_bytes`` (default 1 GiB, the broker's ``mappedFileSizeCommitLog``), each
  full one closed by a BLANK unit; messages of 8 topics × 4 queues with KEYS (every 5th message two keys),
  TAGS, UNIQ_KEY, WAIT, CLUSTER and two user properties, text bodies of 200..2,400 bytes (~1.5 KB per unit);
* ``consumequeue/<topic>/<queue>/``: 20-byte units in 6,000,000-byte files (300,000 units, the default);
* ``index/<yyyyMMddHHmmssSSS>``: 5,000,000 slots × 20,000,000 entries files (the default geometry, written
  sparse), UNIQ_KEY then every KEYS token per message, as ``IndexService.buildIndex`` does;
* ``checkpoint``.

Every unit is written by fixtures/build_rocketmq.py's ``packed_unit`` (its fixed part packed with the
``struct.Struct`` derived from ``F.MessageV1``: the schema is the source of truth); the first units are also
built by its construct ``unit`` and compared byte for byte, so a drift between the two stops the build.
Deterministic for a given size.
"""
from __future__ import annotations

import array
import base64
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from formats import rocketmq as F  # noqa: E402
from formats.common import java_string_hash, parse_host  # noqa: E402
from mqtool.schema_struct import fixed_prefix_format  # noqa: E402
from bench.fixture_builders import load  # noqa: E402


def fixture_builder():
    """fixtures/build_rocketmq.py (``unit``, ``packed_unit``: the one RocketMQ unit encoder and its fast twin)."""
    return load("build_rocketmq")


CQ_UNIT, _ = fixed_prefix_format(F.CqUnit)
IDX_HEADER, IDX_HEADER_NAMES = fixed_prefix_format(F.IndexHeader)
IDX_ENTRY, _ = fixed_prefix_format(F.IndexEntry)

TOPICS = [f"BenchTopic{i}" for i in range(8)]
QUEUES = 4
STORE_HOST = "10.0.0.5:10911"
BORN_HOSTS = ["192.168.1.23:51234", "192.168.1.24:40112", "10.1.7.200:33001", "127.0.0.1:40000"]
T0 = 1795338600000     # 2026-11-22T09:10:00Z
CHECKED_WITH_CONSTRUCT = 200


def build_store(root: Path, total_bytes: int, segment_bytes: int = F.DEFAULT_COMMITLOG_FILE_SIZE,
                seed: int = 20261122, log=print) -> dict:
    """Write the store under ``root`` (must not exist); returns a description (counts, sizes, a sample key)."""
    rng = random.Random(seed)
    (root / "commitlog").mkdir(parents=True)
    pool = base64.b64encode(rng.randbytes(3 << 20))         # printable body text
    pool_len = len(pool) - 4096
    born = [parse_host(h) for h in BORN_HOSTS]
    store_host = parse_host(STORE_HOST)
    cq: dict[tuple[str, int], bytearray] = {}
    queue_next: dict[tuple[str, int], int] = {}
    tags_codes = {f"Tag{i}": java_string_hash(f"Tag{i}") for i in range(6)}
    slots = array.array("i", bytes(4 * F.DEFAULT_MAX_HASH_SLOTS))
    entries = bytearray(F.INDEX_ENTRY_SIZE)                  # entry 0 is never written
    n_entries = 0
    used_slots = 0
    begin_ts = None
    first_off = last_off = 0
    count = 0
    ts = T0
    samples: list[tuple[str, str]] = []
    data_bytes = 0
    units = fixture_builder()
    pack_unit, build_unit, index_key_hash = units.packed_unit, units.unit, units.index_key_hash
    n_segments = max(1, -(-total_bytes // segment_bytes))
    for seg_index in range(n_segments):
        seg_path = root / "commitlog" / f"{seg_index * segment_bytes:020d}"
        base = seg_index * segment_bytes
        last_segment = seg_index == n_segments - 1
        data_end = total_bytes - base if last_segment else segment_bytes
        pos = 0
        with open(seg_path, "wb", buffering=8 << 20) as out:
            while True:
                i = count
                topic = TOPICS[i % len(TOPICS)]
                q = (i // len(TOPICS)) % QUEUES
                tag = f"Tag{i % 6}"
                keys = f"order-{i}" if i % 5 else f"order-{i} user-{i % 997}"
                uniq = f"0A0000{(i * 2654435761) % (1 << 32):08X}{i:018X}"
                props = (f"KEYS\x01{keys}\x02TAGS\x01{tag}\x02WAIT\x01true\x02UNIQ_KEY\x01{uniq}\x02"
                         f"CLUSTER\x01DefaultCluster\x02traceId\x01trace-{i % 10007}\x02seq\x01{i}").encode()
                blen = rng.randint(200, 2400)
                bo = rng.randrange(pool_len)
                body = pool[bo:bo + blen]
                tb = topic.encode()
                total = F.calc_msg_length("v1", 0, blen, len(tb), len(props))
                if pos + total > data_end or pos + total + F.END_FILE_MIN_BLANK_LENGTH > segment_bytes:
                    if last_segment:      # the active segment: preallocated, zero after the data
                        out.write(bytes(segment_bytes - pos))
                    else:                 # a full segment: closed by BLANK (DefaultAppendMessageCallback)
                        out.write(units.blank(segment_bytes - pos))
                        out.write(bytes(segment_bytes - pos - 8))
                    break
                ts += 1 if i % 3 else 2
                key = (topic, q)
                qoff = queue_next.get(key, 0)
                queue_next[key] = qoff + 1
                phys = base + pos
                unit = pack_unit(tb, body, props, phys=phys, queue_id=q, queue_offset=qoff, born=born[i % len(born)],
                                 store=store_host, store_ts=ts)
                if i < CHECKED_WITH_CONSTRUCT:
                    ref = build_unit(tb, body, props, phys=phys, queue_id=q, queue_offset=qoff,
                                     born=BORN_HOSTS[i % len(born)], store=STORE_HOST, store_ts=ts)
                    assert ref == unit, f"fast builder differs from construct at message {i}"
                out.write(unit)
                pos += total
                count += 1
                data_bytes += total
                cq.setdefault(key, bytearray()).extend(CQ_UNIT.pack(phys, total, tags_codes[tag]))
                if begin_ts is None:
                    begin_ts, first_off = ts, phys
                last_off = phys
                for k in [uniq] + keys.split(" "):
                    h = index_key_hash(f"{topic}#{k}")
                    s = h % F.DEFAULT_MAX_HASH_SLOTS
                    n_entries += 1
                    prev = slots[s]
                    if not prev:
                        used_slots += 1
                    entries += IDX_ENTRY.pack(h, phys, (ts - begin_ts) // 1000, prev)
                    slots[s] = n_entries
                if i % 9973 == 11:
                    samples.append((topic, keys.split(" ")[0]))
        log(f"  commitlog segment {seg_path.name}: {count:,} messages so far")
    # consume queues (300,000 units per file)
    per_file = F.DEFAULT_CQ_UNITS_PER_FILE * F.CQ_STORE_UNIT_SIZE
    for (topic, q), data in cq.items():
        d = root / "consumequeue" / topic / str(q)
        d.mkdir(parents=True)
        for start in range(0, len(data), per_file):
            chunk = data[start:start + per_file]
            with open(d / f"{start:020d}", "wb") as f:
                f.write(chunk)
                f.truncate(per_file)
    # one index file (default geometry; 20M entries each)
    if n_entries >= F.DEFAULT_MAX_INDEX_NUM:
        raise SystemExit("bench store too large for one index file; extend the builder to roll index files")
    (root / "index").mkdir()
    header = IDX_HEADER.pack(begin_ts, ts, first_off, last_off, used_slots, n_entries + 1)
    if sys.byteorder == "little":
        slots.byteswap()
    with open(root / "index" / units.index_file_name(begin_ts), "wb") as f:
        f.write(header)
        f.write(slots.tobytes())
        f.write(entries)
        f.truncate(F.index_file_size(F.DEFAULT_MAX_HASH_SLOTS, F.DEFAULT_MAX_INDEX_NUM))
    (root / "checkpoint").write_bytes(F.Checkpoint.build(dict(
        physicMsgTimestamp=ts, logicsMsgTimestamp=ts, indexMsgTimestamp=ts, masterFlushedOffset=0,
        confirmPhyOffset=0)))
    commitlog_bytes = sum(p.stat().st_size for p in (root / "commitlog").iterdir())
    return {"messages": count, "segments": n_segments, "commitlog_bytes": commitlog_bytes,
            "data_bytes": data_bytes, "index_entries": n_entries, "queues": len(cq), "samples": samples}


if __name__ == "__main__":  # pragma: no cover
    out = Path(sys.argv[1])
    mb = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    print(build_store(out, mb << 20, segment_bytes=min(F.DEFAULT_COMMITLOG_FILE_SIZE, mb << 20)))
    os.sync()
