"""The checks of one commitlog event (message, BLANK, damage, end of data) and the findings they make; shared by
the one-process walk (:mod:`.commitlog`) and the range tasks (:mod:`.ranges`)."""
from __future__ import annotations

from collections.abc import Iterator

from mqtool.findings import ERROR, INFO, WARNING, Finding, born_finding, born_plausible
from mqtool.rocketmq.records import Blank, Message, prop_crc_digits, unit_damage
from mqtool.rocketmq.scan import Damage, End
from mqtool.rocketmq.verify.context import _Ctx
from mqtool.rocketmq.verify.dispatched import _note_dispatch, queue_step


def _flush_pending(ctx: _Ctx, pending: list) -> Iterator[Finding]:
    for fd in pending:
        ctx.summary.add(fd)
        yield fd
    pending.clear()


def _check_end(ctx: _Ctx, seg, ev: End, last_seg: bool, saw_blank: bool, has_data: bool,
               pending: list) -> Iterator[Finding]:
    if ev.reason == "zero-fill":
        if has_data:
            ctx.data_end = ev.offset
        if last_seg:
            what = ("preallocated segment, never written" if ev.position == 0 else
                    f"data ends at position {ev.position}; the rest ({seg.size - ev.position} bytes) is zero fill")
            yield ctx.f(INFO, "zero-fill", ev.file, ev.position, ev.offset, what)
        elif has_data:
            pending.append(Finding(WARNING, "missing-blank", ev.file, ev.position, ev.offset,
                                   "segment ends in zero fill without a BLANK unit, yet later segments hold data "
                                   "(the broker always closes a full segment with BLANK)"))
        else:
            yield ctx.f(WARNING, "segment-unused", ev.file, 0, seg.base,
                        "an all-zero segment between others: its data was lost or never written")
    elif ev.reason == "eof":
        if has_data or last_seg:
            ctx.data_end = ev.offset     # later segments with data move it on
        if not saw_blank and not last_seg:
            pending.append(Finding(WARNING, "missing-blank", ev.file, ev.position, ev.offset,
                                   "segment has no BLANK end unit, yet later segments hold data"))
    elif ev.reason == "blank":
        ctx.data_end = seg.end
    if ev.trailing_nonzero >= 0:
        yield ctx.f(WARNING, "data-after-end", ev.file, ev.trailing_nonzero, seg.base + ev.trailing_nonzero,
                    "non-zero bytes after the end of data (stale data from a truncation or reuse)")


def _check_message(ctx: _Ctx, m: Message, expected_next: dict) -> Iterator[Finding]:
    for code, text, expected, actual in unit_damage(m):     # damaged bytes: info counts them too
        yield ctx.f(ERROR, code, m.file, m.position, m.offset, text, expected, actual,
                    span=(m.offset, m.offset + m.size))
    try:
        m.props_raw.decode("utf-8")
        m.topic_raw.decode("utf-8")
    except UnicodeDecodeError as e:
        yield ctx.f(WARNING, "not-utf8", m.file, m.position, m.offset, f"topic or properties are not UTF-8: {e}")
    digits = prop_crc_digits(m)
    if digits is not None and not digits.isdigit():
        yield ctx.f(ERROR, "prop-crc-malformed", m.file, m.position, m.offset,
                    "__CRC32# property is not 10 digits", None, digits.decode("latin-1"))
    if not born_plausible(m.born_timestamp, m.store_timestamp):
        fd = born_finding(m.file, m.position, m.offset, m.born_timestamp, m.store_timestamp)
        ctx.summary.add(fd)
        yield fd
    if ctx.xref is not None:      # what the consumequeue and index checks compare (verify/native_lane.new_xref)
        ctx.xref.add(m.offset, m.size, m.topic_raw, m.queue_id, m.queue_offset, m.store_timestamp, m.props_raw)
    key = _note_dispatch(ctx, m)
    if key is not None:
        exp = expected_next.get(key)
        if exp is not None and m.queue_offset != exp:
            yield _queue_offset_finding(ctx, key, exp, m.file, m.position, m.offset, m.queue_offset,
                                        ctx.queue_end.get(key))
        expected_next[key] = m.queue_offset + queue_step(m)
        ctx.queue_end[key] = m.offset + m.size


def _queue_offset_finding(ctx: _Ctx, key, exp: int, file, position, offset, queue_offset,
                          prev_end: int | None) -> Finding:
    """``prev_end``: where the queue's previous message ends (None: not known here), the start of the range
    whose damage explains a gap (:mod:`mqtool.causes`)."""
    gap = queue_offset > exp
    return ctx.f(WARNING, "queue-offset-gap" if gap else "queue-offset-repeat", file, position, offset,
                 f"queue {key[0]}/{key[1]}: expected queue offset {exp}, found {queue_offset}", exp, queue_offset,
                 lost_from=prev_end if gap else None)


def _shift_finding(ctx: _Ctx, delta: int, file, position, offset, physical_offset) -> Finding:
    return ctx.f(ERROR, "physical-offset-mismatch", file, position, offset,
                 f"stored PHYSICALOFFSET {physical_offset} differs from the real offset by "
                 f"{delta} bytes: stale data, or bytes inserted/removed before it", offset, physical_offset)


def _damage_finding(ctx: _Ctx, ev: Damage) -> Finding:
    return ctx.f(ERROR, ev.code, ev.file, ev.position, ev.offset,
                 f"{ev.message}; skipped {ev.length} bytes to the next valid unit", ev.expected, ev.actual,
                 span=(ev.offset, ev.offset + ev.length))


def _blank_findings(ctx: _Ctx, ev: Blank, seg_size: int, last_seg: bool) -> Iterator[Finding]:
    left = seg_size - ev.position
    if ev.size != left:
        yield ctx.f(ERROR, "blank-size-mismatch", ev.file, ev.position, ev.offset,
                    f"BLANK unit claims {ev.size} bytes, {left} are left in the segment", left, ev.size)
    elif last_seg:
        yield ctx.f(INFO, "blank-in-last-segment", ev.file, ev.position, ev.offset,
                    "the last segment is full (BLANK at its end); the broker had not created the next one yet")
