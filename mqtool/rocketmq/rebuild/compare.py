"""``--compare``: each rebuilt file against the store's file at the same place, a finding per difference."""
from __future__ import annotations

import os
from array import array
from dataclasses import dataclass

from mqtool.errors import InputError
from mqtool.findings import ERROR, INFO, WARNING, Finding
from mqtool.io import map_input, open_input, pread_input, read_input
from mqtool.rocketmq.indexfiles import CQ_STRUCT, IDX_ENTRY, IDX_HEADER, IDX_HEADER_NAMES
from mqtool.rocketmq.store import RocketStore
from mqtool.rocketmq.rebuild import index as _index
from mqtool.rocketmq.rebuild.consumequeue import _BLANK_UNIT, _ZERO_UNIT, UNIT
from mqtool.rocketmq.rebuild.index import _NATIVE_LITTLE, ENTRY, HEADER, IndexFileBuilder
from mqtool.rocketmq.rebuild.settings import Settings

MAX_FINDINGS_PER_FILE = 20


@dataclass
class CompareState:
    identical: int = 0
    differs: int = 0
    missing_on_disk: int = 0
    extra_on_disk: int = 0
    behind: int = 0              # same as the rebuild up to where the broker stopped dispatching
    cq_files: int = 0
    index_files: int = 0


class CompareSink:
    """Compares each rebuilt file with the store's file at the same place; produces findings."""

    def __init__(self, store: RocketStore, settings: Settings, out: list[Finding], progress_state: CompareState):
        self.findings = out
        self.state = progress_state
        self.settings = settings
        self.min_offset = store.segments[0].base if store.segments else 0    # commitlog files before it are gone
        self.expired = 0
        self.disk_cq: dict[tuple[str, int, int], str] = {}
        self.disk_cq_last: dict[tuple[str, int], int] = {}
        for q in store.queues():
            for seg in q.files:
                self.disk_cq[(q.topic, q.queue_id, seg.base)] = seg.path
            if q.files:
                self.disk_cq_last[(q.topic, q.queue_id)] = q.files[-1].base
        self.seen_cq: set = set()
        self.disk_index = sorted(store.index_files, key=lambda p: os.path.basename(p))
        self.index_seq = 0

    # -- consumequeue --
    def cq_file(self, topic: str, queue_id: int, base: int, data: bytes) -> None:
        st = self.state
        st.cq_files += 1
        key = (topic, queue_id, base)
        self.seen_cq.add(key)
        path = self.disk_cq.get(key)
        label = f"consumequeue/{topic}/{queue_id}/{base:020d}"
        if path is None:
            st.missing_on_disk += 1
            n = _count_units(data)
            self.findings.append(Finding(WARNING, "cq-file-missing-on-disk", label, None, None,
                                         f"rebuilt file with {n} units has no counterpart in the store",
                                         expected=f"{n} units", actual="no file"))
            return
        try:
            disk = read_input(path, limit=max(len(data), 64 << 20) + 1)
        except InputError as e:         # a FIFO, directory, link loop... in its place: nothing to compare
            self._unreadable(path, e)
            return
        if disk == data:
            st.identical += 1
            return
        st.differs += 1
        found = self.findings
        if len(disk) != len(data):
            found.append(Finding(WARNING, "cq-file-size-differs", path, None, None,
                                 f"file is {len(disk)} bytes, the rebuild {len(data)}",
                                 expected=len(data), actual=len(disk)))
        later_on_disk = self.disk_cq_last.get((topic, queue_id), base) > base
        disk_last = _last_nonzero_unit(disk)
        n = max(len(disk), len(data)) // UNIT
        reported = 0
        missing_from = None
        for i in range(n):
            a = data[i * UNIT:(i + 1) * UNIT].ljust(UNIT, b"\x00")
            b = disk[i * UNIT:(i + 1) * UNIT].ljust(UNIT, b"\x00")
            if a == b:
                continue
            qoff = (base // UNIT) + i
            if b == _ZERO_UNIT and i > disk_last and not later_on_disk:
                if missing_from is None:
                    missing_from = i
                continue
            if a == _BLANK_UNIT and b != _ZERO_UNIT and CQ_STRUCT.unpack(b)[0] < self.min_offset:
                self.expired += 1         # the broker's unit points into commitlog files that were deleted
                continue
            reported += 1
            if reported > MAX_FINDINGS_PER_FILE:
                continue
            exp = CQ_STRUCT.unpack(a)
            act = CQ_STRUCT.unpack(b)
            if b == _ZERO_UNIT:
                code, sev, what = "cq-unit-zeroed", ERROR, "unit is all zero on disk, data follows it"
            elif a == _ZERO_UNIT:
                code, sev, what = "cq-unit-unexpected", ERROR, "unit on disk that the commitlog does not explain"
            else:
                code, sev, what = "cq-unit-differs", ERROR, "unit differs from the rebuild"
            msg_off = exp[0] if a != _ZERO_UNIT else act[0]
            which = []
            if a != _ZERO_UNIT:
                which.append(f"rebuild: message at commitlog offset {exp[0]}")
            if b != _ZERO_UNIT:
                which.append(f"disk: message at commitlog offset {act[0]}")
            found.append(Finding(sev, code, path, i * UNIT, msg_off,
                                 f"{label} unit {i} (queue offset {qoff}): {what}; " + ", ".join(which),
                                 expected=_unit_dict(exp), actual=_unit_dict(act)))
        if reported > MAX_FINDINGS_PER_FILE:
            found.append(Finding(ERROR, "cq-more-differences", path, None, None,
                                 f"{reported - MAX_FINDINGS_PER_FILE} more differing units in this file"))
        if reported == 0 and len(disk) == len(data) and missing_from is not None:
            st.differs -= 1
            st.behind += 1
        if missing_from is not None:
            last_i = _last_nonzero_unit(data)
            cnt = last_i - missing_from + 1
            first = CQ_STRUCT.unpack_from(data, missing_from * UNIT)
            found.append(Finding(WARNING, "cq-units-not-on-disk", path, missing_from * UNIT, first[0],
                                 f"{label}: {cnt} unit(s) from queue offset {base // UNIT + missing_from} on are "
                                 f"not on disk (the broker had not dispatched them); first message at commitlog "
                                 f"offset {first[0]}",
                                 expected=f"{cnt} units", actual="zero"))

    def cq_finish(self) -> None:
        if self.expired:
            self.findings.append(Finding(INFO, "cq-units-before-commitlog", None, None, self.min_offset,
                                         f"{self.expired} units on disk point below the first commitlog file "
                                         f"(offset {self.min_offset}); the rebuild has the broker's blank fill "
                                         f"there", expected="blank fill", actual=f"{self.expired} units"))
        for key, path in sorted(self.disk_cq.items()):
            if key in self.seen_cq:
                continue
            try:
                mi = map_input(path)    # whole (every unit is counted): a consume queue file is small
            except InputError as e:
                self._unreadable(path, e)
                continue
            with mi:
                n = _count_units(mi.buf)
                last = _last_nonzero_unit(mi.buf)
                last_unit = CQ_STRUCT.unpack_from(mi.buf, last * UNIT) if last >= 0 else None
            if n == 0:
                continue
            if last_unit is not None and last_unit[0] + last_unit[1] <= self.min_offset:
                self.findings.append(Finding(INFO, "cq-file-before-commitlog", path, None, last_unit[0],
                                             f"consumequeue file with {n} units, all for commitlog files that "
                                             f"were deleted", expected="no file", actual=f"{n} units"))
                continue
            self.state.extra_on_disk += 1
            self.findings.append(Finding(ERROR, "cq-file-unexpected", path, None, None,
                                         f"consumequeue file with {n} units that the commitlog does not explain",
                                         expected="no file", actual=f"{n} units"))

    def _unreadable(self, path: str, e: InputError) -> None:
        self.state.differs += 1
        self.findings.append(Finding(ERROR, "file-unreadable", path, None, None, f"cannot read: {e.message}"))

    # -- index --
    def index_file(self, f: IndexFileBuilder, name: str) -> None:
        st = self.state
        st.index_files += 1
        seq = self.index_seq
        self.index_seq += 1
        if seq >= len(self.disk_index):
            st.missing_on_disk += 1
            self.findings.append(Finding(WARNING, "index-file-missing-on-disk", f"index/#{seq + 1} ({name})", None,
                                         None, f"rebuilt index file #{seq + 1} with {f.index_count - 1} entries has "
                                         f"no counterpart in the store", expected=f"{f.index_count - 1} entries",
                                         actual="no file"))
            return
        path = self.disk_index[seq]
        pieces, size = f.parts()
        try:
            fh = open_input(path)
        except InputError as e:
            self._unreadable(path, e)
            return
        with fh:
            # read in chunks, never whole: a default-geometry index file is 420 MB (and so would be the image)
            disk = _DiskReader(fh, path, size + 1)
            if disk.size == size and disk.equals(pieces):
                st.identical += 1
                return
            st.differs += 1
            if disk.size != size:
                self.findings.append(Finding(
                    ERROR, "index-geometry-differs", path, None, None, f"file is {disk.size} bytes, the rebuild "
                    f"{size} (hashSlotNum {f.slot_num}, indexNum {f.index_num}): give --max-hash-slots/"
                    f"--max-index-num or --broker-conf", expected=size, actual=disk.size))
                return
            self._index_differences(f, disk, path)

    def _index_differences(self, f: IndexFileBuilder, disk: "_DiskReader", path: str) -> None:
        st = self.state
        found = self.findings
        disk_hdr = IDX_HEADER.unpack_from(disk.read(0, HEADER), 0)
        disk_count = disk_hdr[5]
        count = f.index_count
        lag = 1 <= disk_count < count
        exp_hdr, exp_slots = f.prefix_view(disk_count) if lag else (f.header(), f.slots)
        reported = 0

        def add(finding):
            nonlocal reported
            reported += 1
            if reported <= MAX_FINDINGS_PER_FILE:
                found.append(finding)

        for k, (e, a) in enumerate(zip(exp_hdr, disk_hdr)):
            if e != a:
                add(Finding(ERROR, "index-header-differs", path, 8 * k if k < 4 else 32 + 4 * (k - 4), None,
                            f"header {IDX_HEADER_NAMES[k]} differs" + (" (compared with the rebuild cut at the "
                                                                        f"disk's indexCount {disk_count})"
                                                                        if lag else ""),
                            expected=e, actual=a))
        ent_base = HEADER + 4 * f.slot_num
        upto = min(count, disk_count) if disk_count >= 1 else count
        entry_diffs = 0
        for k0 in range(1, upto, _index._CMP_ENTRIES):   # in chunks: both sides may be hundreds of MB
            k1 = min(upto, k0 + _index._CMP_ENTRIES)
            disk_entries = disk.read(ent_base + k0 * ENTRY, (k1 - k0) * ENTRY)
            ours = f.read_entries(k0, k1)
            if disk_entries == ours:
                continue
            for k in range(k0, k1):
                p = ent_base + k * ENTRY
                a = disk_entries[(k - k0) * ENTRY:(k - k0 + 1) * ENTRY]
                e = ours[(k - k0) * ENTRY:(k - k0 + 1) * ENTRY]
                if a != e:
                    entry_diffs += 1
                    ev, av = IDX_ENTRY.unpack(e), IDX_ENTRY.unpack(a)
                    add(Finding(ERROR, "index-entry-differs", path, p, ev[1],
                                f"entry {k} differs; rebuild: message at commitlog offset {ev[1]}, disk: "
                                f"{av[1]}", expected=_entry_dict(ev), actual=_entry_dict(av)))
        slot_base = HEADER
        disk_slots = array("i", disk.read(slot_base, 4 * f.slot_num))
        if _NATIVE_LITTLE:
            disk_slots.byteswap()
        if disk_slots != exp_slots:
            bad = [i for i, (e, a) in enumerate(zip(exp_slots, disk_slots)) if e != a]
            if entry_diffs or disk_count > count:
                add(Finding(ERROR, "index-slots-differ", path, slot_base + 4 * bad[0], None,
                            f"{len(bad)} slots differ (they follow from the entry differences); first: slot "
                            f"{bad[0]}", expected=exp_slots[bad[0]], actual=disk_slots[bad[0]]))
            else:
                for i in bad:
                    add(Finding(ERROR, "index-slot-differs", path, slot_base + 4 * i, None,
                                f"slot {i}: newest entry number differs", expected=exp_slots[i],
                                actual=disk_slots[i]))
        if lag:
            first = IDX_ENTRY.unpack(f.read_entries(disk_count, disk_count + 1))
            n = count - disk_count
            found.append(Finding(WARNING, "index-entries-not-on-disk", path, ent_base + disk_count * ENTRY, first[1],
                                 f"entries {disk_count}..{count - 1} ({n}) are not on disk (the broker had not "
                                 f"indexed them); first message at commitlog offset {first[1]}",
                                 expected=f"indexCount {count}", actual=f"indexCount {disk_count}"))
        elif disk_count > count:
            add(Finding(ERROR, "index-entries-unexpected", path, ent_base + count * ENTRY, None,
                        f"disk has {disk_count - count} entries beyond the rebuild",
                        expected=f"indexCount {count}", actual=f"indexCount {disk_count}"))
        tail_from = ent_base + max(count, disk_count) * ENTRY
        if not disk.zero_from(tail_from):
            add(Finding(WARNING, "index-stale-bytes", path, tail_from, None,
                        "non-zero bytes after the last entry"))
        if reported > MAX_FINDINGS_PER_FILE:
            found.append(Finding(ERROR, "index-more-differences", path, None, None,
                                 f"{reported - MAX_FINDINGS_PER_FILE} more differences in this file"))
        if lag and reported == 0:
            # the disk file is exactly the rebuild cut where the broker stopped: consistent, only behind
            st.differs -= 1
            st.behind += 1

    def index_finish(self) -> None:
        for path in self.disk_index[self.index_seq:]:
            self.state.extra_on_disk += 1
            self.findings.append(Finding(ERROR, "index-file-unexpected", path, None, None,
                                         "index file beyond those the commitlog explains"))


class _DiskReader:
    """Positioned reads of a store file opened with :func:`~mqtool.io.open_input` (sizes capped at ``cap``
    bytes, as the whole-file read it replaces did), compared in chunks so memory stays bounded."""

    CHUNK = 8 << 20

    def __init__(self, fh, path: str, cap: int):
        self.fh, self.fd, self.path = fh, fh.fileno(), path
        try:
            self.size = min(os.fstat(self.fd).st_size, cap)
        except OSError as e:
            raise InputError(f"stat failed: {e.strerror or e}", path) from None

    def read(self, at: int, n: int) -> bytes:
        n = max(0, min(n, self.size - at))
        out = bytearray()
        while len(out) < n:
            try:
                got = pread_input(self.fh, min(n - len(out), self.CHUNK), at + len(out))    # remote: fetched
            except OSError as e:
                raise InputError(f"read failed: {e.strerror or e}", self.path) from None
            if not got:
                break                                  # shrank under us: what is missing reads as absent
            out += got
        return bytes(out)

    def equals(self, pieces) -> bool:
        """The file is ``pieces`` followed by zeros up to its size."""
        at = 0
        for piece in pieces:
            mv = memoryview(piece)
            for i in range(0, len(mv), self.CHUNK):
                part = mv[i:i + self.CHUNK]
                if self.read(at + i, len(part)) != part:
                    return False
            at += len(mv)
        return self.zero_from(at)

    def zero_from(self, at: int) -> bool:
        """No non-zero byte from ``at`` to the end."""
        while at < self.size:
            got = self.read(at, self.CHUNK)
            if not got:
                break
            if got.strip(b"\x00"):
                return False
            at += len(got)
        return True


def _unit_dict(u):
    return {"offset": u[0], "size": u[1], "tags_code": u[2]}


def _entry_dict(e):
    return {"key_hash": e[0], "offset": e[1], "time_diff": e[2], "prev": e[3]}


def _last_nonzero_unit(data) -> int:
    stripped = bytes(data).rstrip(b"\x00")
    return (len(stripped) - 1) // UNIT if stripped else -1


def _count_units(data) -> int:
    """Units that are not all zero."""
    mv = memoryview(data)[:len(data) - len(data) % UNIT]
    try:
        return sum(1 for i in range(0, len(mv), UNIT) if any(mv[i:i + UNIT]))
    finally:
        mv.release()
