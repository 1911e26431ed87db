"""The index writer: a key index file over the live records (on request: LiteMQ never flushes one)."""
from __future__ import annotations

import struct

from formats import litemq as F
from mqtool.litemq.layout import INDEX_ENTRY
from mqtool.litemq.records import fnv1a32


def build_index(records) -> tuple[bytes, int]:
    """LiteMQ's index file for the records SendMessage accepted (non-empty body), keys in record order."""
    slots_n = F.INDEX_HASH_SLOTS
    slots = [-1] * slots_n
    entries = []
    last_ts = 0
    for r in records:
        if r.body_slice[0] == r.body_slice[1]:
            continue          # empty body: written below the broker API, never PutIndex-ed
        ts = r.m["StoreTimestamp"]
        last_ts = max(last_ts, ts)
        td = (ts - ts // 1000) & 0xFFFFFFFF     # int32(storeTimestampMs - nowSeconds), now ~ store time
        td = td - (1 << 32) if td >= 1 << 31 else td
        for k in r.raw_keys:
            h = fnv1a32(k)
            s = h % slots_n
            entries.append((h, r.offset, td, slots[s]))
            slots[s] = len(entries) - 1
    hdr = F.IndexHeader.build(dict(version=1, createTime=last_ts, lastUpdate=last_ts, hashSlotCount=slots_n,
                                   indexCount=len(entries)))
    body = struct.pack(f">{slots_n}i", *slots) + b"".join(INDEX_ENTRY.pack(*e) for e in entries)
    return hdr + body, last_ts
