"""The index file checks (LiteMQ never flushes its index: a file found is checked against the records)."""
from __future__ import annotations

from formats import litemq as F
from mqtool.findings import ERROR, INFO, Finding
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.store import Store


def _verify_index(store: Store, live: dict, explicit: bool):
    from mqtool.litemq.store import index_files as _index_files

    files = _index_files(store)
    if not files:
        yield Finding(INFO, "index-not-persisted", store.display(store.index_dir) if store.index_dir else None,
                      None, None, "no index file: LiteMQ builds its key index in memory and never flushes it")
        return
    for p in files:
        name = store.display(p)
        entries = []
        n_hdr = None
        for item in CQ.read_index(p):
            if isinstance(item, Finding):
                yield item
                continue
            if item["kind"] == "index_header":
                n_hdr = item
                continue
            entries.append(item)
        if n_hdr is None:
            continue
        count = len(entries)
        for e in entries:
            ri = live.get(e["offset"])
            if ri is None:
                yield Finding(ERROR, "index-dangling", name, e["position"], e["offset"],
                              "index entry does not point at a live record")
            elif e["key_hash"] not in ri.key_hashes:
                yield Finding(ERROR, "index-key-mismatch", name, e["position"], e["offset"],
                              "key hash matches none of the record's keys", sorted(ri.key_hashes), e["key_hash"])
            if not (-1 <= e["next"] < e["entry"]):
                yield Finding(ERROR, "index-bad-chain", name, e["position"], e["offset"],
                              "next must be -1 or an earlier entry", f"-1..{e['entry'] - 1}", e["next"])
        data = CQ.open_index_bytes(p)
        slots = CQ.index_slots(data, n_hdr["hash_slot_count"])
        bad_slots = 0
        for i, h in enumerate(slots):
            if h == -1:
                continue
            if not (0 <= h < count) or entries[h]["key_hash"] % n_hdr["hash_slot_count"] != i:
                bad_slots += 1
        if bad_slots:
            yield Finding(ERROR, "index-bad-slot", name, F.INDEX_HEADER_SIZE, None,
                          f"{bad_slots} slot head(s) point at no entry of that slot", 0, bad_slots)
        yield Finding(INFO, "index-timediff-garbage", name, None, None,
                      "timeDiff mixes ms and s in LiteMQ (storeTimestampMs - nowSeconds): not checked")
