"""Kafka adapter for the corruption matrix (see :mod:`tools.corruption` for the contract).

Stores: Kafka's own output (``generated-4.0.0-SNAPSHOT/broker-append``: a log dir with four segments, indexes,
a transaction index, producer snapshots and checkpoints), kafka-python batches of every format and codec
(``kp-0``), and two partitions written by real brokers that are larger than a 4 KiB page
(``volodymyrzee .../c4-f6e2174/__consumer_offsets-18``, ``ldi-poc .../__consumer_offsets-6``).

Ground truth: the records of the intact store as mqtool's scanner reads them; for ``broker-append`` every
batch (segment, position, size, base and last offset) is first checked against Kafka's own list in
``expected.json``, so the reader the truth comes from is itself checked by a second source.

A message is a record; its bytes are those of its batch (the unit a CRC covers), so damage anywhere in a
batch touches every record in it.

What Kafka's format can and cannot reveal:

* v2 batches: CRC32C covers everything from byte 21 (attributes) to the end; legacy messages: CRC32 from the
  magic byte. Flips there are ``crc-mismatch``; a broken length or magic is ``skipped-bytes`` /
  ``partial-tail`` (resync to the next batch with a valid CRC).
* **Not covered by any CRC**: the baseOffset (8 bytes) and, in v2, the partitionLeaderEpoch. A changed base
  offset shows as ``offset-not-increasing``; a changed leader epoch shows only against a
  ``leader-epoch-checkpoint`` (``leader-epoch-mismatch``), so where a partition has none it is
  **undetectable by design** (``detectable=False``, excluded from (a)).
* A deleted middle segment leaves an offset gap at a segment boundary: ``segment-gap`` (warning; info in a
  partition that looks compacted, where the cleaner leaves such gaps legitimately).
* Kafka has no consume queue (no ``cq-entry-corruption``); ``index-entry-corruption`` covers ``.index`` and
  ``.timeindex`` entries.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from tools.corruption import Event, Expect, Msg, finding_rows

from formats import kafka as K
from mqtool.common import encode_body

LOG_DAMAGE = {"kafka.crc-mismatch", "kafka.skipped-bytes", "kafka.partial-tail", "kafka.records-undecodable"}
INDEX_CODES = {"kafka.index-offset-mismatch", "kafka.index-position-not-batch", "kafka.index-not-monotonic",
               "kafka.index-covers-prefix", "kafka.index-sanity", "kafka.timeindex-timestamp-mismatch",
               "kafka.timeindex-offset-not-found", "kafka.timeindex-out-of-order", "kafka.timeindex-covers-prefix",
               "kafka.timeindex-sanity", "kafka.txnindex-no-marker", "kafka.txnindex-missing-entry",
               "kafka.txnindex-mismatch"}
TXN_CODES = {"kafka.txnindex-no-marker", "kafka.txnindex-missing-entry", "kafka.txnindex-mismatch"}
LEO_CODES = {"kafka.snapshot-beyond-log-end", "kafka.checkpoint-beyond-log-end", "kafka.leader-epoch-beyond-log-end"}
EPOCH_CODES = {"kafka.leader-epoch-mismatch", "kafka.leader-epoch-mid-batch"}
GARBAGE = bytes((i * 37 + 11) % 256 for i in range(333))
_IDX = struct.Struct(">ii")       # formats.kafka.OffsetIndexEntry
_TIX = struct.Struct(">qi")       # formats.kafka.TimeIndexEntry

STORES = ["generated-4.0.0-SNAPSHOT/broker-append", "kafka-python-3.0.12-patched/kp-0",
          "volodymyrzee-kafka-zk-2020/c4-f6e2174/__consumer_offsets-18", "ldi-poc-kraft-2026/8030792/__consumer_offsets-6"]


@dataclass
class KExpect(Expect):
    leo_moved: bool = False          # the partition's log end offset may have changed
    shift: tuple | None = None       # (index/timeindex file prefix, first Kafka offset whose batch moved)
    resized_logs: tuple = ()         # segments that lost or moved bytes
    cut_from: dict = None            # log stem -> first Kafka offset whose batch lost/changed bytes there
    txn_touched: bool = False        # a transactional batch was damaged (first offsets / LSOs the log implies move)


@dataclass(frozen=True)
class B:
    """One batch of the intact store."""

    file: str          # .log relative to the store
    position: int
    size: int
    magic: int
    base: int
    last: int
    control: bool
    txn: bool
    ple: int


class KafkaAdapter:
    family = "kafka"

    def __init__(self):
        self._batches: dict[str, list[B]] = {}

    # ---- ground truth -------------------------------------------------------------------------------
    def stores(self, realdata: Path) -> list[Path]:
        return [realdata / "kafka" / s for s in STORES if (realdata / "kafka" / s).is_dir()]

    def _logs(self, store: Path) -> list[Path]:
        return sorted(store.rglob("*.log"), key=lambda p: (str(p.parent), int(p.stem)))

    def messages(self, store: Path) -> list[Msg]:
        from mqtool.kafka.records import Batch, iter_records
        from mqtool.kafka.scan import scan

        out, bs = [], []
        for log in self._logs(store):
            rel = str(log.relative_to(store))
            data = log.read_bytes()
            for ev in scan(data, str(log)):
                if not isinstance(ev, Batch):
                    continue
                assert ev.crc_ok, (log, ev.position)
                base = ev.base_offset if ev.base_offset is not None else ev.last_offset
                bs.append(B(rel, ev.position, ev.size, ev.magic, base, ev.last_offset, ev.is_control,
                            ev.is_transactional, ev.partition_leader_epoch))
                for r in iter_records(ev):
                    out.append(Msg(self._ident(str(Path(rel).parent), r.offset, r.timestamp, r.key, r.value), rel, ev.position,
                                   ev.size, r.offset, (str(Path(rel).parent),)))
        exp = store / "expected.json"
        if exp.is_file():          # Kafka's own list of what it wrote
            want = [(b["segment"], b["position"], b["size"], b["baseOffset"], b["lastOffset"])
                    for b in json.loads(exp.read_text())["batches"]]
            got = [(int(Path(b.file).stem), b.position, b.size, b.base, b.last) for b in bs]
            assert got == want, "scanner disagrees with expected.json"
        self._batches[str(store)] = bs
        return out

    @staticmethod
    def _ident(part, offset, ts, key, value) -> tuple:
        return (part, offset, ts, encode_body(key, "base64") if key is not None else None,
                encode_body(value, "base64") if value is not None else None)

    # ---- verify ---------------------------------------------------------------------------------------
    def verify(self, store: Path, salvage_dir: Path):
        from mqtool.kafka.ops import verify
        from mqtool.options import VerifyOptions

        salvage_dir.mkdir(parents=True, exist_ok=True)
        out = salvage_dir / "salvage.ndjson"
        gen, _ = verify("store", store, VerifyOptions(salvage_out=str(out), progress=False))
        rows = finding_rows(gen, store)
        got = set()
        if out.exists():
            for line in out.read_text().splitlines():
                r = json.loads(line)
                got.add((str(Path(r["file"]).relative_to(store).parent), r["offset"], r["timestamp"], r["key"], r["value"]))
        return rows, got

    def explained(self, f: dict, e: Expect, msgs) -> bool:
        code, file, off = f["code"], f["file"] or "", f.get("offset")
        stem = file.rsplit(".", 1)[0]
        if code in INDEX_CODES:
            cut = (getattr(e, "cut_from", None) or {}).get(stem)
            if cut is not None and (off is None or off >= cut):
                return True                 # an entry about the part of the log that lost or changed bytes
            sh = getattr(e, "shift", None)
            if sh and stem == sh[0] and off is not None and off >= sh[1]:
                return True
        if code in TXN_CODES and getattr(e, "txn_touched", False):
            return True                     # a damaged transactional batch or marker moves what the log implies
        if code == "kafka.segment-gap" and any(
                str(Path(r).parent) == str(Path(file).parent) and r < file
                for r in list(getattr(e, "resized_logs", ())) + [t[0] for t in e.touched]):
            return True                     # an earlier segment lost (or no longer vouches for) its last offsets
        if code in LEO_CODES and getattr(e, "leo_moved", False):
            return True
        if code in EPOCH_CODES and any(Path(t[0]).parent == Path(file).parent for t in e.touched):
            return True                     # a damaged batch of this partition: its epoch run moved or vanished
        return False

    # ---- damage events ----------------------------------------------------------------------------------
    def events(self, store: Path, msgs: list[Msg]) -> list[Event]:
        bs = self._batches[str(store)]
        by_file: dict[str, list[B]] = {}
        for b in bs:
            by_file.setdefault(b.file, []).append(b)
        files = list(by_file)
        parts = {}
        for f in files:
            parts.setdefault(str(Path(f).parent), []).append(f)
        evs: list[Event] = []

        def spread(cands: list, n: int) -> list:
            if not cands:
                return []
            idx = sorted({min(len(cands) - 1, (k + 1) * len(cands) // (n + 1)) for k in range(n)})
            return [cands[i] for i in idx]

        def expect(reports, touched, removed=(), leo=False, resized=(), detectable=True, note="", extra=()):
            e = KExpect(list(reports), list(touched), list(removed), resized=list(resized), detectable=detectable,
                        note=note, leo_moved=leo, resized_logs=tuple(resized) + tuple(removed))
            hit = [b for b in bs if b.file in removed or
                   any(f == b.file and lo < b.position + b.size and hi > b.position for f, lo, hi in touched)]
            for b in hit + list(extra):
                e.explain_offsets.append((b.base, b.last + 1))
            e.cut_from = {}
            for f in e.resized_logs:
                bases = [b.base for b in hit if b.file == f]
                if bases:
                    e.cut_from[f.rsplit(".", 1)[0]] = min(bases)
            e.txn_touched = any(b.txn for b in hit)
            return e

        def is_last(f: str) -> bool:
            return parts[str(Path(f).parent)][-1] == f

        def prev_contiguous(b: B) -> bool:
            i = bs.index(b)
            return i > 0 and bs[i - 1].file.rsplit("/", 1)[0] == b.file.rsplit("/", 1)[0] and bs[i - 1].last == b.base - 1

        v2 = [b for b in bs if b.magic == 2]
        legacy = [b for b in bs if b.magic < 2]
        # header bit flips
        flips = [("batchLength", spread(v2, 6)[0], 10, 0x10, {"kafka.skipped-bytes", "kafka.partial-tail"}),
                 ("magic", spread(v2, 6)[1], 16, 0x04, {"kafka.skipped-bytes"}),
                 ("crc", spread(v2, 6)[2], 18, 0x01, {"kafka.crc-mismatch"}),
                 ("lastOffsetDelta", spread(v2, 6)[3], 26, 0x01, {"kafka.crc-mismatch"})]
        if legacy:
            flips.append(("legacy-attributes", spread(legacy, 2)[1], 17, 0x01,
                          {"kafka.crc-mismatch", "kafka.records-undecodable"}))
        for field, b, at, mask, codes in flips:
            evs.append(Event("header-bitflip", f"{field}@{b.file}:{b.position}",
                             _flip(b, b.position + at, mask, [(codes, b.file, b.position)], expect,
                                   leo=is_last(b.file))))
        cands = [b for b in v2 if prev_contiguous(b) and b.base]
        if cands:
            b = spread(cands, 3)[1]
            lowbit = (b.base & -b.base).bit_length() - 1
            at = b.position + 7 - lowbit // 8
            evs.append(Event("header-bitflip", f"baseOffset@{b.file}:{b.position}",
                             _flip(b, at, 1 << (lowbit % 8), [({"kafka.offset-not-increasing"}, b.file, b.position)],
                                   expect, leo=is_last(b.file))))
        b = spread([x for x in v2 if x.ple >= 0], 3)[1] if any(x.ple >= 0 for x in v2) else None
        if b is not None:
            ckpt = Path(b.file).parent / "leader-epoch-checkpoint"
            if (store / ckpt).is_file():
                evs.append(Event("header-bitflip", f"partitionLeaderEpoch@{b.file}:{b.position}",
                                 _flip(b, b.position + 15, 0x02, [(EPOCH_CODES, str(ckpt), None)], expect)))
            else:
                evs.append(Event("header-bitflip", f"partitionLeaderEpoch@{b.file}:{b.position}",
                                 _flip(b, b.position + 15, 0x02, [], expect, detectable=False,
                                       note="partitionLeaderEpoch is outside the CRC and there is no "
                                            "leader-epoch-checkpoint to compare with")))
        # body bit flips (inside the CRC-covered area)
        for b in spread(bs, 3):
            first = b.position + (K.V2_HEADER_SIZE if b.magic == 2 else 18)
            at = (first + b.position + b.size) // 2
            evs.append(Event("body-bitflip", f"{b.file}:{b.position}",
                             _flip(b, at, 0x04, [({"kafka.crc-mismatch", "kafka.records-undecodable"}, b.file,
                                                  b.position)], expect)))
        # truncation inside a batch: the last segment of each partition with data, and a middle one
        last_files = [fs[-1] for fs in parts.values()]
        mids = [fs[len(fs) // 2] for fs in parts.values() if len(fs) >= 3]
        for f in last_files[:1] + mids[:1]:
            b = spread(by_file[f], 1)[0]
            evs.append(Event("truncate-mid-record", f"{f}:{b.position + b.size // 2}",
                             _truncate(b, b.position + b.size // 2, expect)))
        b = spread(by_file[last_files[0]], 3)[2]          # edge: fewer than 17 bytes of the batch left
        evs.append(Event("truncate-mid-record", f"{b.file}:{b.position + 9}", _truncate(b, b.position + 9, expect)))
        # zeroed 4 KiB pages
        for f in files:
            size = (store / f).stat().st_size
            page = (size // 2) // 4096 * 4096 if size > 8192 else 0
            if size <= 8192 and f not in mids[:1] + last_files[:1]:
                continue
            evs.append(Event("zero-page", f"{f}:{page}", _zero_page(store, f, page, by_file[f], is_last(f), expect)))
        # garbage inserted at a batch boundary and inside a batch
        big = max(files, key=lambda f: len(by_file[f]))
        for b, inside in ((spread(by_file[big], 2)[0], False), (spread(by_file[big], 2)[1], True),
                          (by_file[files[-1]][-1], False)):
            evs.append(Event("garbage-insert", f"{b.file}:{b.position}{'+mid' if inside else ''}",
                             _insert(b, inside, by_file[b.file], expect)))
        # deletion of a middle segment (.log and its indexes; the producer snapshot stays)
        for fs in parts.values():
            for f in fs[1:-1][:2]:
                evs.append(Event("delete-middle-segment", f, _delete(f, fs[fs.index(f) + 1], expect)))
        # stale overwrite: a smaller batch written over a larger one (same base offset), old tail left behind
        plain = [b for b in v2 if not b.control and not b.txn]
        for b in spread([x for x in plain if x.size > min(y.size for y in plain) + 24], 2):
            donor = min((x for x in plain if x.size < b.size - 16 and x.last - x.base <= b.last - b.base),
                        key=lambda x: x.size, default=None)
            if donor is not None:
                evs.append(Event("stale-overwrite", f"{b.file}:{b.position}", _stale(b, donor, expect)))
        # .index / .timeindex entry corruption
        for f in files:
            idx = store / f.replace(".log", ".index")
            tix = store / f.replace(".log", ".timeindex")
            if idx.is_file() and idx.stat().st_size >= 16:
                n = idx.stat().st_size // 8
                ri = str(idx.relative_to(store))
                evs.append(Event("index-entry-corruption", f"{ri}:position+1",
                                 _entry(ri, 0, _IDX, 1, 1, {"kafka.index-position-not-batch"}, expect)))
                evs.append(Event("index-entry-corruption", f"{ri}:offset+1000",
                                 _entry(ri, (n - 1) * 8, _IDX, 0, 1000, {"kafka.index-offset-mismatch"}, expect)))
            if tix.is_file() and tix.stat().st_size >= 12:
                n = tix.stat().st_size // 12
                rt = str(tix.relative_to(store))
                evs.append(Event("index-entry-corruption", f"{rt}:timestamp+1",
                                 _entry(rt, (n - 1) * 12, _TIX, 0, 1, {"kafka.timeindex-timestamp-mismatch"}, expect)))
            if any(e.kind == "index-entry-corruption" for e in evs) and f != files[0]:
                break
        return evs


def _flip(b: B, at: int, mask: int, reports, expect, leo=False, detectable=True, note=""):
    def apply(copy: Path) -> Expect:
        p = copy / b.file
        data = bytearray(p.read_bytes())
        data[at] ^= mask
        p.write_bytes(data)
        return expect(reports, [(b.file, at, at + 1)], leo=leo, detectable=detectable, note=note)

    return apply


def _truncate(b: B, cut: int, expect):
    def apply(copy: Path) -> Expect:
        p = copy / b.file
        size = p.stat().st_size
        p.write_bytes(p.read_bytes()[:cut])
        return expect([({"kafka.partial-tail"}, b.file, b.position)], [(b.file, cut, size)], leo=True,
                      resized=[b.file])

    return apply


def _zero_page(store: Path, f: str, page: int, seg: list, last: bool, expect):
    def apply(copy: Path) -> Expect:
        p = copy / f
        data = bytearray(p.read_bytes())
        old = bytes(data[page:page + 4096])
        data[page:page + 4096] = bytes(len(old))
        p.write_bytes(data)
        touched = [(f, page, page + len(old))]
        hit = [b for b in seg if b.position < page + len(old) and b.position + b.size > page]
        if page + len(old) < len(data):            # data follows the page: the walk resyncs after it
            return expect([(LOG_DAMAGE, f, hit[0].position)], touched, resized=[f], leo=last)
        first = hit[0]
        if first.position < page:                   # the page cuts a batch: its CRC fails
            return expect([(LOG_DAMAGE, f, first.position)], touched, resized=[f], leo=last)
        if not last:                                # zeros to the end of an inactive segment
            return expect([({"kafka.zeroed-range"}, f, first.position)], touched, resized=[f])
        idx = copy / f.replace(".log", ".index")
        ents = [(i * 8, _IDX.unpack_from(idx.read_bytes(), i * 8)) for i in range(idx.stat().st_size // 8)] \
            if idx.is_file() else []
        ents = [(w, e) for w, e in ents if e[1] >= first.position and (e[0] or e[1])]
        if ents:
            return expect([({"kafka.index-position-not-batch"}, str(idx.relative_to(copy)), ents[0][0])], touched,
                          resized=[f], leo=True)
        return expect([], touched, resized=[f], leo=True, detectable=False,
                      note="zeros from a batch boundary to the end of the active segment look like preallocation")

    return apply


def _insert(b: B, inside: bool, seg: list, expect):
    at = b.position + (b.size // 2 if inside else 0)

    def apply(copy: Path) -> Expect:
        p = copy / b.file
        data = p.read_bytes()
        p.write_bytes(data[:at] + GARBAGE + data[at:])
        touched = [(b.file, at, at + 1)] if inside else []
        e = expect([({"kafka.skipped-bytes"}, b.file, b.position)], touched, resized=[])
        moved = [x for x in seg if x.position >= at]
        if moved:
            e.shift = (b.file.rsplit(".", 1)[0], moved[0].base)
        return e

    return apply


def _delete(f: str, nxt: str, expect):
    def apply(copy: Path) -> Expect:
        stem = f.rsplit(".", 1)[0]
        for suf in (".log", ".index", ".timeindex", ".txnindex"):
            q = copy / (stem + suf)
            if q.exists():
                q.unlink()
        return expect([({"kafka.segment-gap"}, nxt, None)], [], removed=[f])

    return apply


def _stale(b: B, donor: B, expect):
    def apply(copy: Path) -> Expect:
        raw = bytearray((copy / donor.file).read_bytes()[donor.position:donor.position + donor.size])
        struct.pack_into(">q", raw, 0, b.base)             # the rewrite sits where it claims to be
        struct.pack_into(">i", raw, 12, b.ple)             # ... in the same leader epoch
        p = copy / b.file
        data = bytearray(p.read_bytes())
        data[b.position:b.position + len(raw)] = raw
        p.write_bytes(data)
        return expect([(LOG_DAMAGE, b.file, b.position + len(raw))], [(b.file, b.position, b.position + b.size)],
                      extra=[donor])

    return apply


def _entry(rel: str, pos: int, st: struct.Struct, col: int, delta: int, codes, expect):
    def apply(copy: Path) -> Expect:
        p = copy / rel
        data = bytearray(p.read_bytes())
        vals = list(st.unpack_from(data, pos))
        vals[col] += delta
        st.pack_into(data, pos, *vals)
        p.write_bytes(data)
        return expect([(codes, rel, pos)], [])

    return apply


ADAPTER = KafkaAdapter()
