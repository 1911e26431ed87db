"""``rebuild-index --compare``: the rebuilt consumequeue files and index against the store's."""
from __future__ import annotations

from construct import ConstructError

from formats import litemq as F
from mqtool.findings import INFO, WARNING, Finding, Summary
from mqtool.io import read_input
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.store import Store
from mqtool.litemq.layout import CQ as CQS
from mqtool.litemq.layout import INDEX_ENTRY


def _compare_cq(rebuilt: dict, existing: dict, summary: Summary):
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
        differ += 1
        yield Finding(WARNING, "rebuild-missing-file", rel, None, None,
                      "the store has this consumequeue file, the rebuild does not")
    summary.extra.update(cq_files_identical=same, cq_files_differ=differ)
    if differ == 0:
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
