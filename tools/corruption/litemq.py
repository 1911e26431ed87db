"""LiteMQ adapter for the corruption matrix (see :mod:`tools.corruption` for the contract).

Ground truth comes from a second reader: the construct schemas of :mod:`formats.litemq` parse every record
of the intact store (not mqtool's scanner), and consume queues are parsed the same way.

What LiteMQ's format can and cannot reveal (this decides the expected reports):

* A record is ``[u32 len][message]`` with **no checksum**. Damage is visible only where it breaks the framing
  (length prefix, magic, a string/array length, the +6 length rule), sets a field LiteMQ never fills
  (CommitLogOffset, StoreSize, consume fields), or contradicts the consume queue (topic, QueueID, tags,
  StoreTimestamp, size). A flipped bit in a **body**, or in a free field such as Priority or BornTimestamp, is
  **undetectable by design**: those events are marked ``detectable=False`` and excluded from (a); (b) and (c)
  still apply (nothing may be lost, nothing may be reported).
* LiteMQ's reader stops at the first bad record. mqtool does the same for the *live* data and carves every
  record after that point (``after-gap`` when newer, ``stale`` when older than the live data), so the
  salvage keeps them. The per-record consequences of one break (``after-gap-record``, ``data-after-gap``,
  ``cq-unreachable-record``, ``cq-points-to-stale``, ``stale-records``) are explained only at global offsets at
  or after the break.
* LiteMQ never flushes its key index (``index/`` is empty in every real store), so there is no index entry to
  corrupt: the store yields no ``index-entry-corruption`` event.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from construct import ConstructError

from tools.corruption import Event, Expect, Msg, finding_rows

from formats import litemq as F
from mqtool.options import VerifyOptions

FRAMING = {"bad-length", "bad-magic", "field-overrun", "truncated-length", "length-mismatch", "zeroed-range"}
GAP_CODES = {"after-gap-record", "data-after-gap", "cq-unreachable-record", "cq-points-to-stale", "stale-records",
             "stale-record"}
SEGMENT_CODES = {"segment-size-mismatch", "segment-missing"}
CQ_POINTER_CODES = {"cq-beyond-end", "cq-not-record-start", "cq-unreachable-record", "cq-points-to-stale"}
CQ_CODES = {"cq-entry-missing", "cq-missing-at-tail", "cq-entry-count", "cq-order", "cq-unexpected-entry"}
GARBAGE = bytes((i * 37 + 11) % 256 for i in range(333))
_CQ = struct.Struct(">qiIq")         # formats.litemq.CQ_ENTRY_FIELDS


@dataclass
class LExpect(Expect):
    gap_from: int | None = None      # global offset of the break: after-gap/stale consequences start here
    shift: tuple | None = None       # (lo, hi) global offsets whose bytes moved (garbage insertion)


@dataclass(frozen=True)
class Rec:
    """Byte layout of one intact record (from the construct parse)."""

    msg: Msg
    body: tuple          # (start, end) in the file
    tail: int            # position of the 52-byte fixed tail (QueueID ...)
    topic_at: int        # position of the Topic's first byte
    ts: int


class LiteMQAdapter:
    family = "litemq"

    def __init__(self):
        self._recs: dict[str, list[Rec]] = {}
        self._cq: dict[str, list[tuple]] = {}

    # ---- ground truth (construct schemas) -------------------------------------------------------------
    def stores(self, realdata: Path) -> list[Path]:
        return [p for p in sorted((realdata / "litemq").glob("*/data/broker")) if (p / "commitlog").is_dir()]

    def messages(self, store: Path) -> list[Msg]:
        files = sorted(p for p in (store / "commitlog").iterdir() if p.is_file())
        fsize = max(p.stat().st_size for p in files)
        recs = []
        for p in files:
            data = p.read_bytes()
            base = int(p.name) * fsize
            pos = 0
            while pos + 4 <= len(data):
                (n,) = struct.unpack_from(">I", data, pos)
                if n == 0 or pos + 4 + n > len(data):
                    break
                try:
                    m = F.Message.parse(data[pos + 4:pos + 4 + n])
                except ConstructError:
                    break
                rel = f"commitlog/{p.name}"
                ident = self._ident(m.MessageID, m.Topic, m.QueueID, m.StoreTimestamp, len(m.Body))
                msg = Msg(ident, rel, pos, 4 + n, base + pos, (m.Topic, m.QueueID))
                strs = lambda xs: sum(2 + len(x.encode()) for x in xs)   # noqa: E731
                body_start = (pos + 4 + 4 + 2 + len(m.MessageID.encode()) + 2 + len(m.Topic.encode())
                              + 4 + strs(m.Tags) + 4 + strs(m.Keys) + 4
                              + sum(2 + len(x.key.encode()) + 2 + len(x.value.encode()) for x in m.Properties) + 4)
                recs.append(Rec(msg, (body_start, body_start + len(m.Body)), pos + 4 + n - F.TRAILING_PAD
                                - F.FIXED_TAIL_SIZE, pos + 4 + 4 + 2 + len(m.MessageID.encode()) + 2,
                                m.StoreTimestamp))
                pos += 4 + n
        self._recs[str(store)] = recs
        cq = []
        for p in sorted((store / "consumequeue").glob("*/*/*")):
            data = p.read_bytes()
            for i in range(len(data) // F.CQ_ENTRY_SIZE):
                off, size, th, ts = _CQ.unpack_from(data, i * F.CQ_ENTRY_SIZE)
                if size <= 0:
                    break
                cq.append((str(p.relative_to(store)), i * F.CQ_ENTRY_SIZE, off, size, th, ts))
        self._cq[str(store)] = cq
        return [r.msg for r in recs]

    @staticmethod
    def _ident(msg_id, topic, qid, ts, body_len) -> tuple:
        return (msg_id, topic, qid, ts, body_len)

    # ---- verify ---------------------------------------------------------------------------------------
    def verify(self, store: Path, salvage_dir: Path):
        from mqtool.litemq.store import resolve
        from mqtool.litemq.verify import run_verify

        salvage_dir.mkdir(parents=True, exist_ok=True)
        out = salvage_dir / "salvaged.ndjson"
        gen, _ = run_verify("store", resolve(store), VerifyOptions(salvage_out=str(out), progress=False))
        rows = finding_rows(gen, store)
        got = set()
        if out.exists():
            for line in out.read_text().splitlines():
                r = json.loads(line)
                got.add(self._ident(r["msg_id"], r["topic"], r["queue_id"], r["store_timestamp"], r["body_size"]))
        return rows, got

    def explained(self, f: dict, e: Expect, msgs) -> bool:
        code, file, off = f["code"], f["file"] or "", f.get("offset")
        if code in GAP_CODES and getattr(e, "gap_from", None) is not None and off is not None and off >= e.gap_from:
            return True
        # consume-queue entries pointing into bytes that an insertion moved (they point at the old place)
        if code in CQ_POINTER_CODES and e.shift and off is not None and e.shift[0] <= off < e.shift[1]:
            return True
        if code in SEGMENT_CODES and (file in e.resized or file in e.neighbours):
            return True
        if code in CQ_CODES and off is not None and any(lo <= off < hi for lo, hi in e.explain_offsets):
            return True
        # a changed StoreTimestamp moves the "newest live time" that the next records are compared with
        if code == "store-time-regression" and e.touched:
            return True
        return False

    # ---- damage events ----------------------------------------------------------------------------------
    def events(self, store: Path, msgs: list[Msg]) -> list[Event]:
        recs = self._recs[str(store)]
        cq = self._cq[str(store)]
        by_file: dict[str, list[Rec]] = {}
        for r in recs:
            by_file.setdefault(r.msg.file, []).append(r)
        files = sorted(by_file)
        all_segs = sorted(f"commitlog/{p.name}" for p in (store / "commitlog").iterdir())
        fsize = (store / files[0]).stat().st_size
        cq_of = {}
        for ent in cq:
            cq_of.setdefault(ent[2], []).append(ent)
        evs: list[Event] = []

        def spread(cands: list, n: int) -> list:
            if not cands:
                return []
            idx = sorted({min(len(cands) - 1, (k + 1) * len(cands) // (n + 1)) for k in range(n)})
            return [cands[i] for i in idx]

        def expect(reports, touched, removed=(), resized=(), gap_from=None, extra=(), detectable=True, note=""):
            e = LExpect(list(reports), list(touched), list(removed), resized=list(resized), gap_from=gap_from,
                        detectable=detectable, note=note)
            for f in list(removed) + list(resized):
                i = all_segs.index(f)
                e.neighbours += all_segs[max(0, i - 1):i + 2]
            hit = [m for m in msgs if m.file in removed or
                   any(f == m.file and lo < m.position + m.size and hi > m.position for f, lo, hi in touched)]
            for m in hit + list(extra):
                e.explain_offsets.append((m.offset, m.offset + m.size))
                e.explain_queues.add(m.queue)
            return e

        single = [r for r in recs if len(cq_of.get(r.msg.offset, [])) == 1]
        not_first = [r for r in single if r is not recs[0]]

        # header bit flips: (field, byte position in the record, mask, codes, where the report must be)
        flips = []
        for field, pick, at, mask, codes, where in (
                ("len", spread(recs, 6)[0], lambda r: r.msg.position + 2, 0x40,
                 {"bad-length", "length-mismatch", "field-overrun"}, "rec"),
                ("magic", spread(recs, 6)[1], lambda r: r.msg.position + 7, 0x08, {"bad-magic"}, "rec"),
                ("MessageID-len", spread(recs, 6)[2], lambda r: r.msg.position + 9, 0x01,
                 {"field-overrun", "length-mismatch", "bad-length"}, "rec"),
                ("CommitLogOffset", spread(recs, 6)[3], lambda r: r.tail + 4 + 12 - 1, 0x01,
                 {"commitlog-offset-mismatch"}, "rec"),
                ("Topic", spread(single, 3)[0], lambda r: r.topic_at, 0x20, {"cq-topic-mismatch"}, "cq"),
                ("QueueID", spread(single, 3)[1], lambda r: r.tail + 3, 0x01, {"cq-queue-mismatch"}, "cq"),
                ("StoreTimestamp", spread(not_first, 3)[2], lambda r: r.tail + 24 + 3, None,
                 {"cq-timestamp-skew"}, "cq")):
            flips.append((field, pick, at(pick), mask, codes, where))
        for field, r, at, mask, codes, where in flips:
            if mask is None:            # clear the highest set bit of that byte: the time goes back >= 2^32 ms
                b = (store / r.msg.file).read_bytes()[at]
                mask = 1 << (b.bit_length() - 1)
            if where == "rec":
                rep = [(codes, r.msg.file, r.msg.position)]
            else:
                ent = cq_of[r.msg.offset][0]
                rep = [(codes, ent[0], ent[1])]
            evs.append(Event("header-bitflip", f"{field}@{r.msg.file}:{r.msg.position}",
                             _flip(r.msg, at, mask, rep, expect)))
        r = spread(recs, 5)[4]           # a field no check covers: undetectable by design
        evs.append(Event("header-bitflip", f"Priority@{r.msg.file}:{r.msg.position}",
                         _flip(r.msg, r.body[1] + 1, 0x01, [], expect, detectable=False,
                               note="no checksum; Priority is not cross-checked")))
        # body bit flips: undetectable (LiteMQ has no CRC)
        with_body = [r for r in recs if r.body[1] - r.body[0] > 0]
        for r in spread(with_body, 3):
            mid = (r.body[0] + r.body[1]) // 2
            evs.append(Event("body-bitflip", f"{r.msg.file}:{r.msg.position}",
                             _flip(r.msg, mid, 0x04, [], expect, detectable=False,
                                   note="LiteMQ records carry no checksum: a body bit flip cannot be seen")))
        # truncation in the middle of a record: last file with data, and a middle one
        for f in [files[-1]] + ([files[len(files) // 2]] if len(files) >= 3 else []):
            r = spread(by_file[f], 1)[0]
            evs.append(Event("truncate-mid-record", f"{f}:{r.msg.position + r.msg.size // 2}",
                             _truncate(r.msg, fsize, expect)))
        r = spread(by_file[files[-1]], 3)[2]          # edge: only 2 bytes of the length prefix left
        evs.append(Event("truncate-mid-record", f"{r.msg.file}:{r.msg.position + 2}",
                         _truncate(r.msg, fsize, expect, cut=r.msg.position + 2,
                                   codes={"truncated-length"})))
        # zeroed 4 KiB pages: the first record whose length prefix lies in the page reads as the end of data
        for f in files[:-1] + [files[-1]]:
            data_end = max(x.msg.position + x.msg.size for x in by_file[f])
            for page in sorted({(data_end // 2) // 4096 * 4096, 0} if f == files[len(files) // 2]
                               else {(data_end // 2) // 4096 * 4096}):
                evs.append(Event("zero-page", f"{f}:{page}", _zero_page(f, page, by_file[f], recs, expect)))
        # garbage inserted at a record boundary (early, late, first of a file) and inside a record
        mid_f = files[1] if len(files) > 1 else files[0]
        for r, inside in ((spread(by_file[mid_f], 1)[0], False), (spread(by_file[files[-1]], 3)[2], False),
                          (spread(by_file[files[0]], 2)[1], True), (by_file[mid_f][0], False)):
            evs.append(Event("garbage-insert", f"{r.msg.file}:{r.msg.position}{'+mid' if inside else ''}",
                             _insert(r.msg, inside, fsize, expect)))
        # deletion of a middle segment
        for f in files[1:-1][:2]:
            nxt = all_segs[all_segs.index(f) + 1]
            evs.append(Event("delete-middle-segment", f, _delete(f, nxt, by_file[f], expect)))
        # stale record overwrite: a shorter record written over a longer one, the old tail left behind
        small = min(x.msg.size for x in recs)
        for r in spread([x for x in recs if x.msg.size > small + 64 and x is not recs[-1]], 2):
            donor = min((x for x in recs if x.msg.size < r.msg.size - 16 and x.msg.queue != r.msg.queue),
                        key=lambda x: x.msg.size, default=None)
            if donor is not None:
                evs.append(Event("stale-overwrite", f"{r.msg.file}:{r.msg.position}", _stale(r.msg, donor.msg, expect)))
        # consume queue entry corruption (every field is checked against the record it points at)
        files_cq = sorted({e[0] for e in cq})
        ent = next((e for e in cq if e[1] == 2 * F.CQ_ENTRY_SIZE and e[2] in {x.msg.offset for x in single}), None)
        if ent is not None:
            for label, col, delta, codes in (("offset+1", 0, 1, {"cq-not-record-start"}),
                                             ("size+7", 1, 7, {"cq-size-mismatch"}),
                                             ("tagHash^5", 2, None, {"cq-tag-hash-mismatch"}),
                                             ("timestamp+1h", 3, 3_600_000, {"cq-timestamp-skew"})):
                evs.append(Event("cq-entry-corruption", f"{ent[0]}:{ent[1]}:{label}",
                                 _cq(ent[0], ent[1], col, delta, codes, ent[2], msgs, expect)))
        assert files_cq is not None
        return evs


def _flip(m: Msg, at: int, mask: int, reports, expect, detectable=True, note=""):
    def apply(copy: Path) -> Expect:
        p = copy / m.file
        data = bytearray(p.read_bytes())
        data[at] ^= mask
        p.write_bytes(data)
        gap = m.offset if any(c & FRAMING for c, _, _ in reports) else None
        return expect(reports, [(m.file, at, at + 1)], gap_from=gap, detectable=detectable, note=note)

    return apply


def _truncate(m: Msg, size: int, expect, cut: int | None = None, codes=None):
    cut = m.position + m.size // 2 if cut is None else cut

    def apply(copy: Path) -> Expect:
        p = copy / m.file
        p.write_bytes(p.read_bytes()[:cut])
        return expect([(codes or {"bad-length", "truncated-length"}, m.file, m.position)], [(m.file, cut, size)],
                      resized=[m.file], gap_from=m.offset)

    return apply


def _zero_page(f: str, page: int, seg: list, recs: list, expect):
    def apply(copy: Path) -> Expect:
        p = copy / f
        data = bytearray(p.read_bytes())
        old = bytes(data[page:page + 4096])
        data[page:page + 4096] = bytes(len(old))
        p.write_bytes(data)
        changed = [i for i, b in enumerate(old) if b]
        if not changed:
            return expect([], [], detectable=False, note="the page was zero already")
        lo, hi = page + changed[0], page + changed[-1] + 1
        starts = [r for r in seg if page <= r.msg.position < page + 4096]
        later = [r for r in recs if r.msg.offset > (starts[0].msg.offset if starts else 1 << 62)]
        inner = [r for r in seg if r.msg.position < page and r.msg.position + r.msg.size > page]
        if inner and not _parses(data, inner[0].msg):
            # the record the page starts in no longer decodes (per the construct schema): it is the break
            return expect([(FRAMING, f, inner[0].msg.position)], [(f, lo, hi)], gap_from=inner[0].msg.offset)
        if starts and later:
            s = starts[0]
            return expect([({"zeroed-range"} | FRAMING, f, s.msg.position)], [(f, lo, hi)],
                          gap_from=min(r.msg.offset for r in seg if r.msg.position + r.msg.size > page))
        if inner and inner[0].body[0] <= lo and hi <= inner[0].body[1]:
            return expect([], [(f, lo, hi)], detectable=False,
                          note="the page lies inside one body: no checksum covers it")
        return expect([], [(f, lo, hi)], detectable=False, note="no record starts in the page")

    return apply


def _parses(data, m: Msg) -> bool:
    """Does the record still decode under the construct schema, with LiteMQ's length rule (len = fields + 6)?"""
    (n,) = struct.unpack_from(">I", data, m.position)
    if m.position + 4 + n > len(data):
        return False
    try:
        parsed = F.Message.parse(bytes(data[m.position + 4:m.position + 4 + n]))
        return len(F.Message.build(parsed)) == n
    except (ConstructError, UnicodeError):
        return False


def _insert(m: Msg, inside: bool, size: int, expect):
    at = m.position + (m.size // 2 if inside else 0)

    def apply(copy: Path) -> Expect:
        p = copy / m.file
        data = p.read_bytes()
        p.write_bytes(data[:at] + GARBAGE + data[at:])
        touched = [(m.file, at, at + 1)] if inside else []
        e = expect([(FRAMING, m.file, m.position)], touched, resized=[m.file], gap_from=m.offset)
        base = m.offset - m.position
        e.shift = (base + at, base + size)
        return e

    return apply


def _delete(f: str, nxt: str, seg: list, expect):
    def apply(copy: Path) -> Expect:
        (copy / f).unlink()
        e = expect([({"segment-missing"}, nxt, None)], [], removed=[f])
        return e

    return apply


def _stale(m: Msg, donor: Msg, expect):
    def apply(copy: Path) -> Expect:
        raw = (copy / donor.file).read_bytes()[donor.position:donor.position + donor.size]
        p = copy / m.file
        data = bytearray(p.read_bytes())
        data[m.position:m.position + len(raw)] = raw
        p.write_bytes(data)
        return expect([(FRAMING | {"overwritten-record"}, m.file, m.position + len(raw))],
                      [(m.file, m.position, m.position + m.size)], gap_from=m.offset, extra=[donor])

    return apply


def _cq(rel: str, pos: int, col: int, delta, codes, target: int, msgs, expect):
    def apply(copy: Path) -> Expect:
        p = copy / rel
        data = bytearray(p.read_bytes())
        vals = list(_CQ.unpack_from(data, pos))
        vals[col] = vals[col] ^ 5 if delta is None else vals[col] + delta
        _CQ.pack_into(data, pos, *vals)
        p.write_bytes(data)
        hit = [m for m in msgs if m.offset == target]
        return expect([(codes, rel, pos)], [], extra=hit)

    return apply


ADAPTER = LiteMQAdapter()
