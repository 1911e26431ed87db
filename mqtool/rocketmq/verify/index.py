"""The index checks: header against entries, entries against messages (start, key hash, time), slot and chain
sanity (ranges, cycles, bucket), files newer than the checkpoint."""
from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

from formats import rocketmq as F
from mqtool.findings import ERROR, INFO, WARNING, Finding
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq.ranges import NATIVE_VERIFY_PARALLEL_MIN_BYTES
from mqtool.rocketmq.records import DecodeFailure
from mqtool.rocketmq.scan import CommitLogReader
from mqtool.rocketmq.verify.context import _Ctx, _each_file


class ChainsAhead:
    """The index files' geometries, then the chain part of each file's check (``rmqverify.index_chains``: it
    needs no message, and runs without the GIL), done on a thread while the commitlog pass runs, then (after it,
    :meth:`check`) their entry checks; :func:`_verify_index_file` takes each file's results. Anything that goes
    wrong here is left to the main path, which then reads and checks the file itself (same findings)."""

    def __init__(self, ctx: _Ctx, chains):
        import threading

        self._done: dict = {}
        self.geos = None
        self._first = threading.Thread(target=self._run, args=(ctx.store.index_files, ctx.opts, chains),
                                       name="mqtool-index-chains", daemon=True)
        self._thread = self._first
        self._thread.start()

    def _run(self, paths, opts, chains) -> None:
        try:                        # the geometry decision reads every slot table: here too, not before the pass
            geos = indexfiles.index_geometries(paths, opts)
        except Exception:          # noqa: BLE001 -- the main path decides again and reports it
            return
        self.geos = geos
        for path in paths:
            try:
                v = indexfiles.read_index_file(path, geos.of(path))
                if v.slot_num is not None and v.size >= F.INDEX_HEADER_SIZE:
                    self._done[path] = (v, chains(v.data, v.slot_num, v.entry_count, _drops(v)))
            except Exception:          # noqa: BLE001 -- the main path reads the file again and reports it
                continue

    def geometries(self):
        """The index geometries the thread decided (:func:`indexfiles.index_geometries`), or None."""
        self._first.join()
        return self.geos

    def check(self, xref) -> None:
        """Then the entry checks too (``Xref.index_check`` with each file's chains; no GIL): the commitlog pass
        has filled ``xref``, and the consumequeue checks run meanwhile (they only read it)."""
        import threading

        first, self._xref, self._checked = self._thread, xref, {}

        def run():
            first.join()
            for path, (v, chains) in list(self._done.items()):
                try:
                    self._checked[path] = _index_check(xref, v, chains, threading)
                except Exception:      # noqa: BLE001 -- left to the main path
                    continue

        self._thread = threading.Thread(target=run, name="mqtool-index-entries", daemon=True)
        self._thread.start()

    def take(self, path: str):
        """(view, chains result, index_check result or :data:`UNCHECKED`) of ``path``, or None (then check it
        from scratch)."""
        self._thread.join()
        got = self._done.pop(path, None)
        return None if got is None else (*got, getattr(self, "_checked", {}).pop(path, UNCHECKED))

    def checked(self, ahead, xref):
        """``ahead``'s index_check result when it was made with ``xref``, else :data:`UNCHECKED`."""
        return ahead[2] if ahead is not None and getattr(self, "_xref", None) is xref else UNCHECKED


UNCHECKED = object()
# An index file with more entries than this has its entry check split in two halves on two threads (the check
# runs after the commitlog pass, when nothing else keeps the second core busy).
SPLIT_ENTRIES = 1 << 20


def _index_check(xref, v, chains, threading):
    """``xref.index_check`` of the index file ``v`` (its chains already checked): the entries in two halves on
    two threads when there are many, their results combined as one call over the whole file gives them."""
    n, begin = v.entry_count, v.header["beginTimestamp"]
    if n < SPLIT_ENTRIES or not chains:
        return xref.index_check(v.data, v.slot_num, n, begin, chains, _drops(v))
    half = n // 2
    second: list = []

    def other_half():
        try:
            second.append(xref.index_check(v.data, v.slot_num, n, begin, chains, _drops(v), half + 1, n))
        except Exception:          # noqa: BLE001 -- no result: the main path checks the file (same findings)
            pass

    t = threading.Thread(target=other_half, name="mqtool-index-entries-2", daemon=True)
    t.start()
    a = xref.index_check(v.data, v.slot_num, n, begin, chains, _drops(v), 1, half)
    t.join()
    b = second[0] if second else None
    if a is None or b is None:
        return None
    return (a[0], min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]), a[4])


def _drops(v) -> bool:
    """The compiled checks may unmap the pages of ``v``'s data behind them: a read-only map of the file (a
    later read faults them back in; an index file is up to 420 MB, kept resident it would count whole)."""
    return isinstance(v.data, mmap.mmap)


# A commitlog shorter than this is walked before a thread would pay (the same threshold as the range pool's)
AHEAD_MIN_BYTES = NATIVE_VERIFY_PARALLEL_MIN_BYTES


def start_chains(ctx: _Ctx) -> None:
    """Start :class:`ChainsAhead` (the index geometries, then each file's chains) when the compiled table will
    check the index files after a long commitlog pass (run.py calls this before that pass). A distributed
    verify's merge (``opts.runner``) takes the one its plan started while the tasks ran, if any
    (``runner.index_ahead``: :mod:`mqtool.rocketmq.verifyplan`)."""
    from mqtool.rocketmq.verify import native_lane

    store = ctx.store
    runner = getattr(ctx.opts, "runner", None)
    if runner is not None:
        if ctx.want_xref and ctx.salvage is None:
            ctx.index_ahead = getattr(runner, "index_ahead", None)
        return
    if sum(s.size for s in store.segments) < AHEAD_MIN_BYTES:
        return
    if not (store.index_files and store.segments and ctx.want_xref and ctx.salvage is None
            and native_lane.new_xref(store.segments) is not None):
        return
    chains = getattr(native_lane._native_lane(), "index_chains", None)
    if chains is None:
        return
    ctx.index_ahead = ChainsAhead(ctx, chains)


def _verify_index(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    if not store.index_files:
        return
    reader = CommitLogReader(store.segments, ctx.opts.max_message_size) if store.segments else None
    cp = None
    if store.checkpoint:
        try:
            cp = indexfiles.read_checkpoint(store.checkpoint)
        except Exception:
            cp = None
    geos = ctx.index_ahead.geometries() if ctx.index_ahead is not None else None
    if geos is None:
        geos = indexfiles.index_geometries(store.index_files, ctx.opts)
    ctx.summary.extra["index_geometry"] = geos.summary()
    for size, g in sorted(geos.by_size.items()):
        if g.warning:
            first = min((p for p, z in geos.sizes.items() if z == size), key=os.path.basename)
            unchecked = "" if g.slots else \
                f" ({sum(1 for z in geos.sizes.values() if z == size)} file(s) of this size not checked)"
            yield ctx.f(WARNING, "index-geometry", first, None, None, g.warning + unchecked,
                        None, [list(c) for c in g.candidates] or None)
    yield from _each_file(ctx, store.index_files, reader,
                          lambda path: _verify_index_file(ctx, path, reader, cp, geos.of(path)), "index")


def _verify_index_file(ctx: _Ctx, path: str, reader, cp, geometry) -> Iterator[Finding]:
    ahead = ctx.index_ahead.take(path) if ctx.index_ahead is not None else None
    v = ahead[0] if ahead is not None else indexfiles.read_index_file(path, geometry)
    h = v.header
    if v.size < F.INDEX_HEADER_SIZE:
        yield ctx.f(ERROR, "index-truncated", path, 0, None, f"index file is {v.size} bytes, shorter than its header")
        return
    if v.slot_num is None:
        return                  # geometry unknown: one index-geometry warning names the candidates
    count = h["indexCount"]
    if count < 1 or count > v.index_num:
        yield ctx.f(ERROR, "index-header", path, 36, None,
                    f"indexCount {count} outside [1, {v.index_num}]", f"1..{v.index_num}", count)
    n = v.entry_count
    slots = v.slot_num
    fast = None
    if reader is not None and ctx.xref is not None:
        fast = ctx.index_ahead.checked(ahead, ctx.xref) if ctx.index_ahead is not None else UNCHECKED
        if fast is UNCHECKED:
            fast = ctx.xref.index_check(v.data, slots, n, h["beginTimestamp"], ahead[1] if ahead is not None else None,
                                        _drops(v))
    if fast is not None:
        # the commitlog pass's table proves every slot, entry and chain check below passes: only the slot count
        # and the unreachable entries can have something to say (same findings, same order)
        nonempty, min_off, max_off, max_ts, unreached = fast
        if h["hashSlotCount"] != nonempty:
            yield _slot_count_finding(ctx, path, h, nonempty)
        if unreached:
            yield _unreachable_finding(ctx, path, unreached)
    else:
        min_off, max_off, max_ts = yield from _check_entries(ctx, path, v, reader, n, slots)
    yield from _header_against_entries(ctx, path, h, cp, n, max_off, max_ts)


def _check_entries(ctx: _Ctx, path: str, v, reader, n: int, slots: int):
    """The slot, entry and chain checks of one index file (findings); returns (min_off, max_off, max_ts)."""
    h = v.header
    # slots
    nonempty = 0
    used = v.nonzero_slots()
    for i, val in used:
        nonempty += 1
        if val < 0 or val > n:
            yield ctx.f(ERROR, "index-bad-slot", path, F.INDEX_HEADER_SIZE + 4 * i, None,
                        f"slot {i} points at entry {val}, outside [1, {n}]", f"1..{n}", val)
    if h["hashSlotCount"] != nonempty:
        yield _slot_count_finding(ctx, path, h, nonempty)
    # entries
    min_off = max_off = None
    min_ts = max_ts = None
    bad_hash = set()                       # entries whose key hash matches none of their message's keys
    last_off = None                        # the message last decoded (its topic, keys, their hashes, m)
    for k in range(1, n + 1):
        kh, off, td, prev = v.entry(k)
        pos = v.entry_position(k)
        if prev < 0 or prev >= k:
            yield ctx.f(ERROR, "index-bad-link", path, pos, off,
                        f"entry {k}: previous entry {prev} is not older than the entry itself", f"0..{k - 1}", prev)
        if min_off is None or off < min_off:
            min_off = off
        if max_off is None or off > max_off:
            max_off = off
        if reader is None:
            continue
        if off != last_off:         # the broker puts a message's keys one after another: decode it once
            try:
                m = reader.message_at(off, check_crc=False)     # bodies: the commitlog pass
            except DecodeFailure as e:
                last_off = None
                if e.code in ("file-unreadable", "file-changed"):
                    continue
                yield ctx.f(ERROR, "index-not-message-start", path, pos, off,
                            f"entry {k} points at offset {off}, not a message start: {e.message}")
                continue
            keys = ([m.uniq_key] if m.uniq_key else []) + m.keys
            topic = m.topic
            hashes = {indexfiles.index_hash(f"{topic}#{key}") for key in keys}
            last_off = off
        if kh not in hashes:
            bad_hash.add(k)
            yield ctx.f(ERROR, "index-hash-mismatch", path, pos, off,
                        f"entry {k}: key hash {kh} matches none of the message's keys ({topic}: {keys[:5]})",
                        None, kh)
        ts = m.store_timestamp
        min_ts = ts if min_ts is None else min(min_ts, ts)
        max_ts = ts if max_ts is None else max(max_ts, ts)
        if h["beginTimestamp"] > 0 and k > 1:
            exp_td = max(0, (ts - h["beginTimestamp"]) // 1000)
            if exp_td != td:
                yield ctx.f(WARNING, "index-time-mismatch", path, pos, off,
                            f"entry {k}: timeDiff {td}s, the message's store time gives {exp_td}s", exp_td, td)
    # chains: every entry reachable from its bucket, no cycles
    seen = bytearray(n + 1)
    for i, cur in used:
        steps = 0
        if 0 < cur <= n and v.entry(cur)[0] % slots != i and (reader is not None and cur not in bad_hash):
            # the head entry is sound (its hash is its message's) but belongs to another slot: the slot is bad
            yield ctx.f(ERROR, "index-bad-slot", path, F.INDEX_HEADER_SIZE + 4 * i, None,
                        f"slot {i} points at entry {cur}, whose key hash belongs to slot {v.entry(cur)[0] % slots}",
                        None, cur)
        while 0 < cur <= n:
            if seen[cur]:
                yield ctx.f(ERROR, "index-chain-cycle", path, F.INDEX_HEADER_SIZE + 4 * i, None,
                            f"slot {i}: chain reaches entry {cur} twice (cycle or shared tail)")
                break
            seen[cur] = 1
            kh, _, _, prev = v.entry(cur)
            if kh % slots != i:
                yield ctx.f(ERROR, "index-wrong-slot", path, v.entry_position(cur), None,
                            f"entry {cur} (hash {kh}) is chained from slot {i}, belongs to slot {kh % slots}",
                            kh % slots, i)
            cur = prev
            steps += 1
            if steps > n:
                break
    unreached = seen.count(0) - 1          # entry 0 does not exist
    if unreached:
        yield _unreachable_finding(ctx, path, unreached)
    return min_off, max_off, max_ts


def _slot_count_finding(ctx: _Ctx, path: str, h: dict, nonempty: int) -> Finding:
    return ctx.f(INFO, "index-slot-count", path, 32, None,
                 f"hashSlotCount {h['hashSlotCount']} but {nonempty} slots are used "
                 "(4.7.0 and earlier counted every put)", nonempty, h["hashSlotCount"])


def _unreachable_finding(ctx: _Ctx, path: str, unreached: int) -> Finding:
    return ctx.f(WARNING, "index-unreachable", path, None, None,
                 f"{unreached} entries are not reachable from any slot (overwritten chains)", 0, unreached)


def _header_against_entries(ctx: _Ctx, path: str, h: dict, cp, n: int, max_off, max_ts) -> Iterator[Finding]:
    """The header's end offset and time against the entries, and the file against the checkpoint."""
    if n:
        if h["endPhyOffset"] != max_off:
            yield ctx.f(WARNING, "index-header", path, 24, None,
                        f"endPhyOffset {h['endPhyOffset']} differs from the largest entry offset {max_off}",
                        max_off, h["endPhyOffset"])
        if max_ts is not None and h["endTimestamp"] < max_ts:
            yield ctx.f(WARNING, "index-header", path, 8, None,
                        f"endTimestamp {h['endTimestamp']} is older than the newest indexed message ({max_ts})",
                        max_ts, h["endTimestamp"])
    if cp is not None and h["endTimestamp"] > cp["indexMsgTimestamp"] and n:
        sev = WARNING if ctx.aborted else INFO
        yield ctx.f(sev, "index-after-checkpoint", path, 8, None,
                    f"endTimestamp {h['endTimestamp']} is newer than the checkpoint's indexMsgTimestamp "
                    f"{cp['indexMsgTimestamp']}" + (": a restarting broker deletes this file after a crash — "
                                                      "keep a copy" if ctx.aborted else
                                                      " (normal for the file being written)"),
                    cp["indexMsgTimestamp"], h["endTimestamp"])
