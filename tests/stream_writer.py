"""A live store for the streaming tests: laid out here from the construct schemas (RocketMQ units, Kafka
batches, LiteMQ records), then written to disk in phases by a separate process, the way a broker appends.

    python tests/stream_writer.py FAMILY ROOT PHASE [CHUNK DELAY]

writes phase PHASE (0, 1, 2) of FAMILY's log under ROOT, CHUNK bytes at a time with DELAY seconds between
writes. Phase boundaries (``CUTS``) fall inside units, so a phase ends on a partial unit that the next
completes; the logs roll over to new segments (RocketMQ: BLANK, next file preallocated ahead; LiteMQ: an
exactly filling record; Kafka: a new segment file, and a second partition that appears in phase 1).

:func:`layout` returns, besides the bytes, the list of what was written (``units``): the independent
expectation of the tests.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

SEG = 2048          # RocketMQ / LiteMQ segment size (preallocated, zero-filled)


def _rocketmq():
    from builders import rocketmq_builder, rocketmq_unit
    from formats import rocketmq as F

    segs, units = [], []
    cur, base = bytearray(), 0
    qoff = [0, 0]
    for n in range(30):
        q = n % 2
        body = (f"rmq-{n}-" + "x" * (n * 7 % 50)).encode()
        props = f"KEYS\x01k{n}\x02TAGS\x01t{q}\x02".encode()

        def unit(phys):
            return rocketmq_unit(b"Stream", body, props, phys=phys, queue_id=q, queue_offset=qoff[q],
                                 store_ts=1795338600003 + n)

        u = unit(base + len(cur))
        if len(cur) + len(u) + F.END_FILE_MIN_BLANK_LENGTH > SEG:       # the broker's rollover rule
            cur += rocketmq_builder().blank(SEG - len(cur))
            segs.append((f"{base:020d}", bytes(cur) + bytes(SEG - len(cur))))
            base, cur = base + SEG, bytearray()
            u = unit(base)
        qoff[q] += 1
        units.append({"stream": "commitlog", "file": f"{base:020d}", "position": len(cur), "at": base + len(cur),
                      "size": len(u), "body": body.decode()})
        cur += u
    segs.append((f"{base:020d}", bytes(cur) + bytes(SEG - len(cur))))
    return {"commitlog": segs}, units


def _litemq():
    from builders import litemq_builder
    from formats import litemq as F
    from mqtool.litemq.records import encode_record, new_fields

    segs, units = [], []
    cur, idx = bytearray(), 0

    def msg(n, body, topic="stream", q=None):
        return new_fields(MessageID=f"m-{n}", Topic=topic, QueueID=n % 2 if q is None else q, Tags=[f"t{n % 2}"],
                          Keys=[f"k{n}"], Body=body, BornTimestamp=1795000000000 + n,
                          StoreTimestamp=1795000000000 + n)

    for n in range(24):
        if n in (9, 18):        # LiteMQ rolls over only after an exactly full file: a filler fills it
            f = litemq_builder().fill_to(msg(1000 + n, b"", topic="filler", q=3), SEG - len(cur))
            rec = encode_record(f)
            units.append({"stream": "commitlog", "file": f"{idx:020d}", "position": len(cur),
                          "at": idx * SEG + len(cur), "size": len(rec), "body": f["Body"].decode()})
            cur += rec
            assert len(cur) == SEG
            segs.append((f"{idx:020d}", bytes(cur)))
            idx, cur = idx + 1, bytearray()
        body = (f"lite-{n}-" + "y" * (n * 5 % 40)).encode()
        rec = encode_record(msg(n, body))
        units.append({"stream": "commitlog", "file": f"{idx:020d}", "position": len(cur), "at": idx * SEG + len(cur),
                      "size": len(rec), "body": body.decode()})
        cur += rec
    assert len(cur) < SEG and F.TRAILING_PAD
    segs.append((f"{idx:020d}", bytes(cur) + bytes(SEG - len(cur))))
    return {"commitlog": segs}, units


def _kafka():
    from builders import kafka_builder

    batch_v2, record = kafka_builder().batch_v2, kafka_builder().record

    logs, units = {}, []
    for part, nbatches in (("Stream-0", 14), ("Stream-1", 6)):
        segs, cur, name, off = [], bytearray(), 0, 0
        for b in range(nbatches):
            if b and b % 5 == 0:            # roll: a new segment named by its first offset
                segs.append((f"{name:020d}.log", bytes(cur)))
                cur, name = bytearray(), off
            recs = [record(i, i, f"k{off + i}".encode(), f"{part}-v{off + i}".encode()) for i in range(2)]
            raw = batch_v2(off, recs, base_ts=1760000000000 + off, max_ts=1760000000001 + off)
            units.append({"stream": part, "file": f"{name:020d}.log", "position": len(cur), "size": len(raw),
                          "offset": off})
            cur += raw
            off += 2
        segs.append((f"{name:020d}.log", bytes(cur)))
        logs[part] = segs
    for u in units:     # "at": where the unit lies in its partition's segments laid back to back
        u["at"] = _image_start(logs[u["stream"]], u["file"]) + u["position"]
    return logs, units


def _image_start(segs, name) -> int:
    at = 0
    for n, data in segs:
        if n == name:
            return at
        at += len(data)
    raise KeyError(name)


LAYOUTS = {"rocketmq": _rocketmq, "litemq": _litemq, "kafka": _kafka}
STORE_DIR = {"rocketmq": "store/commitlog", "litemq": "broker/commitlog", "kafka": "logs"}


def layout(family: str):
    """(logs, units, cuts): logs = {stream: [(file name, bytes)]}, units = what is written (in order),
    cuts = {stream: [end of phase 0, 1, 2]} in stream-image bytes."""
    logs, units = LAYOUTS[family]()
    cuts = {}
    for stream, segs in logs.items():
        total = sum(len(d) for _, d in segs)
        us = [u for u in units if u["stream"] == stream]
        if family == "kafka" and stream == "Stream-1":
            c = [0, us[3]["at"] + 20, total]            # appears in phase 1
        elif family == "rocketmq":
            # phase 0 ends inside the header of unit 5; phase 1 inside the properties of a unit of segment 1
            # (the body CRC holds there: the torn-tail guard keeps it back)
            u = next(x for x in us if x["file"] != us[0]["file"])
            u2 = us[us.index(u) + 3]
            c = [us[5]["at"] + 30, u2["at"] + u2["size"] - 3, total]
        elif family == "litemq":
            # phase 1 ends inside the StoreTimestamp of a record: every field before it is written and every
            # field after it is zero anyway, so the record decodes, torn (the torn-tail guard keeps it back)
            from construct import Struct
            from formats import litemq as F

            names = [f.name for f in F.MESSAGE_TAIL_FIELDS]
            after_ts = Struct(*F.MESSAGE_TAIL_FIELDS[names.index("StoreTimestamp") + 1:]).sizeof() + F.TRAILING_PAD
            c = [us[5]["at"] + 30, us[12]["at"] + us[12]["size"] - after_ts - 2, total]
        else:
            c = [us[5]["at"] + 30, us[12]["at"] + 25, total]
        cuts[stream] = c
    return logs, units, cuts


def store_path(family: str, root: Path) -> Path:
    return Path(root) / STORE_DIR[family].split("/")[0]


def complete_after(family: str, phase: int) -> list[dict]:
    """The units whole on disk after ``phase`` (the expectation), in write order."""
    _, units, cuts = layout(family)
    return [u for u in units if u["at"] + u["size"] <= cuts[u["stream"]][phase]]


def write_phase(family: str, root: Path, phase: int, chunk: int = 1 << 20, delay: float = 0.0) -> None:
    logs, _, cuts = layout(family)
    d = Path(root) / STORE_DIR[family]
    prealloc = family != "kafka"
    for stream, segs in logs.items():
        lo = cuts[stream][phase - 1] if phase else 0
        hi = cuts[stream][phase]
        sd = d / stream if family == "kafka" else d
        at = 0
        for i, (name, data) in enumerate(segs):
            a, b = max(lo, at), min(hi, at + len(data))
            if a < b:
                sd.mkdir(parents=True, exist_ok=True)
                ahead = segs[i:i + 2] if family == "rocketmq" else segs[i:i + 1]   # RocketMQ allocates one ahead
                for n2, d2 in ahead:
                    f2 = sd / n2
                    if not f2.exists():
                        f2.write_bytes(bytes(len(d2)) if prealloc else b"")
                with open(sd / name, "r+b") as fh:
                    for p in range(a, b, chunk):
                        fh.seek(p - at)
                        fh.write(data[p - at:min(b, p + chunk) - at])
                        fh.flush()
                        if delay:
                            time.sleep(delay)
            at += len(data)


if __name__ == "__main__":
    fam, root, ph = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    ch = int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 20
    dl = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    write_phase(fam, root, ph, ch, dl)
