"""RocketMQ adapter for the corruption matrix (see :mod:`tools.corruption` for the contract).

Damage is applied to copies only. Positions are chosen deterministically from the store's own messages
(spread over the commitlog: early, middle, late, first/last of a segment), so two runs give the same table.
"""
from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from tools.corruption import Event, Expect, Msg, finding_rows

from formats import rocketmq as F
from mqtool.options import VerifyOptions
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.records import Message
from mqtool.rocketmq.scan import scan_store_segments
from mqtool.rocketmq.verify import verify_store

FRAMING = {"bad-magic", "bad-size", "truncated-record", "size-mismatch", "bad-length-field"}
DAMAGE = FRAMING | {"crc-mismatch", "zeroed-range", "physical-offset-mismatch"}
SEGMENT_CODES = {"segment-size", "segment-overlap", "segment-missing", "missing-blank", "segment-unused",
                 "blank-size-mismatch"}
QUEUE_CODES = {"queue-offset-gap", "queue-offset-repeat", "cq-behind", "cq-missing"}
INDEX_CHAIN_CODES = {"index-chain-cycle", "index-unreachable", "index-wrong-slot", "index-header"}
_QUEUE_RE = re.compile(r"queue (\S+)/(\d+)")

# byte offsets inside the fixed header of a unit with IPv4 hosts (formats.rocketmq.MessageV1)
HEADER_FLIPS = [            # (field, byte offset in unit, xor mask, codes a verifier must report at the unit)
    ("MAGICCODE", 5, 0x08, {"bad-magic"}),
    ("TOTALSIZE", 2, 0x40, FRAMING),
    ("BODYCRC", 11, 0x01, {"crc-mismatch"}),
    ("QUEUEOFFSET", 27, 0x10, {"queue-offset-gap", "queue-offset-repeat"}),
    ("PHYSICALOFFSET", 35, 0x01, {"physical-offset-mismatch"}),
    ("BODYLENGTH", 87, 0x01, FRAMING),
]
GARBAGE = bytes((i * 37 + 11) % 256 for i in range(333))


class RocketMQAdapter:
    family = "rocketmq"

    def __init__(self):
        self._details: dict[str, dict] = {}

    # ---- ground truth -------------------------------------------------------------------------------
    def stores(self, realdata: Path) -> list[Path]:
        return [p for p in sorted((realdata / "rocketmq").glob("*/store")) if (p / "commitlog").is_dir()]

    def messages(self, store: Path) -> list[Msg]:
        out, det = [], {}
        for m in scan_store_segments(open_store(store).segments):
            if not isinstance(m, Message):
                continue
            rel = str(Path(m.file).relative_to(store))
            msg = Msg(self._ident(m.physical_offset, m.body_crc, m.topic, m.queue_id, m.queue_offset,
                                  m.store_timestamp), rel, m.position, m.size, m.offset, (m.topic, m.queue_id))
            out.append(msg)
            det[(rel, m.position)] = {"sys_flag": m.sys_flag, "body_start": m.body_start - m.position,
                                      "body_len": m.body_len, "txn": m.transaction}
        self._details[str(store)] = det
        return out

    @staticmethod
    def _ident(phys, crc, topic, qid, qoff, ts) -> tuple:
        return (phys, crc, topic, qid, qoff, ts)

    # ---- verify ---------------------------------------------------------------------------------------
    def verify(self, store: Path, salvage_dir: Path):
        findings, _ = verify_store(open_store(store), "store",
                                   VerifyOptions(salvage_out=str(salvage_dir), progress=False))
        rows = finding_rows(findings, store)
        got = set()
        p = salvage_dir / "salvaged-messages.ndjson"
        if p.exists():
            for line in p.read_text().splitlines():
                r = json.loads(line)
                got.add(self._ident(r["physical_offset"], r["body_crc"], r["topic"], r["queue_id"],
                                    r["queue_offset"], r["store_timestamp"]))
        return rows, got

    def explained(self, f: dict, e: Expect, msgs) -> bool:
        code, file = f["code"], f["file"] or ""
        if code in SEGMENT_CODES and file.startswith("commitlog/"):
            if file in e.resized or file in e.neighbours or any(t[0] == file for t in e.touched):
                return True
        if code == "index-header" and file.startswith("index/") and e.touched:
            return True       # endTimestamp/endPhyOffset are compared with the messages entries point at
        if code in QUEUE_CODES:
            q = _QUEUE_RE.search(f["message"] or "")
            if q and (q.group(1), int(q.group(2))) in e.explain_queues:
                return True
        if code in INDEX_CHAIN_CODES and any(file == r[1] for r in e.reports):
            return True
        return False

    # ---- damage events ----------------------------------------------------------------------------------
    def events(self, store: Path, msgs: list[Msg]) -> list[Event]:
        det = self._details[str(store)]
        by_file: dict[str, list[Msg]] = {}
        for m in msgs:
            by_file.setdefault(m.file, []).append(m)
        files = sorted(by_file)
        seg_size = {f: (store / f).stat().st_size for f in files}
        all_segs = sorted(f"commitlog/{p.name}" for p in (store / "commitlog").iterdir())

        def neighbours(f: str) -> list[str]:
            i = all_segs.index(f)
            return all_segs[max(0, i - 1):i + 2]
        evs: list[Event] = []

        def spread(cands: list[Msg], n: int) -> list[Msg]:
            if not cands:
                return []
            idx = sorted({min(len(cands) - 1, (k + 1) * len(cands) // (n + 1)) for k in range(n)})
            return [cands[i] for i in idx]

        def expect(reports, touched, removed=(), resized=(), explain_from=None, extra_msgs=(), shift=None):
            """Fill in what this damage explains: the ranges and queues of every message it touches."""
            e = Expect(list(reports), list(touched), list(removed), dict(explain_from or {}),
                       resized=list(resized))
            for f in list(removed) + list(resized):        # a missing or resized segment shows on its neighbours
                e.neighbours += neighbours(f)
            hit = [m for m in msgs if m.file in removed or
                   any(f == m.file and lo < m.position + m.size and hi > m.position for f, lo, hi in touched)]
            for m in list(hit) + list(extra_msgs):
                e.explain_offsets.append((m.offset, m.offset + m.size))
                e.explain_queues.add(m.queue)
            if shift:
                e.explain_offsets.append(shift)
            return e

        ipv4 = [m for m in msgs if not det[(m.file, m.position)]["sys_flag"] & 0x30]
        dispatched = [m for m in ipv4 if det[(m.file, m.position)]["txn"] in (None, "commit")
                      and m.queue[0] == "TopicA"] or ipv4

        # header bit flips: one field per message, spread over the log
        for (field, off, mask, codes), m in zip(HEADER_FLIPS, spread(ipv4, len(HEADER_FLIPS))):
            if field == "QUEUEOFFSET":
                m = spread(dispatched, 3)[1] if len(dispatched) >= 3 else m
            evs.append(Event("header-bitflip", f"{field}@{m.file}:{m.position}",
                             _flip(m, off, mask, codes, expect)))
        # body bit flips (spread, plus the last unit of the first segment: the one before its BLANK)
        with_body = [m for m in msgs if det[(m.file, m.position)]["body_len"] > 0]
        last_of_first = [m for m in by_file[files[0]] if det[(m.file, m.position)]["body_len"] > 0][-1:]
        for m in spread(with_body, 3) + last_of_first:
            d = det[(m.file, m.position)]
            evs.append(Event("body-bitflip", f"{m.file}:{m.position}",
                             _flip(m, d["body_start"] + d["body_len"] // 2, 0x04, {"crc-mismatch"}, expect)))
        # truncation in the middle of a record: the last segment with data, and a middle one
        targets = [files[-1]] + ([files[len(files) // 2]] if len(files) >= 3 else [])
        for f in targets:
            m = spread(by_file[f], 1)[0]
            evs.append(Event("truncate-mid-record", f"{f}:{m.position + m.size // 2}",
                             _truncate(m, seg_size[f], expect)))
        m = spread(by_file[files[-1]], 3)[2]            # edge: fewer than 8 bytes of the unit left
        evs.append(Event("truncate-mid-record", f"{m.file}:{m.position + 6}", _truncate(m, seg_size[m.file], expect,
                                                                                      cut=m.position + 6)))
        # zeroed 4 KiB pages inside data
        for f in ([files[0], files[len(files) // 2], files[-1]] if len(files) >= 3 else files):
            data_end = max(x.position + x.size for x in by_file[f])
            page = max(0, (data_end // 2) // 4096 * 4096)
            evs.append(Event("zero-page", f"{f}:{page}", _zero_page(f, page, by_file[f], expect)))
        f = files[len(files) // 2]                        # edge: the first page of a segment
        evs.append(Event("zero-page", f"{f}:0", _zero_page(f, 0, by_file[f], expect)))
        # garbage inserted at a unit boundary (early and late) and in the middle of a record
        mid_f = files[1] if len(files) > 1 else files[0]
        for m, inside in ((spread(by_file[mid_f], 1)[0], False), (spread(by_file[files[-1]], 3)[2], False),
                          (spread(by_file[files[0]], 2)[1], True), (by_file[mid_f][0], False)):
            evs.append(Event("garbage-insert", f"{m.file}:{m.position}{'+mid' if inside else ''}",
                             _insert(m, inside, by_file[m.file], seg_size[m.file], expect)))
        # deletion of a middle segment
        for f in files[1:-1][:2]:
            nxt = files[files.index(f) + 1]
            evs.append(Event("delete-middle-segment", f, _delete(f, nxt, expect)))
        # stale record overwrite: a shorter unit written over a longer one, the old tail left behind
        for m in spread([x for x in ipv4 if x.size > min(y.size for y in ipv4) + 16], 2):
            donor = min((x for x in ipv4 if x.size < m.size - 8 and x.queue != m.queue), key=lambda x: x.size,
                        default=None)
            if donor is not None:
                evs.append(Event("stale-overwrite", f"{m.file}:{m.position}", _stale(m, donor, expect)))
        # consume queue and index entry corruption
        cq = _first_cq_file(store)
        if cq is not None:
            for label, mutate, codes in (("offset+1", lambda o, s, t: (o + 1, s, t), {"cq-not-message-start"}),
                                         ("size+7", lambda o, s, t: (o, s + 7, t), {"cq-size-mismatch"}),
                                         ("tagsCode^5", lambda o, s, t: (o, s, t ^ 5), {"cq-tags-code-mismatch"})):
                evs.append(Event("cq-entry-corruption", f"{cq}:{label}", _cq(cq, mutate, codes, expect)))
        idx = sorted(str(p.relative_to(store)) for p in (store / "index").glob("*")) if (store / "index").is_dir() \
            else []
        if idx:
            for label, field, codes in (("keyHash", 0, {"index-hash-mismatch"}),
                                        ("phyOffset", 1, {"index-not-message-start"}),
                                        ("prev=self", 3, {"index-bad-link"})):
                evs.append(Event("index-entry-corruption", f"{idx[0]}:{label}", _index(idx[0], field, codes, expect)))
        return evs


def _flip(m: Msg, off: int, mask: int, codes, expect):
    def apply(copy: Path) -> Expect:
        p = copy / m.file
        data = bytearray(p.read_bytes())
        data[m.position + off] ^= mask
        p.write_bytes(data)
        return expect([(codes, m.file, m.position)], [(m.file, m.position + off, m.position + off + 1)])

    return apply


def _truncate(m: Msg, size: int, expect, cut: int | None = None):
    cut = m.position + m.size // 2 if cut is None else cut

    def apply(copy: Path) -> Expect:
        p = copy / m.file
        p.write_bytes(p.read_bytes()[:cut])
        base = m.offset - m.position
        return expect([(FRAMING, m.file, m.position)], [(m.file, cut, size)], resized=[m.file],
                      shift=(base + cut, base + size))

    return apply


def _zero_page(f: str, page: int, seg_msgs: list[Msg], expect):
    def apply(copy: Path) -> Expect:
        p = copy / f
        data = bytearray(p.read_bytes())
        data[page:page + 4096] = bytes(4096)
        p.write_bytes(data)
        first = min((x for x in seg_msgs if x.position + x.size > page), key=lambda x: x.position)
        return expect([(DAMAGE, f, first.position)], [(f, page, page + 4096)])

    return apply


def _insert(m: Msg, inside: bool, seg_msgs: list[Msg], size: int, expect):
    at = m.position + (m.size // 2 if inside else 0)

    def apply(copy: Path) -> Expect:
        p = copy / m.file
        data = p.read_bytes()
        p.write_bytes(data[:at] + GARBAGE + data[at:])
        base = m.offset - m.position
        # the first unit that is whole after the insertion, now shifted by len(GARBAGE)
        after = [x for x in seg_msgs if x.position >= at]
        reports = [(DAMAGE, m.file, m.position)]
        if after:
            reports.append(({"physical-offset-mismatch"}, m.file, after[0].position + len(GARBAGE)))
        touched = [(m.file, at, at + 1)] if inside else []
        return expect(reports, touched, resized=[m.file],
                      shift=(base + at, base + size))

    return apply


def _delete(f: str, nxt: str, expect):
    def apply(copy: Path) -> Expect:
        (copy / f).unlink()
        return expect([({"segment-missing"}, nxt, 0)], [], removed=[f])

    return apply


def _stale(m: Msg, donor: Msg, expect):
    def apply(copy: Path) -> Expect:
        raw = bytearray((copy / donor.file).read_bytes()[donor.position:donor.position + donor.size])
        struct.pack_into(">q", raw, 28, m.offset)         # the rewrite sits where it claims to be
        p = copy / m.file
        data = bytearray(p.read_bytes())
        data[m.position:m.position + len(raw)] = raw
        p.write_bytes(data)
        return expect([(DAMAGE, m.file, m.position + len(raw))], [(m.file, m.position, m.position + m.size)],
                      extra_msgs=[donor])

    return apply


def _first_cq_file(store: Path) -> str | None:
    for p in sorted((store / "consumequeue").glob("*/*/*")) if (store / "consumequeue").is_dir() else []:
        if p.stat().st_size >= 10 * F.CQ_STORE_UNIT_SIZE and any(p.read_bytes()[100:120]) \
                and not p.parent.parent.name.startswith(("%", "RMQ_", "SCHEDULE")):
            return str(p.relative_to(store))
    return None


def _cq(rel: str, mutate, codes, expect):
    def apply(copy: Path) -> Expect:
        p = copy / rel
        data = bytearray(p.read_bytes())
        o, s, t = struct.unpack_from(">qiq", data, 5 * 20)
        struct.pack_into(">qiq", data, 5 * 20, *mutate(o, s, t))
        p.write_bytes(data)
        return expect([(codes, rel, 5 * 20)], [])

    return apply


def _index(rel: str, field: int, codes, expect):
    def apply(copy: Path) -> Expect:
        p = copy / rel
        data = bytearray(p.read_bytes())
        slots = 100         # maxHashSlotNum/maxIndexNum 100/400 of the generated stores (realdata MANIFEST.md)
        assert len(data) == F.index_file_size(slots, 400), f"{rel}: not a 100/400 index file"
        k = 7
        pos = F.INDEX_HEADER_SIZE + slots * 4 + k * F.INDEX_ENTRY_SIZE
        kh, off, td, prev = struct.unpack_from(">iqii", data, pos)
        vals = [kh ^ 0x1234, off + 1, td, k]
        new = [kh, off, td, prev]
        new[field] = vals[field]
        struct.pack_into(">iqii", data, pos, *new)
        p.write_bytes(data)
        return expect([(codes, rel, pos)], [])

    return apply


ADAPTER = RocketMQAdapter()
