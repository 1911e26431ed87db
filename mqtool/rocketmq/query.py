"""RocketMQ ``mqtool query``: find messages offline by key, unique key, message id, offset, queue position
or store time (reference §2 ids, §4 consumequeue, §6 index file).

Selectors (exactly one per query):

* ``--key K`` / ``--unique-key U`` — through the index files: hash ``topic#K`` → slot → chain walk, newest
  file first, like ``IndexService#queryOffset``. The index keeps only a 32-bit hash, so every candidate
  message is read and kept only when it really holds the key (and its entry hash is the hash of *its own*
  ``topic#key``). Without ``--topic`` every topic the store knows (consumequeue directories,
  ``config/topics.json``) is tried.
* ``--msg-id ID`` — decode the offsetMsgId and read the message at its physical offset.
* ``--offset N [--containing]`` — the message starting at (or containing) global offset N.
* ``--topic T --queue Q --queue-offset N [--count C]`` — consumequeue unit(s), then the commitlog, with a
  cross-check of unit against message.
* ``--time-from/--time-to`` — messages by store time; segments that cannot match are skipped using each
  segment's first store timestamp.
* ``--scan`` — the same answers from a full commitlog walk (no index, no consumequeue).

Single messages are read by mapping only the segment that holds them (:class:`MessageReader`); index files
are mapped and only the header, one slot and the chain entries are touched. Problems met on the way go to
``stats.damage`` (they make the exit code 1); informative remarks go to ``stats.notes``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

from formats import rocketmq as F
from mqtool.errors import InputError, NotAStoreError, UsageError
from mqtool.io import first_nonzero, map_input, need_unit
from mqtool.options import QueryOptions, ScanStats
from mqtool.rocketmq import msgid as ids
from mqtool.rocketmq.indexfiles import (IDX_ENTRY, IDX_HEADER, IDX_HEADER_NAMES, Geometry, index_geometries,
                                     index_hash, tags_code)
from mqtool.rocketmq.store import RocketStore, Segment
from mqtool.rocketmq.records import Blank, DecodeFailure, Message, decode_message
from mqtool.rocketmq.scan import CommitLogReader, Damage, SegmentScanner

_CQ = F.CQ_STORE_UNIT_SIZE
_NOT_DISPATCHED = (F.TRANSACTION_PREPARED_TYPE, F.TRANSACTION_ROLLBACK_TYPE)   # no consumequeue unit (§5)
_MIN_TAGS_HASH = -(2 ** 31)        # tagsCode below this is a ConsumeQueueExt address, not a hash (§4.5)


def _note(stats: ScanStats, text: str) -> None:
    """An informative remark on stderr that does not change the exit code."""
    stats.note(text)


# ---- single-message reads ----------------------------------------------------------------------------

class MessageReader(CommitLogReader):
    """Single units at global commitlog offsets (:class:`~mqtool.rocketmq.scan.CommitLogReader`: only the
    segment that holds an offset is mapped), telling BLANK units apart from messages.

    Maps stay open (read-only) until :meth:`close`, so decoded messages can still produce bodies.
    """

    def segment_for(self, offset: int) -> Segment | None:
        loc = self.locate(offset)
        return loc[0] if loc else None

    def read(self, offset: int, check_crc: bool = True):
        """The unit starting at ``offset``: a :class:`Message` or :class:`Blank`.

        Raises :class:`LookupError` when no segment holds the offset and :class:`DecodeFailure` when no
        unit can be framed there (code ``file-unreadable``: the segment cannot be opened).
        """
        loc = self.locate(offset)
        if loc is None:
            raise LookupError(f"offset {offset} is outside every commitlog segment")
        seg, pos = loc
        try:
            buf = self._buf(seg)
        except InputError as e:       # a segment that cannot be opened: no unit here, as message_at says
            raise DecodeFailure("file-unreadable", f"cannot read {seg.path}: {e.message}") from None
        need_unit(buf, pos, cap=self.max_size)      # a remote file: fetch this unit's chunks
        if pos + 8 <= len(buf) and int.from_bytes(buf[pos + 4:pos + 8], "big", signed=True) == F.BLANK_MAGIC_CODE:
            return Blank(seg.path, pos, offset, int.from_bytes(buf[pos:pos + 4], "big", signed=True))
        return decode_message(buf, pos, len(buf), seg.base, seg.path, self.max_size, check_crc)

    def first_store_timestamp(self, seg: Segment) -> int | None:
        try:
            m = self.read(seg.base, check_crc=False)
        except (LookupError, DecodeFailure):
            return None
        return m.store_timestamp if isinstance(m, Message) else None


# ---- index files ---------------------------------------------------------------------------------------

class IndexFileReader:
    """One index file, mapped read-only; only the header, one slot and the chain entries are read."""

    def __init__(self, path: str, geometry: Geometry):
        self.path = path
        self._mi = map_input(path, ranged=True)     # a remote file: fetched where read (need)
        buf = self._mi.buf
        self._mi.need(0, F.INDEX_HEADER_SIZE)
        self.size = len(buf)
        self.valid = self.size >= F.INDEX_HEADER_SIZE
        if self.valid:
            self.header = dict(zip(IDX_HEADER_NAMES, IDX_HEADER.unpack_from(buf, 0)))
        else:
            self.header = {n: 0 for n in IDX_HEADER_NAMES}
        self.slot_num, self.index_num = geometry.slots, geometry.entries
        if self.slot_num is None or F.index_file_size(self.slot_num, self.index_num) != self.size:
            self.valid = False

    def close(self) -> None:
        self._mi.close()

    def may_hold(self, begin: int | None, end: int | None) -> bool:
        """Can this file hold an entry stored in [begin, end]? (header times; 1 s slack for timeDiff).

        Zero header times (never written, or wiped) do not exclude anything; nor does indexCount: a file
        without entries has empty slots, and a damaged header must not hide the entries behind it.
        """
        h = self.header
        if begin is not None and h["endTimestamp"] > 0 and h["endTimestamp"] + 1000 <= begin:
            return False
        if end is not None and h["beginTimestamp"] > 0 and h["beginTimestamp"] > end:
            return False
        return True

    def chain(self, key_hash: int, stats: ScanStats) -> Iterator[tuple[int, int, int, int | None]]:
        """(entry number, keyHash, phyOffset, approx store ms) of the entries in the bucket of
        ``key_hash`` whose keyHash equals it, newest first (the bucket's chain, §6.2)."""
        buf = self._mi.buf
        slot_pos = F.INDEX_HEADER_SIZE + (key_hash % self.slot_num) * F.INDEX_SLOT_SIZE
        self._mi.need(slot_pos, F.INDEX_SLOT_SIZE)
        k = int.from_bytes(buf[slot_pos:slot_pos + 4], "big", signed=True)
        entries_at = F.INDEX_HEADER_SIZE + self.slot_num * F.INDEX_SLOT_SIZE
        begin_ts = self.header["beginTimestamp"]
        limit = self.index_num            # entry numbers 1 .. index_num-1 exist in the file
        ref, ref_pos = f"slot {key_hash % self.slot_num}", slot_pos
        while k > 0:
            if k >= limit:
                stats.damage(f"{self.path}@{ref_pos}: index {ref} points at entry {k}, beyond the file's "
                             f"{limit - 1} entries; chain cut")
                return
            pos = entries_at + k * F.INDEX_ENTRY_SIZE
            self._mi.need(pos, F.INDEX_ENTRY_SIZE)
            h, phy, time_diff, prev = IDX_ENTRY.unpack_from(buf, pos)
            if h == key_hash:
                t = begin_ts + time_diff * 1000 if begin_ts > 0 and time_diff >= 0 else None
                yield k, h, phy, t
            if prev >= k:
                stats.damage(f"{self.path}@{pos}: index entry {k} links to entry {prev} (not older); chain cut")
                return
            ref, ref_pos, k = f"entry {k}", pos, prev


def _open_index_files(store: RocketStore, opts: QueryOptions) -> tuple[list[IndexFileReader], str | None]:
    """The store's index files, or ([], why) when one of them cannot be used (then the index cannot say
    "not there": the caller scans instead)."""
    geos = index_geometries(store.index_files, opts)
    out = []
    for p in store.index_files:
        g = geos.of(p)
        try:
            r = IndexFileReader(p, g)
        except InputError as e:
            why = f"{e}"
        else:
            if r.valid:
                out.append(r)
                continue
            r.close()
            why = g.warning or f"{p}: {r.size} bytes do not hold an index file"
        for r in out:
            r.close()
        return [], why
    return out, None


def _topic_names(path: str) -> set[str]:
    """Topic names of a fastjson topics.json (the keys of ``topicConfigTable``); none if it does not parse."""
    from mqtool.rocketmq.configfiles import load_config

    value, err = load_config(Path(path))
    if err or not isinstance(value, dict) or not isinstance(value.get("topicConfigTable"), dict):
        return set()
    return {str(k) for k in value["topicConfigTable"]}


def known_topics(store: RocketStore) -> list[str]:
    """Topics the store knows without reading the commitlog: consumequeue directories and config/topics.json."""
    topics: set[str] = set()
    if store.consumequeue_dir:
        try:
            topics.update(d for d in os.listdir(store.consumequeue_dir)
                          if os.path.isdir(os.path.join(store.consumequeue_dir, d)))
        except OSError:
            pass
    if store.config_dir:
        for name in ("topics.json", "topics.json.bak"):
            p = os.path.join(store.config_dir, name)
            if os.path.isfile(p):
                topics.update(_topic_names(p))
    return sorted(topics)


def _read_pointed(reader, phy: int, pointer: str, stats: ScanStats) -> Message | None:
    """The message an index entry or consumequeue unit points at; None (and a damage note that starts with
    ``pointer``) when it is outside the commitlog, unreadable or a BLANK unit."""
    try:
        m = reader.read(phy)
    except LookupError:
        stats.damage(f"{pointer}, outside the commitlog")
        return None
    except DecodeFailure as e:
        stats.damage(f"{pointer}, where no message can be read ({e.code}: {e.message})")
        return None
    if not isinstance(m, Message):
        stats.damage(f"{pointer}, a BLANK unit")
        return None
    return m


# ---- the query engine ----------------------------------------------------------------------------------


def _selector(opts: QueryOptions) -> str:
    chosen = []
    if opts.key is not None:
        chosen.append("key")
    if opts.unique_key is not None:
        chosen.append("unique_key")
    if opts.msg_id is not None:
        chosen.append("msg_id")
    if opts.offset is not None:
        chosen.append("offset")
    if opts.queue is not None or opts.queue_offset is not None:
        chosen.append("queue")
    if len(chosen) > 1:
        flags = ", ".join("--" + c.replace("_", "-") for c in chosen)
        raise UsageError(f"choose one selector, not {flags}")
    if not chosen:
        if opts.time_from is None and opts.time_to is None:
            raise UsageError("nothing to look for: give --key, --unique-key, --msg-id, --offset, "
                             "--topic/--queue/--queue-offset or --time-from/--time-to")
        chosen.append("time")
    sel = chosen[0]
    if opts.containing and sel != "offset":
        raise UsageError("--containing goes with --offset")
    if sel == "queue" and (opts.topic is None or opts.queue is None or opts.queue_offset is None):
        raise UsageError("a queue position needs --topic, --queue and --queue-offset")
    if opts.count < 1:
        raise UsageError("--count must be at least 1")
    if opts.max < 1:
        raise UsageError("--max must be at least 1")
    if opts.queue_offset is not None and opts.queue_offset < 0:
        raise UsageError("--queue-offset must not be negative")
    if opts.offset is not None and opts.offset < 0:
        raise UsageError("--offset must not be negative")
    return sel


def _time_window(opts: QueryOptions) -> tuple[int | None, int | None]:
    """Store-time window: --begin/--end (key queries, as mqadmin) and --time-from/--time-to, intersected."""
    lo = [v for v in (opts.begin, opts.time_from) if v is not None]
    hi = [v for v in (opts.end, opts.time_to) if v is not None]
    return (max(lo) if lo else None), (min(hi) if hi else None)


def _in_window(m: Message, lo: int | None, hi: int | None) -> bool:
    return (lo is None or m.store_timestamp >= lo) and (hi is None or m.store_timestamp <= hi)


def run_query(store: RocketStore, opts: QueryOptions, stats: ScanStats) -> Iterator[dict]:
    """Rows (``Message.to_row(opts.body)`` plus ``via`` and selector-specific fields) for one query."""
    sel = _selector(opts)
    if not store.segments:
        raise NotAStoreError("no commitlog segments here (a query reads messages from the commitlog)",
                             store.path)
    reader = MessageReader(store.segments)
    try:
        if sel in ("key", "unique_key"):
            yield from _by_key(store, reader, opts, stats, sel)
        elif sel == "msg_id":
            yield from _by_msg_id(store, reader, opts, stats)
        elif sel == "offset":
            yield from _by_offset(store, reader, opts, stats)
        elif sel == "queue":
            yield from _by_queue(store, reader, opts, stats)
        else:
            yield from _by_time(store, reader, opts, stats)
    finally:
        reader.close()


def _scan(store: RocketStore, stats: ScanStats, segments: list[Segment] | None = None,
          from_offset: int = 0) -> Iterator[Message]:
    """Every message of the given segments (default: all) from ``from_offset`` (a message start) on, damage
    reported to ``stats``."""
    for seg in segments if segments is not None else store.segments:
        if seg.end <= from_offset:
            continue
        start = from_offset - seg.base if seg.base < from_offset else 0
        for ev in SegmentScanner(seg, start=start, resync_start=start == 0).events():
            if isinstance(ev, Message):
                yield ev
            elif isinstance(ev, Damage):
                stats.damage(f"{ev.file}@{ev.position} (offset {ev.offset}): {ev.code}: {ev.message}; "
                             f"skipped {ev.length} bytes")


# -- by key / unique key --

def _key_matcher(sel: str, value: str) -> Callable[[Message], bool]:
    if sel == "key":
        return lambda m: value in m.keys
    return lambda m: value in m.uniq_keys     # a batch item: its own id or its batch's


def _by_key(store, reader, opts, stats, sel):
    value = opts.key if sel == "key" else opts.unique_key.strip()
    if sel == "unique_key":
        ids.decode_uniq_key(value)          # validates the shape (exit 2 on a malformed id)
        value = value.upper()
    if not value:
        raise UsageError("an empty key matches nothing")
    if sel == "key" and F.KEY_SEPARATOR in value:
        raise UsageError(f"a key never contains a space (KEYS is split on spaces): query one key at a time, "
                         f"not {value!r}")
    lo, hi = _time_window(opts)
    holds = _key_matcher(sel, value)
    use_scan = opts.scan
    if not use_scan and not store.index_files:
        _note(stats, "no index files in this store: answering by a full commitlog scan (as with --scan)")
        use_scan = True
    # LMQ queues (%LMQ%…) are consumequeue-only: messages are indexed under their own topic, so they are
    # not tried (an MQTT-style store can hold hundreds of thousands of them).
    topics = [opts.topic] if opts.topic is not None else \
        [t for t in known_topics(store) if not t.startswith(F.LMQ_PREFIX)]
    if not use_scan and not topics:
        _note(stats, "no topic given and none known (no consumequeue/ or config/topics.json): answering by a "
                     "full commitlog scan (as with --scan)")
        use_scan = True
    files = []
    if not use_scan:
        files, why = _open_index_files(store, opts)
        if why:
            _note(stats, f"the index files cannot be used ({why}): answering by a full commitlog scan "
                       f"(as with --scan)")
            use_scan = True
    stats.scanned = use_scan
    if use_scan:
        found = _key_by_scan(store, opts, stats, holds, lo, hi)
    else:
        damaged = stats.damaged
        found = _key_by_index(files, reader, opts, stats, holds, value, topics, lo, hi)
        if stats.damaged > damaged:
            _note(stats, "the index is damaged on the way to this key's entries: answering by a full commitlog "
                       "scan as well")
            stats.scanned = True
            have = {m.offset for m, _ in found}
            found = sorted(found + [t for t in _key_by_scan(store, opts, stats, holds, lo, hi)
                                    if t[0].offset not in have], key=lambda t: t[0].offset)[-opts.max:]
        else:
            found = _key_after_index(store, files, found, opts, stats, holds, lo, hi)
        if not found and sel == "unique_key" and not stats.scanned:
            # The broker indexes one UNIQ_KEY per message, the last: a batch item's own id (stored before its
            # batch's) is in no index, so an index miss does not mean "not there".
            _note(stats, f"unique key {value} is not in the index files; the broker indexes only a message's "
                         "last UNIQ_KEY, and a batch item's own id comes before its batch's: answering by a "
                         "full commitlog scan")
            stats.scanned = True
            found = _key_by_scan(store, opts, stats, holds, lo, hi)
    what = "key" if sel == "key" else "uniq_key"
    rollback = 0
    for m, via in sorted(found, key=lambda t: t[0].offset):
        row = m.to_row(opts.body)
        row["via"] = via
        row["match"] = what
        if via == "scan":
            indexed = (m.sys_flag & F.TRANSACTION_MASK) != F.TRANSACTION_ROLLBACK_TYPE
            row["indexed"] = indexed
            if not indexed:
                rollback += 1
        if sel == "unique_key":
            info = ids.decode_uniq_key(value, m.born_timestamp)
            info.pop("kind")
            info.pop("uniq_key")
            row["uniq_key_info"] = info
        yield row
    if sel == "unique_key" and found:
        m = found[0][0]
        info = ids.decode_uniq_key(value, m.born_timestamp)
        from mqtool.columns import iso_ms

        _note(stats, f"unique key {value}: producer {info['client_ip']} pid {info['pid']}, sent about "
                     f"{iso_ms(info['approx_time_ms'])} (UTC{info['producer_utc_offset_min']:+d} min)")
    if rollback:
        _note(stats, f"{rollback} ROLLBACK message(s) above are not in the broker's index (IndexService skips "
                     f"them): an index query would not return them")


def _key_by_index(files, reader, opts, stats, holds, value, topics, lo, hi):
    """Newest first, files newest first (like ``IndexService#queryOffset``); stop at ``opts.max`` real hits."""
    found: list[tuple[Message, str]] = []
    seen: set[int] = set()
    hashes = {index_hash(f"{t}#{value}"): t for t in topics}
    try:
        for f in reversed(files):               # names are creation times: newest last
            if len(found) >= opts.max:
                break
            if not f.may_hold(lo, hi):
                continue
            cands = []
            for h in hashes:
                for k, kh, phy, t in f.chain(h, stats):
                    if lo is not None and t is not None and t + 1000 <= lo:
                        continue                  # entry time is floor(seconds): stored before `lo`
                    cands.append((k, kh, phy))
            for k, kh, phy in sorted(cands, reverse=True):      # newest entry first across topics
                if phy in seen:
                    continue
                m = _read_pointed(reader, phy, f"{f.path}: index entry {k} points at offset {phy}", stats)
                if m is None:
                    continue
                # A real hit: the message holds the value and this entry is the hash of *its* topic#value.
                if not holds(m) or index_hash(f"{m.topic}#{value}") != kh:
                    continue                      # hash collision: another key in the same bucket
                if opts.topic is not None and m.topic != opts.topic:
                    continue
                seen.add(phy)
                if not _in_window(m, lo, hi):
                    continue
                found.append((m, "index"))
                if len(found) >= opts.max:
                    break
    finally:
        for f in files:
            f.close()
    return found


def _key_after_index(store, files, found, opts, stats, holds, lo, hi):
    """Messages stored after the last indexed one (the index does not cover them: a crash before the index
    caught up, or messages without keys at the end) are found by scanning from there."""
    end = max((f.header["endPhyOffset"] for f in files), default=0)
    segs = store.segments
    if not segs or (end > 0 and end >= segs[-1].end):
        return found
    have = {m.offset for m, _ in found}
    tail, after = [], 0
    for m in _scan(store, stats, from_offset=end):
        after += m.offset != end
        if m.offset not in have and (opts.topic is None or m.topic == opts.topic) and holds(m) \
                and _in_window(m, lo, hi):
            tail.append((m, "scan"))
    if after:
        _note(stats, f"{after} message(s) after the last indexed one (commitlog offset {end}) are not covered by the "
                   f"index files: searched them by a scan")
    return sorted(found + tail, key=lambda t: t[0].offset)[-opts.max:]


def _key_by_scan(store, opts, stats, holds, lo, hi):
    found = []
    for m in _scan(store, stats):
        if opts.topic is not None and m.topic != opts.topic:
            continue
        if holds(m) and _in_window(m, lo, hi):
            found.append((m, "scan"))
    return found[-opts.max:]                    # the newest --max, as the index walk keeps


# -- by message id --

def _by_msg_id(store, reader, opts, stats):
    wanted = ids.split_ids(opts.msg_id)
    if not wanted:
        raise UsageError("an empty --msg-id matches nothing")
    decoded = [ids.decode_offset_msg_id(w) for w in wanted]
    if opts.scan:
        targets = {d["msg_id"]: d for d in decoded}
        for m in _scan(store, stats):
            if m.msg_id in targets:
                row = m.to_row(opts.body)
                row["via"] = "scan"
                yield row
        return
    for d in decoded:
        off = d["physical_offset"]
        hint = ""
        if not ids._plausible_offset_msg_id(d):
            hint = "; it looks like a unique key (UNIQ_KEY): try --unique-key"
        try:
            m = reader.read(off)
        except LookupError:
            _note(stats, f"msgId {d['msg_id']}: offset {off} is not in this store's commitlog "
                         f"({_extent(store)}){hint}")
            continue
        except DecodeFailure as e:
            _note(stats, f"msgId {d['msg_id']}: no message starts at offset {off} ({e.code}: {e.message}){hint}")
            continue
        if not isinstance(m, Message):
            _note(stats, f"msgId {d['msg_id']}: offset {off} holds a BLANK end-of-file unit, not a message{hint}")
            continue
        row = m.to_row(opts.body)
        row["via"] = "msg_id"
        if m.physical_offset != off:
            stats.damage(f"{m.file}@{m.position}: the unit at offset {off} stores PHYSICALOFFSET "
                         f"{m.physical_offset}; not the message this id names")
            continue
        if m.msg_id != d["msg_id"]:
            row["msg_id_store_host"] = d["store_host"]
            _note(stats, f"msgId {d['msg_id']}: the message at offset {off} was stored by {m.store_host}, "
                         f"not {d['store_host']} (store copied from another broker, or a different broker's id)")
        yield row


def _extent(store: RocketStore) -> str:
    segs = store.segments
    return f"segments cover {segs[0].base}..{segs[-1].base + segs[-1].size}" if segs else "no segments"


# -- by physical offset --

def _by_offset(store, reader, opts, stats):
    off = opts.offset
    seg = reader.segment_for(off)
    if seg is None:
        _note(stats, f"offset {off} is not in this store's commitlog ({_extent(store)})")
        return
    if not opts.containing:
        try:
            m = reader.read(off)
        except DecodeFailure as e:
            _note(stats, f"no message starts at offset {off} ({e.code}: {e.message}); "
                         f"--containing finds the one around it")
            return
        if not isinstance(m, Message):
            _note(stats, f"offset {off} holds a BLANK end-of-file unit of {m.size} bytes, not a message")
            return
        row = m.to_row(opts.body)
        row["via"] = "offset"
        yield row
        return
    pos = off - seg.base
    for ev in _walk_to(seg, pos):
        if isinstance(ev, Message):
            if ev.position <= pos < ev.position + ev.size:
                row = ev.to_row(opts.body)
                row["via"] = "offset"
                row["containing"] = off
                yield row
                return
            if ev.position > pos:
                break
        elif isinstance(ev, Blank) and ev.position <= pos:
            _note(stats, f"offset {off} lies in the BLANK end-of-file unit at {seg.base + ev.position}")
            return
        elif isinstance(ev, Damage) and ev.position <= pos < ev.position + ev.length:
            stats.damage(f"{ev.file}@{ev.position} (offset {ev.offset}): offset {off} lies in a damaged range "
                         f"of {ev.length} bytes ({ev.code}: {ev.message})")
            return
    _note(stats, f"offset {off} lies after the end of data in {seg.path}")


def _walk_to(seg: Segment, pos: int) -> Iterator:
    """The events of the walk of ``seg`` from a unit boundary at or before ``pos`` on: no unit is longer than
    the largest message, so the walk of the range that begins that far before ``pos`` (SegmentScanner's range
    mode, whose events from its first unit on are the whole segment walk's) is enough when its first event
    starts at or before ``pos``; else (damage or a fill reaching back further, or no unit found) the segment is
    walked from its start. A remote segment is fetched from there, not from its start."""
    jump = max(0, pos - F.DEFAULT_MAX_MESSAGE_SIZE + 1)
    if jump:
        events = SegmentScanner(seg, start=jump).events()
        first = next(events, None)
        if first is not None and first.position <= pos:
            yield first
            yield from events
            return
        events.close()
    yield from SegmentScanner(seg).events()


# -- by queue position --

def _lmq_offsets(m: Message) -> dict[str, int]:
    """LMQ multi-dispatch: queue topic → its offset (INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET)."""
    disp = m.prop(F.PROPERTY_INNER_MULTI_DISPATCH)
    offs = m.prop(F.PROPERTY_INNER_MULTI_QUEUE_OFFSET)
    if not disp or not offs:
        return {}
    out = {}
    for t, o in zip(disp.split(F.LMQ_DISPATCH_SEPARATOR), offs.split(F.LMQ_DISPATCH_SEPARATOR)):
        try:
            out[t] = int(o)
        except ValueError:
            pass
    return out


def _queue_position(m: Message, topic: str, queue_id: int) -> int | None:
    """Where ``m`` sits in queue ``topic``/``queue_id`` according to the message itself (None: not there)."""
    if m.topic == topic and m.queue_id == queue_id:
        if (m.sys_flag & F.TRANSACTION_MASK) in _NOT_DISPATCHED:
            return None
        return m.queue_offset
    if topic.startswith(F.LMQ_PREFIX) and queue_id == 0:
        return _lmq_offsets(m).get(topic)
    return None


def _by_queue(store, reader, opts, stats):
    topic, qid, first, count = opts.topic, opts.queue, opts.queue_offset, opts.count
    last = first + count - 1
    if opts.scan:
        hits = []
        for m in _scan(store, stats):
            q = _queue_position(m, topic, qid)
            if q is not None and first <= q <= last:
                row = m.to_row(opts.body)
                row["via"] = "scan"
                hits.append((q, m.offset, row))
        for q, _, row in sorted(hits, key=lambda t: (t[0], t[1])):
            row["cq_queue_offset"] = q
            yield row
        return
    queues = store.queues(topic, qid)
    if not queues or not queues[0].files:
        _note(stats, f"no consumequeue files for {topic}/{qid} in this store (--scan reads the commitlog)")
        return
    q = queues[0]
    maps = {}
    try:
        for n in range(first, last + 1):
            byte = n * _CQ
            f = next((s for s in q.files if s.base <= byte < s.base + s.size), None)
            if f is None:
                if n == first:
                    _note(stats, f"queue offset {n} is not in {q.dir} (files cover "
                                 f"{q.files[0].base // _CQ}..{(q.files[-1].base + q.files[-1].size) // _CQ - 1})")
                break
            mi = maps.get(f.path)
            if mi is None:
                mi = maps[f.path] = map_input(f.path, ranged=True)     # a remote file: fetched where read
            pos = byte - f.base
            mi.need(pos, _CQ)
            unit = mi.buf[pos:pos + _CQ]
            if len(unit) < _CQ:
                break
            phy = int.from_bytes(unit[0:8], "big", signed=True)
            size = int.from_bytes(unit[8:12], "big", signed=True)
            tcode = int.from_bytes(unit[12:20], "big", signed=True)
            where = f"{f.path}@{pos}"
            if phy == 0 and size == 0 and tcode == 0:
                if f is q.files[-1] and first_nonzero(mi.buf, pos, len(mi.buf)) < 0:
                    _note(stats, f"{where}: the queue ends before queue offset {n}")
                    break
                _note(stats, f"{where}: queue offset {n} has no unit (a hole: not dispatched, or zeroed)")
                continue
            if phy == 0 and size == F.CQ_BLANK_SIZE and tcode == 0:
                _note(stats, f"{where}: queue offset {n} is a fill unit (the queue starts later)")
                continue
            if phy < 0 or size <= 0:
                stats.damage(f"{where}: queue offset {n}: unit with offset {phy} size {size} is invalid")
                continue
            m = _read_pointed(reader, phy, f"{where}: queue offset {n} points at commitlog offset {phy}", stats)
            if m is None:
                continue
            problems = _unit_vs_message(m, topic, qid, n, size, tcode)
            row = m.to_row(opts.body)
            row["via"] = "consumequeue"
            row["cq_queue_offset"] = n
            row["cq_file"] = f.path
            row["cq_position"] = pos
            row["cq_tags_code"] = tcode
            if problems:
                row["cq_mismatch"] = problems
                stats.damage(f"{where}: queue offset {n} (commitlog offset {phy}) disagrees with the message: "
                             + "; ".join(problems))
            yield row
    finally:
        for mi in maps.values():
            mi.close()


def _unit_vs_message(m: Message, topic: str, qid: int, n: int, size: int, tcode: int) -> list[str]:
    problems = []
    if m.size != size:
        problems.append(f"unit size {size} != TOTALSIZE {m.size}")
    lmq = topic.startswith(F.LMQ_PREFIX) and m.topic != topic
    if lmq:
        pos = _lmq_offsets(m).get(topic)
        if pos is None:
            problems.append(f"message (topic {m.topic}) is not multi-dispatched to {topic}")
        elif pos != n:
            problems.append(f"INNER_MULTI_QUEUE_OFFSET gives {pos} for {topic}, unit is at {n}")
    else:
        if m.topic != topic:
            problems.append(f"message topic {m.topic!r} != {topic!r}")
        if m.queue_id != qid:
            problems.append(f"message QUEUEID {m.queue_id} != {qid}")
        if m.queue_offset != n:
            problems.append(f"message QUEUEOFFSET {m.queue_offset} != {n}")
        if (m.sys_flag & F.TRANSACTION_MASK) in _NOT_DISPATCHED:
            problems.append(f"a {m.transaction} message is never dispatched to a consume queue")
    if m.topic != F.SCHEDULE_TOPIC and tcode >= _MIN_TAGS_HASH:
        want = tags_code(m.tags)
        if want != tcode:
            problems.append(f"tagsCode {tcode} != hash of TAGS {m.tags!r} ({want})")
    return problems


# -- by store time --

def _by_time(store, reader, opts, stats):
    lo, hi = opts.time_from, opts.time_to
    if lo is not None and hi is not None and lo > hi:
        raise UsageError("--time-from is after --time-to")
    segs = store.segments
    if opts.scan:
        chosen = list(segs)
    else:
        firsts = [reader.first_store_timestamp(s) for s in segs]
        chosen = []
        for i, s in enumerate(segs):
            ts = firsts[i]
            nxt = next((t for t in firsts[i + 1:] if t is not None), None)
            if hi is not None and ts is not None and ts > hi:
                continue          # starts after the window (store times grow along the commitlog)
            if lo is not None and nxt is not None and nxt < lo:
                continue          # the next segment starts before the window: this one ends before it too
            chosen.append(s)
    topic = opts.topic
    for m in _scan(store, stats, chosen):
        if topic is not None and m.topic != topic:
            continue
        if _in_window(m, lo, hi):
            row = m.to_row(opts.body)
            row["via"] = "scan" if opts.scan else "time"
            yield row
