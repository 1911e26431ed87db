"""Read LiteMQ consumequeues, checkpoint, index and abort files (pkg/storage/consumequeue.go & co.).

Consumequeue entry n of a queue lives at byte n*24 of the queue's concatenated files (file
``(n*24) // fileSize``); the end of data is the first entry whose size is 0 (preallocated zero fill; offset
0 is a legitimate first entry). Generators yield entries and findings; nothing raises on damaged bytes.
"""
from __future__ import annotations

import gzip
import re
import struct
from collections import Counter

from construct import ConstructError

from formats import litemq as F
from mqtool.errors import InputError
from mqtool.findings import ERROR, INFO, WARNING, Finding
from mqtool.io import map_input, open_input, read_input
from mqtool.options import SizeDecision
from mqtool.litemq.store import Queue, Store, list_queues, nominal_file_size
from mqtool.litemq.layout import CQ, INDEX_ENTRY
from mqtool.litemq.records import CQEntry

_ZERO_ENTRY = bytes(F.CQ_ENTRY_SIZE)


def read_queue(store: Store, q: Queue, with_stale: bool = False, file_size: int | None = None):
    """Yield CQEntry objects of one queue (live ones; then stale ones flagged when ``with_stale``) and
    Findings about the queue's files. ``file_size``: the store's consumequeue file size as
    :func:`cq_file_size` decided it (options, broker.toml, the store's files); else this queue's own."""
    files = q.files
    fs = file_size or nominal_file_size(files)
    if not files:
        return
    if fs % F.CQ_ENTRY_SIZE:
        yield Finding(WARNING, "cq-file-size", store.display(files[0].path), None, None,
                      f"consumequeue file size {fs} is not a multiple of 24: LiteMQ gets stuck at the end "
                      "of the first file", None, fs)
    prev = None
    ended = False
    for f in files:
        name = store.display(f.path)
        if f.size != fs:
            yield Finding(WARNING, "cq-file-size-mismatch", name, None, None,
                          f"file is {f.size} bytes, the queue's other files {fs}", fs, f.size)
        if prev is not None and f.index != prev + 1:
            yield Finding(ERROR, "cq-file-missing", name, None, None,
                          f"consumequeue file index {f.index} follows {prev}", prev + 1, f.index)
        prev = f.index
        with map_input(f.path) as mi:       # whole: every entry is read (stale ones after the queue's end too)
            buf = mi.buf
            n_full = len(buf) // F.CQ_ENTRY_SIZE
            base_index = (f.index * fs) // F.CQ_ENTRY_SIZE if fs else 0
            stale_noted = False
            for i in range(n_full):
                pos = i * F.CQ_ENTRY_SIZE
                raw = bytes(buf[pos:pos + F.CQ_ENTRY_SIZE])
                if ended:
                    if raw == _ZERO_ENTRY:
                        continue
                    if not stale_noted:
                        stale_noted = True
                        yield Finding(WARNING, "cq-stale-entries", name, pos, None,
                                      "non-zero entries after the end of the queue (older entries surviving "
                                      "a restart that rewrote the queue from entry 0)")
                    if not with_stale:
                        break
                    off, size, th, ts = CQ.unpack(raw)
                    yield CQEntry(name, pos, q.topic, q.queue_id, base_index + i, off, size, th, ts, raw, True,
                                  "after-queue-end")
                    continue
                off, size, th, ts = CQ.unpack(raw)
                if size == 0:
                    ended = True
                    if raw != _ZERO_ENTRY:
                        yield Finding(WARNING, "cq-end-not-zero", name, pos, None,
                                      "an entry with size 0 but other non-zero fields ends the queue", None,
                                      raw.hex())
                    continue
                yield CQEntry(name, pos, q.topic, q.queue_id, base_index + i, off, size, th, ts, raw)
            if len(buf) % F.CQ_ENTRY_SIZE:
                yield Finding(WARNING, "cq-partial-entry", name, n_full * F.CQ_ENTRY_SIZE, None,
                              f"{len(buf) % 24} trailing byte(s) that are no whole entry")


def queues(store: Store, topic=None, queue=None):
    return list_queues(store, topic, queue)


def broker_toml_sizes(path) -> dict:
    """``file_size`` of the ``[commitlog]`` and ``[consumequeue]`` tables of LiteMQ's broker.toml.

    Only these tables take effect in LiteMQ (most of its sample TOML lands in the wrong tables). A tiny
    reader: table headers and ``key = integer`` lines (``_`` separators allowed), comments stripped.
    """
    text = read_input(path, 1 << 20).decode("utf-8", errors="replace")
    out: dict = {}
    table = ""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"\[\s*([^\]]+?)\s*\]", line)
        if m:
            table = m.group(1)
            continue
        m = re.fullmatch(r"([A-Za-z0-9_\-]+)\s*=\s*([0-9_]+)", line)
        if m and table in ("commitlog", "consumequeue") and m.group(1) == "file_size":
            out[table] = int(m.group(2).replace("_", ""))
    return out


def cq_file_size(opts=None, store: Store | None = None) -> SizeDecision:
    """The consumequeue file size of a LiteMQ store: ``--cq-file-size``, else ``--broker-conf``'s
    ``[consumequeue] file_size``, else the size most of the store's consumequeue files have (LiteMQ
    preallocates every file to it), else LiteMQ's default."""
    given = getattr(opts, "cq_file_size", None)
    if given:
        return SizeDecision(given, "option", "--cq-file-size")
    conf = getattr(opts, "broker_conf", None)
    if conf:
        sizes = broker_toml_sizes(conf)
        if "consumequeue" in sizes:
            return SizeDecision(sizes["consumequeue"], "broker-conf", f"[consumequeue] file_size in {conf}")
    counts = Counter(f.size for q in (list_queues(store) if store is not None else ()) for f in q.files if f.size)
    if counts:
        (value, n), *rest = counts.most_common()
        others = tuple(sorted(v for v, _ in rest))
        warn = None
        if others:
            warn = (f"consumequeue files have several sizes: {value} ({n} files) or {', '.join(map(str, others))}; "
                    f"using {value} (give --cq-file-size to choose)")
        return SizeDecision(value, "store", f"the size of {n} consumequeue file(s)", others, warn)
    return SizeDecision(F.DEFAULT_CQ_FILE_SIZE, "default", "LiteMQ's default (600 MiB)")


# ---- checkpoint -------------------------------------------------------------------------------

def read_checkpoint(path) -> tuple[dict | None, list]:
    """Parse a checkpoint file. Returns (row, findings); the counts are reported, never trusted."""
    findings = []
    data = read_input(path, 1 << 24)
    name = str(path)
    if len(data) < F.CHECKPOINT_HEADER_SIZE:
        return None, [Finding(ERROR, "checkpoint-truncated", name, 0, None,
                              f"{len(data)} bytes, the header alone is 38", 38, len(data))]
    try:
        cp = F.Checkpoint.parse(data)
    except ConstructError as e:
        return None, [Finding(ERROR, "checkpoint-bad", name, 0, None, f"cannot parse: {str(e).splitlines()[0]}")]
    h = cp.header
    consumers = {}
    triples = 0
    for g in cp.consumers:
        for t in g.topics:
            for qo in t.queues:
                consumers.setdefault(g.group, {}).setdefault(t.topic, {})[qo.queueId] = qo.offset
                triples += 1
    cqs = {}
    pairs = 0
    for t in cp.consumequeue or []:
        for qo in t.queues:
            cqs.setdefault(t.topic, {})[qo.queueId] = qo.offset
            pairs += 1
    row = {
        "kind": "checkpoint", "file": name, "version": h.version,
        "commitlog_flushed_offset": h.commitLogFlushedOffset,
        "cq_flushed_count": h.cqFlushedCount, "consumer_offset_count": h.consumerOffsetCount,
        "last_flush_time": h.lastFlushTime, "last_update_time": h.lastUpdateTime,
        "consumequeue_offsets": cqs, "consumer_offsets": consumers,
        "consumer_groups": len(cp.consumers), "consumer_offset_triples": triples,
        "trailing_bytes": len(cp.trailing),
    }
    if h.version != 1:
        findings.append(Finding(WARNING, "checkpoint-version", name, 4, None, "unknown version", 1, h.version))
    if h.consumerOffsetCount != len(cp.consumers):
        findings.append(Finding(INFO, "checkpoint-count-quirk", name, 18, None,
                                f"consumerOffsetCount {h.consumerOffsetCount} counts (group,topic,queue) "
                                f"triples but {len(cp.consumers)} group record(s) follow: LiteMQ's writer bug "
                                "(its own reader then fails to start the broker)",
                                triples, h.consumerOffsetCount))
    if h.commitLogFlushedOffset == 0:
        findings.append(Finding(INFO, "checkpoint-flushed-zero", name, 6, None,
                                "commitLogFlushedOffset is 0, as always in LiteMQ (Commit is never called)"))
    if cp.trailing:
        findings.append(Finding(WARNING, "checkpoint-trailing", name, len(data) - len(cp.trailing), None,
                                f"{len(cp.trailing)} byte(s) after the last parsable record", 0,
                                len(cp.trailing)))
    return row, findings


# ---- abort ------------------------------------------------------------------------------------

def read_abort(path) -> tuple[dict, list]:
    data = read_input(path, 4096)
    txt = F.Abort.parse(data).startTimeMs if data.isascii() else None
    row = {"kind": "abort", "file": str(path), "size": len(data), "start_time": None, "raw": data.hex()}
    findings = []
    if txt is not None and txt.strip().isdigit():
        row["start_time"] = int(txt.strip())
    else:
        findings.append(Finding(WARNING, "abort-unreadable", str(path), 0, None,
                                "abort file does not hold decimal epoch milliseconds"))
    return row, findings


# ---- index file -------------------------------------------------------------------------------

def open_index_bytes(path) -> bytes:
    """Index file bytes; a gzip-compressed copy (like clean/extras) is decompressed in memory (≈20 MB)."""
    head = read_input(path, 2)
    if head == b"\x1f\x8b":
        with open_input(path) as f:
            try:
                return gzip.GzipFile(fileobj=f).read(F.INDEX_HEADER_SIZE + 4 * F.INDEX_HASH_SLOTS
                                                     + 20 * 50_000_000)
            except (OSError, EOFError) as e:
                raise InputError(f"bad gzip: {e}", str(path)) from None
    return read_input(path)


def read_index(path, want_slots: bool = False):
    """Yield an index header row, then (optionally) slot rows and entry rows; findings as well."""
    data = open_index_bytes(path)
    name = str(path)
    if len(data) < F.INDEX_HEADER_SIZE:
        yield Finding(ERROR, "index-truncated", name, 0, None, "shorter than the 40-byte header")
        return
    try:
        h = F.IndexHeader.parse(data[:F.INDEX_HEADER_SIZE])
    except ConstructError:
        yield Finding(ERROR, "index-bad-magic", name, 0, None, "bad index magic", "4c4d5104", data[:4].hex())
        return
    slots, count = h.hashSlotCount, h.indexCount
    need = F.INDEX_HEADER_SIZE + 4 * max(slots, 0) + F.INDEX_ENTRY_SIZE * max(count, 0)
    yield {"kind": "index_header", "file": name, "version": h.version, "create_time": h.createTime,
           "last_update": h.lastUpdate, "hash_slot_count": slots, "index_count": count, "size": len(data)}
    if slots < 0 or count < 0 or need > len(data):
        yield Finding(ERROR, "index-truncated", name, 0, None,
                      f"header needs {need} bytes, the file has {len(data)}", need, len(data))
        return
    sbase = F.INDEX_HEADER_SIZE
    ebase = sbase + 4 * slots
    if want_slots:
        arr = struct.unpack_from(f">{slots}i", data, sbase)
        for i, head in enumerate(arr):
            if head != -1:
                yield {"kind": "index_slot", "file": name, "slot": i, "position": sbase + 4 * i, "head": head}
    for i in range(count):
        pos = ebase + i * F.INDEX_ENTRY_SIZE
        kh, off, td, nxt = INDEX_ENTRY.unpack_from(data, pos)
        yield {"kind": "index_entry", "file": name, "entry": i, "position": pos, "key_hash": kh,
               "offset": off, "time_diff": td, "next": nxt}
    if len(data) > need:
        yield Finding(WARNING, "index-trailing", name, need, None, f"{len(data) - need} bytes after the entries")


def index_slots(data: bytes, slots: int) -> tuple:
    return struct.unpack_from(f">{slots}i", data, F.INDEX_HEADER_SIZE)

