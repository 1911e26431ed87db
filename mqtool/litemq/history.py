"""Consumequeue entries against the live commitlog: which ones are remnants of an older run.

After a restart LiteMQ rewrites the commitlog from offset 0 of file 0 and each queue from entry 0 (its
recovery globs ``*.data`` and finds nothing; /work/shared/reference/litemq.md "Restart behaviour"). When the
new run writes fewer messages, the older run's entries after the new run's count stay in the queue files,
still non-zero, still pointing at the older run's offsets. Such an entry is **stale** when

* it points past the live end of the log (or into a file the live chain never reaches), or
* it points at a live record whose topic, queue or size does not match the entry (overwritten), or
* it points inside a live record (no record starts there).

The record a stale entry pointed at may survive after the live end (then it is the older run's record,
readable as a carved stale record) or be gone (overwritten).
"""
from __future__ import annotations

from bisect import bisect_right

from mqtool.findings import INFO, Finding
from mqtool.io import map_input
from mqtool.litemq.store import Store, commitlog_segments
from mqtool.options import ScanStats

#: Why an entry is stale (the ``stale_reason`` of a consumequeue row).
PAST_END = "past-end"            # at or after the live end of the commitlog
OVERWRITTEN = "overwritten"      # a live record starts there, of another topic/queue/size
INSIDE_RECORD = "inside-record"  # inside a live record: no record starts there

#: Walk findings that describe a restart over old data (warnings about history, not damaged bytes).
RESTART_CODES = frozenset({"overwritten-record", "stale-records"})


def stale_reason(e, where: str, rec=None) -> str | None:
    """Why entry ``e`` (a CQEntry) is stale, None when it matches the live log.

    ``where`` is ``"start"`` (a live record starts at the entry's offset; ``rec`` = its (topic, queue_id,
    size)), ``"inside"`` (inside a live record) or ``"past-end"``."""
    if where == "past-end":
        return PAST_END
    if where == "inside":
        return INSIDE_RECORD
    topic, queue_id, size = rec
    if topic != e.topic or queue_id != e.queue_id or size != e.size:
        return OVERWRITTEN
    return None


class LiveLog:
    """Answers "is there a live record at this offset?" without walking the whole log per question: the
    record chain of a file is hopped (length prefixes only, :func:`mqtool.litemq.ranges.hop`) from the nearest
    record boundary already known, one remembered every :data:`MARK_EVERY` records, so entries in any order
    cost about one pass over each file (and memory of one int per ``MARK_EVERY`` records)."""

    MARK_EVERY = 64

    def __init__(self, store: Store):
        self.store = store
        self.segs, self.fs = commitlog_segments(store)
        by_index = {s.index: s for s in self.segs}
        self._seg = by_index
        self._marks: dict[int, list[int]] = {}     # segment index -> known chain boundaries, ascending
        self._broken: dict[int, int] = {}          # segment index -> where its chain breaks (once found)
        self._end_ts = False                        # store time of the last live record (False: not read yet)
        self._reach_all = None                      # the files the live chain reaches (computed when asked)

    @property
    def _reach(self) -> set:
        """The files the live chain runs through: files 0, 1, ... while each is exactly full."""
        if self._reach_all is None:
            self._reach_all = set()
            if self.segs and self.store.kind != "segment":
                from mqtool.litemq.scan import _full

                i = self.segs[0].index
                while i in self._seg:
                    self._reach_all.add(i)
                    if not _full(self._seg[i]):
                        break
                    i += 1
            elif self.segs:
                self._reach_all.add(self.segs[0].index)
        return self._reach_all

    def _reaches(self, idx: int) -> bool:
        """``idx in self._reach``, judging only the files before ``idx`` (whether a file is exactly full is a
        walk of its whole chain: a question about the file itself does not need it)."""
        if self._reach_all is not None or not self.segs or self.store.kind == "segment":
            return idx in self._reach
        from mqtool.litemq.scan import _full

        i = self.segs[0].index
        while i < idx:
            if i not in self._seg or not _full(self._seg[i]):
                return False
            i += 1
        return idx == i and idx in self._seg

    def _on_chain(self, idx: int, buf, size: int, pos: int) -> str:
        """"start", "inside" or "past-end" for ``pos`` in the chain of segment ``idx``."""
        from mqtool.litemq.scan import hop

        broken = self._broken.get(idx)
        if broken is not None and pos > broken:
            return "past-end"
        marks = self._marks.setdefault(idx, [0])
        at = marks[bisect_right(marks, pos) - 1]
        steps = 0
        while at < pos:
            nxt, ok = hop(buf, at, size, at + 1)
            if not ok:
                self._broken[idx] = at
                return "start" if at == pos else "past-end"
            at = nxt
            steps += 1
            if steps % self.MARK_EVERY == 0 and at > marks[-1]:
                marks.append(at)
        return "start" if at == pos else "inside"

    @property
    def usable(self) -> bool:
        return bool(self.segs) and self.fs > 0

    def locate(self, offset: int, with_body: bool = False):
        """``(where, record)``: where is ``"start"`` (a live record starts at ``offset``; record = it),
        ``"inside"`` (inside a live record) or ``"past-end"`` (record = an older run's record that still
        starts there, state ``stale``, or None)."""
        from mqtool.litemq.scan import live_record_at, parse_record_at

        if not self.usable or offset < 0:
            return "past-end", None
        seg = self._seg.get(offset // self.fs)
        if seg is None:
            return "past-end", None
        pos = offset - seg.base
        name = self.store.display(seg.path)
        with map_input(seg.path, ranged=True) as mi:      # remote: hop() and parse_record_at fetch what they read
            buf = mi.buf
            size = len(buf)
            where = self._on_chain(seg.index, buf, size, pos) if self._reaches(seg.index) else "past-end"
            if where == "start":
                rec, _ = live_record_at(buf, pos, size, seg, name)
                if rec is None:
                    where = "past-end"    # the live chain ends here (the length disagrees with the fields)
            if where == "past-end":
                rec, _ = parse_record_at(buf, pos, size, seg, name)
                if rec is not None:    # the walk's rule: older than the live data = stale, else behind damage
                    end_ts = self._last_live_ts()
                    rec.state = "stale" if end_ts is not None and rec.m["StoreTimestamp"] < end_ts else "after-gap"
            elif where == "inside":
                rec = None
            if rec is not None and with_body:
                rec.body = bytes(buf[rec.body_slice[0]:rec.body_slice[1]])
            return where, rec

    def _last_live_ts(self) -> int | None:
        """StoreTimestamp of the last record of the live chain (the walk compares carved records with the
        newest live one; in one run store time only grows, so the last is the newest)."""
        if self._end_ts is False:
            from mqtool.litemq.scan import parse_record_at

            self._end_ts = None
            last = max(self._reach, default=None)
            if last is not None:
                from mqtool.litemq.scan import hop

                seg = self._seg[last]
                with map_input(seg.path, ranged=True) as mi:      # remote: fetched where read (hop, parse)
                    buf, size = mi.buf, len(mi.buf)
                    self._on_chain(last, buf, size, size)          # finds where the chain breaks
                    end = self._broken.get(last, size)
                    marks = self._marks.get(last, [0])
                    at, prev = marks[max(bisect_right(marks, end - 1) - 1, 0)], None
                    while at < end:                                # the record before the end
                        prev = at
                        at, ok = hop(buf, at, size, at + 1)
                        if not ok:
                            break
                    if prev is not None:
                        rec, _ = parse_record_at(buf, prev, size, seg, self.store.display(seg.path))
                        if rec is not None:
                            self._end_ts = rec.m["StoreTimestamp"]
        return self._end_ts

    def judge(self, e):
        """``(reason, where, record)`` for a consumequeue entry (reason None: it matches the live log)."""
        where, rec = self.locate(e.commitlog_offset)
        fields = (rec.m["Topic"], rec.m["QueueID"], rec.size) if rec is not None else None
        reason = stale_reason(e, where, fields)
        if reason == PAST_END:
            # this run's entry (not older than the live data, the walk's rule for carved records): its record
            # lies behind damage that ends the live data, or was destroyed by it
            if rec is not None:
                if rec.state == "after-gap" and stale_reason(e, "start", fields) is None:
                    reason = None
            else:
                end_ts = self._last_live_ts()
                if end_ts is not None and e.timestamp >= end_ts:
                    reason = None
        return reason, where, rec


def note_damage(f: Finding, stats: ScanStats) -> None:
    """Count a finding met while dumping as damage, or note a restart's shape (not damage) in ``stats``."""
    if f.severity == INFO:
        return
    where = f.file or "-"
    if f.position is not None:
        where += f"@{f.position}"
    if f.code in RESTART_CODES or f.code in ("no-commitlog", "commitlog-empty"):   # a restart's shape (older
        stats.note(f"{f.code}: {where}: {f.message}")     # records after the live end), or no file to read: not damage
    else:
        stats.damage(f"{f.severity}: {f.code}: {where}: {f.message}")
