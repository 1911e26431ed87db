"""``run_verify``: the commitlog walk (its damage events become findings here), then the consumequeue,
marker and index checks, in order."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mqtool.damage import Damage
from mqtool.findings import ERROR, INFO, WARNING, Finding, Summary
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.store import Store
from mqtool.litemq.records import LiteRecord, fnv1a32, tag_hash
from mqtool.litemq.scan import WalkResult, damage_finding, walk
from mqtool.options import VerifyOptions
from mqtool.columns import iso_ms
from mqtool.litemq.verify.checkpoint import _verify_markers
from mqtool.litemq.verify.consumequeue import _verify_cq
from mqtool.litemq.verify.index import _verify_index
from mqtool.litemq.verify.record import NEVER_FILLED, RecInfo, record_findings
from mqtool.litemq.verify.salvage import _salvage


def run_verify(part: str, store: Store, opts: VerifyOptions, items=None, res: WalkResult | None = None):
    """``verify <part>`` of a store: (findings, summary function). ``items`` (with the ``res`` they fill): what
    the commitlog walk gives, from elsewhere (the ranges folded by mqtool.litemq.verifyplan): damage events,
    stale records, and live records as :class:`Checked` or :class:`LiteRecord`."""
    summary = Summary()
    summary.extra["family"] = "litemq"

    def gen():
        for fnd in _verify(part, store, opts, summary, items, res):
            summary.add(fnd)
            if fnd.code == "unaccounted-bytes" and isinstance(fnd.actual, int):
                summary.skipped_ranges += 1
                summary.skipped_bytes += fnd.actual
            yield fnd

    return gen(), lambda: summary


@dataclass(slots=True)
class Checked:
    """A live record's own findings and what the cross-file checks keep of it (what a range task returns)."""

    position: int
    findings: list
    info: RecInfo
    unset: tuple            # the NEVER_FILLED fields that are 0


def check_record(rec: LiteRecord, max_message_size: int) -> Checked:
    m = rec.m
    return Checked(rec.position, record_findings(rec, max_message_size),
                   RecInfo(rec.offset, rec.size, rec.file, rec.position, m["Topic"], m["QueueID"], m["MessageType"],
                           m["Broadcast"], tag_hash(rec.raw_tags), m["StoreTimestamp"], m["QueueOffset"],
                           frozenset(fnv1a32(k) for k in rec.raw_keys), m["MessageID"],
                           rec.body_slice[0] == rec.body_slice[1]),
                   tuple(k for k in NEVER_FILLED if m[k] == 0))


def _verify(part: str, store: Store, opts: VerifyOptions, summary: Summary, items=None, res=None):
    if res is None:
        res = WalkResult()
    if items is None:
        items = walk(store, carve_stale=True, result=res)
    live: dict[int, RecInfo] = {}
    stale: dict[int, LiteRecord] = {}
    never_zero = Counter()
    order = []
    for item in items:
        if isinstance(item, Damage):
            yield damage_finding(item)
            continue
        if isinstance(item, LiteRecord):
            rec = item
            if rec.stale:
                stale[rec.offset] = rec
                yield Finding(INFO if rec.state == "stale" else ERROR, f"{rec.state}-record", rec.file,
                              rec.position, rec.offset,
                              f"{rec.state} record {rec.m['MessageID']!r} ({rec.m['Topic']}, stored "
                              f"{iso_ms(rec.m['StoreTimestamp'])}) after the end of data")
                continue
            item = check_record(rec, opts.max_message_size)
        summary.messages += 1
        yield from item.findings
        never_zero.update(item.unset)
        live[item.info.offset] = item.info
        order.append(item.info.offset)
    summary.extra.update(end_offset=res.end_offset, stale_records=res.stale, after_gap_records=res.after_gap,
                         commitlog_file_size=res.file_size)
    for k in NEVER_FILLED:
        if never_zero[k]:
            yield Finding(INFO, "field-never-filled", None, None, None,
                          f"{k} is 0 in {never_zero[k]} of {len(live)} record(s): LiteMQ encodes the message "
                          "before it could set this field", 0, never_zero[k])
    if store.kind in ("segment", "commitlog") and part == "store":
        part = "commitlog"   # a commitlog part alone: the cross-file checks would compare against missing files
    abort_present = bool(store.abort_file and store.abort_file.is_file())
    queue_len: dict = {}
    if part in ("store", "consumequeue"):
        cq = CQ.cq_file_size(opts, store)
        summary.extra["cq_file_size"] = cq.to_dict("bytes")
        if cq.warning:
            yield Finding(WARNING, "cq-geometry", "consumequeue", None, None, cq.warning, cq.value,
                          list(cq.candidates))
        yield from _verify_cq(store, live, stale, order, res, abort_present, summary, queue_len, cq.value)
    if part == "store":
        yield from _verify_markers(store, abort_present, summary, queue_len, res.end_offset)
    if part in ("store", "index"):
        yield from _verify_index(store, live, part == "index")
    if opts.salvage_out:
        _salvage(store, opts)
