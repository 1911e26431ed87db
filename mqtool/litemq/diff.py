"""``mqtool diff`` for LiteMQ: two data directories (or two commitlog directories).

Records are aligned by their global commitlog offset (file index × file size + position); same-named files
are compared byte by byte first and decoded only in the windows around their differences
(:mod:`mqtool.diffcore`). Each file's records are its length-prefix chain up to
where the chain ends (zeros, or bytes that are no record: reported as damaged when the other copy has a
record there). Consume queues are compared entry by entry (by queue offset).
"""
from __future__ import annotations

from typing import Iterator

from mqtool.diffcore import Side, Tally, Unit, bytes_field, damaged_unit, diff_keyed, diff_log, row_fields, \
    same_file
from mqtool.io import first_nonzero, map_input
from mqtool.litemq.indexfiles import read_queue
from mqtool.litemq.records import CQEntry
from mqtool.litemq.rows import record_row
from mqtool.litemq.scan import hop, live_record_at
from mqtool.litemq.store import Store, commitlog_segments, list_queues, resolve

WHERE = "commitlog"


def step(buf, p: int) -> int | None:
    """The boundary after the record at ``p`` (its length prefix), None where no sound record starts."""
    nxt, ok = hop(buf, p, len(buf), p + 1)
    return nxt if ok and nxt > p else None


def units(seg, start: int, stop: int | None = None) -> Iterator[Unit]:
    """The records of one file from the record boundary ``start`` up to the boundary ``stop`` or the end of
    its chain; bytes after that end that are not zero are one damaged unit."""
    with map_input(seg.path, ranged=True) as mi:      # a remote file: parse_record_at fetches each record
        buf, n = mi.buf, len(mi.buf)
        pos = start
        end = n if stop is None else min(n, stop)
        while pos < end:
            rec, prob = live_record_at(buf, pos, n, seg, seg.name)
            if rec is None:
                if prob[0] != "zero-length" and first_nonzero(buf, pos, n) >= 0:
                    yield damaged_unit(buf, seg.base + pos, pos, n - pos, str(seg.path), f"{prob[0]}: {prob[1]}")
                return
            rec.body = bytes(buf[rec.body_slice[0]:rec.body_slice[1]])
            yield Unit(rec.offset, rec.offset, 1, buf[pos:pos + rec.size], rec, str(seg.path), pos)
            pos += rec.size


def compare(ua: Unit, ub: Unit) -> list:
    """The fields of two records at one offset that differ (the dump row's fields, the body as base64)."""
    ra, rb = ua.obj, ub.obj
    out = row_fields(ua.offset, record_row(ra), record_row(rb))
    if ra.body != rb.body:
        out.append(bytes_field(ua.offset, "body", ra.body, rb.body))
    return out


def _side(store: Store) -> Side:
    segs, _ = commitlog_segments(store)
    return Side({s.base: s for s in segs})


def diff(a: str, b: str, tally: Tally, opts) -> Iterator[dict]:
    sa, sb = resolve(a), resolve(b)
    yield from diff_log(tally, _side(sa), _side(sb), path_of=lambda s: s.path, size_of=lambda s: s.size,
                        step=step, units=units, compare=compare, where=WHERE,
                        progress_enabled=opts.progress, label="diff commitlog")
    if opts.index:
        yield from _diff_queues(tally, sa, sb)


def _cq_entries(store: Store, q):
    if q is None:
        return
    for e in read_queue(store, q):
        if isinstance(e, CQEntry):
            yield e.index, {"commitlog_offset": e.commitlog_offset, "size": e.size, "tag_hash": e.tag_hash,
                            "timestamp": e.timestamp}, e.file, e.position


def _diff_queues(tally: Tally, sa: Store, sb: Store) -> Iterator[dict]:
    qa = {(q.topic, q.queue_id): q for q in list_queues(sa)}
    qb = {(q.topic, q.queue_id): q for q in list_queues(sb)}
    for key in sorted(set(qa) | set(qb)):
        x, y = qa.get(key), qb.get(key)
        if x is not None and y is not None and [f.name for f in x.files] == [f.name for f in y.files] \
                and all(same_file(f.path, g.path) for f, g in zip(x.files, y.files)):
            continue
        yield from diff_keyed(tally, "cq", f"{key[0]}/{key[1]}", _cq_entries(sa, x), _cq_entries(sb, y))
