"""``rebuild-index --compare``: the rebuilt consumequeue files and index against the store's.

A restarted store (LiteMQ rewrites the commitlog and each queue from the start; the older run's entries after
the new count survive: reference "Restart behaviour") has entries the rebuild cannot have: those the shared
classifier (:meth:`mqtool.litemq.history.LiveLog.judge`, as verify and ``dump consumequeue`` use it) calls an
older run's are counted per file as ``rebuild-stale-entries`` (history), as RocketMQ's compare reports the
bytes after an index file's last entry (``index-stale-bytes``), not as differences.
"""
from __future__ import annotations

from construct import ConstructError

from formats import litemq as F
from mqtool.findings import INFO, WARNING, Finding, Summary
from mqtool.io import read_input
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.records import CQEntry
from mqtool.litemq.store import Store
from mqtool.litemq.layout import CQ as CQS
from mqtool.litemq.layout import INDEX_ENTRY
from mqtool.litemq.scan import TIME_REGRESSION_MS


class StaleEntries:
    """Which of a store file's entries the rebuild lacks are an older run's (see the module): ``existing`` maps
    a file to (topic, queue id, index of its first entry); ``live`` a :class:`~mqtool.litemq.history.LiveLog`;
    ``restarted``: the walk saw a restart (older records after the live end, or store time going back)."""

    def __init__(self, existing_queues: dict, live, restarted: bool):
        self.queues, self.live, self.restarted = existing_queues, live, restarted
        self.total = self.files = 0

    def of(self, rel: str, have: bytes, first: int, last_ts: int | None) -> list:
        """[(entry number in the file, reason)] for the entries of ``have`` from ``first`` on: all of them an
        older run's (non-zero ones; zero ones are skipped), else [] (they are differences then)."""
        topic, qid, base = self.queues[rel]
        out = []
        prev_ts = last_ts
        for i in range(first, len(have) // F.CQ_ENTRY_SIZE):
            raw = have[i * F.CQ_ENTRY_SIZE:(i + 1) * F.CQ_ENTRY_SIZE]
            if raw == bytes(F.CQ_ENTRY_SIZE):
                continue
            off, size, th, ts = CQS.unpack(raw)
            reason = self.live.judge(CQEntry(rel, i * F.CQ_ENTRY_SIZE, topic, qid, base + i, off, size, th, ts))[0]
            went_back = prev_ts is not None and ts < prev_ts - TIME_REGRESSION_MS
            if reason is None or not (self.restarted or went_back or out):
                return []
            out.append((i, reason))
            prev_ts = ts
        return out

    def finding(self, rel: str, entries: list) -> Finding:
        self.total += len(entries)
        self.files += 1
        i, reason = entries[0]
        n = len(entries)
        return Finding(WARNING, "rebuild-stale-entries", rel, i * F.CQ_ENTRY_SIZE, None,
                       f"{n} entr{'y' if n == 1 else 'ies'} of an older run after the rebuilt ones (the first is "
                       f"entry {i} of the file: {reason}): a restart rewrote the queue from entry 0 and these "
                       "survive; not differences (`verify` lists each as cq-stale-entry)", 0, n)


def _compare_cq(rebuilt: dict, existing: dict, summary: Summary, stale: StaleEntries | None = None):
    same = differ = 0
    for rel, (data, full) in sorted(rebuilt.items()):
        p = existing.get(rel)
        if p is None:
            differ += 1
            yield Finding(WARNING, "rebuild-missing-in-store", rel, None, None,
                          "the rebuild has this consumequeue file, the store does not")
            continue
        have = read_input(p)
        # the rebuilt file is ``data`` then zeros up to ``full``: compared without building the zero fill
        # (a code-default file size is 600 MB per file)
        want_len = max(full, len(data))
        used = max(len(data), len(have.rstrip(b"\x00")))
        if len(have) == want_len and have[:len(data)] == data and used == len(data):
            same += 1
            continue
        if stale is not None and len(have) == want_len and have[:len(data)] == data and not len(data) % 24:
            old = stale.of(rel, have, len(data) // F.CQ_ENTRY_SIZE,
                           CQS.unpack(data[-F.CQ_ENTRY_SIZE:])[3] if data else None)
            if old:
                yield stale.finding(rel, old)
                continue
        differ += 1
        if len(have) != want_len:
            yield Finding(WARNING, "rebuild-size-differs", rel, None, None, "file sizes differ (use --cq-file-size "
                          "or --broker-conf with the broker's size)", want_len, len(have))
        n = min(len(have), want_len, used + F.CQ_ENTRY_SIZE - 1) // F.CQ_ENTRY_SIZE
        shown = 0
        for i in range(n):
            a = data[i * 24:(i + 1) * 24].ljust(24, b"\x00")
            b = have[i * 24:(i + 1) * 24]
            if a != b:
                shown += 1
                if shown <= 20:
                    yield Finding(WARNING, "rebuild-entry-differs", rel, i * 24, None,
                                  "rebuilt entry differs from the store's (offset,size,taghash,time)",
                                  list(CQS.unpack(a)), list(CQS.unpack(b)))
    for rel in sorted(set(existing) - set(rebuilt)):
        old = stale.of(rel, read_input(existing[rel]), 0, None) if stale is not None else []
        if old:
            yield stale.finding(rel, old)
            continue
        differ += 1
        yield Finding(WARNING, "rebuild-missing-file", rel, None, None,
                      "the store has this consumequeue file, the rebuild does not")
    summary.extra.update(cq_files_identical=same, cq_files_differ=differ)
    if stale is not None and stale.total:
        summary.extra.update(cq_stale_entries=stale.total, cq_files_with_stale_entries=stale.files)
    if differ == 0 and not (stale is not None and stale.total):
        yield Finding(INFO, "rebuild-identical", None, None, None,
                      f"all {same} rebuilt consumequeue file(s) are byte-identical to the store's")


def _compare_index(store: Store, data: bytes):
    from mqtool.litemq.store import index_files as _index_files

    files = _index_files(store)
    if not files:
        return
    for p in files:
        have = CQ.open_index_bytes(p)
        name = store.display(p)
        try:
            hs = F.IndexHeader.parse(have[:F.INDEX_HEADER_SIZE])
        except ConstructError:
            yield Finding(WARNING, "rebuild-index-unreadable", name, 0, None, "store index file has no valid header")
            continue
        if len(have) < F.INDEX_HEADER_SIZE + 4 * F.INDEX_HASH_SLOTS + 20 * max(hs.indexCount, 0):
            yield Finding(WARNING, "rebuild-index-unreadable", name, 0, None, "store index file is truncated")
            continue
        ws = F.IndexHeader.parse(data[:F.INDEX_HEADER_SIZE])
        if hs.indexCount != ws.indexCount:
            yield Finding(WARNING, "rebuild-index-count", name, None, None, "index entry counts differ",
                          ws.indexCount, hs.indexCount)
        if have[40:40 + 4 * F.INDEX_HASH_SLOTS] != data[40:40 + 4 * F.INDEX_HASH_SLOTS]:
            yield Finding(WARNING, "rebuild-index-slots", name, 40, None, "slot tables differ")
        base = 40 + 4 * F.INDEX_HASH_SLOTS
        diff = 0
        for i in range(min(hs.indexCount, ws.indexCount)):
            a = INDEX_ENTRY.unpack_from(data, base + 20 * i)
            b = INDEX_ENTRY.unpack_from(have, base + 20 * i)
            if (a[0], a[1], a[3]) != (b[0], b[1], b[3]):
                diff += 1
        if diff:
            yield Finding(WARNING, "rebuild-index-entries", name, base, None,
                          f"{diff} entries differ in key hash, offset or chain", 0, diff)
        else:
            yield Finding(INFO, "rebuild-index-equivalent", name, None, None,
                          "rebuilt index matches in slots, key hashes, offsets and chains (times not compared)")
