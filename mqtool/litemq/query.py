"""Find LiteMQ messages offline: by key (index file when present, else a scan), commitlog offset,
topic/queue/queue offset (through the consumequeue), MessageID, store time."""
from __future__ import annotations

import struct

from formats import litemq as F
from mqtool.damage import Damage
from mqtool.errors import UsageError
from mqtool.findings import INFO, Finding
from mqtool.io import map_input
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.history import RESTART_CODES, LiveLog
from mqtool.litemq.store import Store, commitlog_segments
from mqtool.litemq.records import fnv1a32
from mqtool.litemq.rows import MESSAGE_COLUMNS, QUERY_QUEUE_OFFSET_COLUMN, record_row
from mqtool.litemq.scan import damage_finding, parse_record_at, walk
from mqtool.options import QueryOptions, ScanStats


def read_record_at(store: Store, offset: int, with_body: bool = False, containing: bool = False):
    """The live record starting at (or, with ``containing``, covering) a global offset; None if none."""
    segs, fs = commitlog_segments(store)
    if not fs or offset < 0:
        return None
    idx = offset // fs
    seg = next((s for s in segs if s.index == idx), None)
    if seg is None:
        return None
    pos = offset - seg.base
    name = store.display(seg.path)
    with map_input(seg.path, ranged=True) as mi:      # a remote file: parse_record_at fetches each record
        buf = mi.buf
        if containing:
            p = 0
            while p < len(buf):
                rec, _ = parse_record_at(buf, p, len(buf), seg, name)
                if rec is None:
                    return None
                if p <= pos < p + rec.size:
                    break
                p += rec.size
            else:
                return None
        else:
            rec, _ = parse_record_at(buf, pos, len(buf), seg, name)
        if rec is not None and with_body:
            rec.body = bytes(buf[rec.body_slice[0]:rec.body_slice[1]])
        return rec


def run_query(store: Store, opts: QueryOptions, stats: ScanStats):
    if opts.unique_key:
        raise UsageError("LiteMQ has no UNIQ_KEY property: use --msg-id (LiteMQ's MessageID) or --key")
    if opts.queue is not None or opts.queue_offset is not None:
        if opts.topic is None or opts.queue is None or opts.queue_offset is None:
            raise UsageError("--queue-offset needs --topic, --queue and --queue-offset together")
        return MESSAGE_COLUMNS + [QUERY_QUEUE_OFFSET_COLUMN], \
            _by_queue(store, opts, stats)
    if opts.offset is not None:
        return MESSAGE_COLUMNS, _by_offset(store, opts)
    if not (opts.key or opts.msg_id or opts.time_from is not None or opts.time_to is not None or opts.topic):
        raise UsageError("give --key, --msg-id, --offset, --topic/--queue/--queue-offset or --time-from/--time-to")
    if opts.key and not opts.scan and not opts.include_stale:   # the index covers live records only
        files = _index_files(store)
        if files:
            return MESSAGE_COLUMNS, _by_index(store, files, opts, stats)
    return MESSAGE_COLUMNS, _scan(store, opts, stats)


def _index_files(store):
    from mqtool.litemq.store import index_files as f

    return f(store)


def _by_offset(store, opts):
    if opts.containing:
        rec = read_record_at(store, opts.offset, opts.body != "none", True)
        if rec is not None and LiveLog(store).locate(rec.offset)[0] != "start":
            rec.state = "stale"
    else:
        _, rec = LiveLog(store).locate(opts.offset, opts.body != "none")   # an older run's record: stale
    if rec is not None:
        yield record_row(rec, opts.body)


def _by_queue(store, opts, stats):
    """Entries through the live log: a stale entry (an older run's, left after a restart) never yields a
    live row; its record is given marked stale when it survives after the live end, else a note."""
    qs = CQ.queues(store, opts.topic, opts.queue)
    fs = CQ.cq_file_size(opts, store).value
    want = range(opts.queue_offset, opts.queue_offset + max(opts.count, 1))
    live = LiveLog(store)
    for q in qs:
        for e in CQ.read_queue(store, q, with_stale=True, file_size=fs):
            if isinstance(e, Finding):
                if e.severity != INFO and e.code != "cq-stale-entries":
                    stats.damage(f"{e.code}: {e.file}@{e.position}: {e.message}")
                continue
            if e.index not in want:
                if e.index >= want.stop:
                    break
                continue
            reason, where, rec = live.judge(e)
            matches = (rec is not None and rec.m["Topic"] == e.topic and rec.m["QueueID"] == e.queue_id
                       and rec.size == e.size)
            if not (matches and not rec.stale):       # an entry after a zero entry may still meet its live record
                reason = e.stale_reason or reason
            where_txt = f"{e.file}@{e.position}: entry {e.index} (offset {e.commitlog_offset}, {e.size} bytes)"
            if reason is None:
                if opts.body != "none":
                    rec = live.locate(e.commitlog_offset, True)[1]
                if rec is not None and rec.state == "after-gap":
                    stats.damage(f"{where_txt}: its record lies after damage that ends the live data (LiteMQ's "
                                 "reader cannot reach it); given with state after-gap")
            elif matches:
                stats.notes.append(f"{where_txt} is stale ({reason}): an older run's entry; its record "
                                   "survives after the live end and is given marked stale")
                if opts.body != "none":
                    rec = live.locate(e.commitlog_offset, True)[1]
            else:
                stats.notes.append(f"{where_txt} is stale ({reason}): an older run's entry whose record was "
                                   "overwritten; nothing returned for it")
                continue
            if rec is None:
                stats.damage(f"{where_txt} points where no record starts")
                continue
            row = record_row(rec, opts.body)
            row["cq_queue_offset"] = e.index
            yield row


def _in_time(ts, opts):
    if opts.time_from is not None and ts < opts.time_from:
        return False
    if opts.time_to is not None and ts > opts.time_to:
        return False
    if opts.key and opts.begin is not None and ts < opts.begin:
        return False
    if opts.key and opts.end is not None and ts > opts.end:
        return False
    return True


def _match(rec, opts) -> bool:
    m = rec.m
    if opts.topic is not None and m["Topic"] != opts.topic:
        return False
    if opts.key is not None and opts.key not in m["Keys"]:
        return False
    if opts.msg_id is not None and m["MessageID"] != opts.msg_id:
        return False
    return _in_time(m["StoreTimestamp"], opts)


def _scan(store, opts, stats):
    n = 0
    for item in walk(store, carve_stale=opts.include_stale, with_body=opts.body != "none"):
        if isinstance(item, Damage):
            item = damage_finding(item)
            if item.code in RESTART_CODES:      # a restart's shape, not damage: a note, not exit 1
                stats.notes.append(f"{item.code}: {item.message}")
            elif item.severity != INFO:
                stats.damage(f"{item.code}: {item.file}@{item.position}: {item.message}")
            continue
        stats.messages += not item.stale
        if _match(item, opts):
            yield record_row(item, opts.body)
            n += 1
            if opts.key and n >= opts.max:
                return


def _by_index(store, files, opts, stats):
    """Walk the key's hash chain in each index file (newest entry first), newest file first."""
    h = fnv1a32(opts.key.encode("utf-8"))
    live = LiveLog(store)
    seen = set()
    n = 0
    for p in sorted(files, reverse=True):
        data = CQ.open_index_bytes(p)
        if len(data) < F.INDEX_HEADER_SIZE:
            stats.damage(f"{p}: index file shorter than its header")
            continue
        hdr = F.IndexHeader.parse(data[:F.INDEX_HEADER_SIZE])
        slots, count = hdr.hashSlotCount, hdr.indexCount
        ebase = F.INDEX_HEADER_SIZE + 4 * slots
        if slots <= 0 or ebase + 20 * count > len(data):
            stats.damage(f"{p}: index header does not fit the file")
            continue
        (cur,) = struct.unpack_from(">i", data, F.INDEX_HEADER_SIZE + 4 * (h % slots))
        steps = 0
        while 0 <= cur < count and steps <= count:
            steps += 1
            kh, off, _td, nxt = struct.unpack_from(">Iqii", data, ebase + 20 * cur)
            if kh == h and off not in seen:
                seen.add(off)
                where, rec = live.locate(off, opts.body != "none")
                if rec is not None and where != "start":
                    stats.notes.append(f"{p}: index entry {cur} points at offset {off}, which is not live data "
                                       "(an older run's record): skipped; --include-stale searches those")
                    continue
                if rec is not None and _match(rec, opts):
                    yield record_row(rec, opts.body)
                    n += 1
                    if n >= opts.max:
                        return
            if nxt >= cur:
                stats.damage(f"{p}: index chain does not go backwards at entry {cur}")
                break
            cur = nxt
