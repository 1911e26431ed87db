"""A LiteMQ bench store (not a test input): ``OUT/store/commitlog/`` of 64 MiB files holding about ``size`` bytes
of records built through the construct schema (``mqtool.litemq.records.encode_record``): a few hundred
distinct messages of ~1 KB (8 topics, tags, keys, properties) copied over and over, each file exactly filled
by a filler record (the only way LiteMQ rolls over), the last one zero-filled after the end of data; an empty
``consumequeue/`` (export and the Spark data source read the commitlog only).

    python bench/build_litemq.py OUT SIZE_MIB
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fixture_builders import load  # noqa: E402
from mqtool.litemq.records import encode_record, new_fields  # noqa: E402

FILE_SIZE = 64 << 20
T0 = 1795338600000


def _templates(n: int = 256, seed: int = 11) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(700, 1300)))
        out.append(encode_record(new_fields(
            MessageID=f"{(T0 + i) * 1000000}-0", Topic=f"Topic{i % 8}", QueueID=i % 4, Tags=[f"Tag{i % 7}"],
            Keys=[f"order-{i}", f"user-{i % 13}"], Properties=[("trace", f"t-{i}")], Body=body,
            BornTimestamp=T0 + i, StoreTimestamp=T0 + i)))
    return out


def _filler(room: int, ts: int) -> bytes:
    return encode_record(load("build_litemq").filler(room, ts))


def build(out: Path, size: int) -> int:
    """Returns the number of records written."""
    d = out / "store" / "commitlog"
    d.mkdir(parents=True, exist_ok=True)
    (out / "store" / "consumequeue").mkdir(exist_ok=True)
    tmpl = _templates()
    spare = len(_filler(4096, T0)) - 4096 + 64 + max(map(len, tmpl))     # a filler always fits after a record
    n = written = index = 0
    while written < size:
        buf = bytearray()
        while written + len(buf) < size and len(buf) + spare < FILE_SIZE:
            buf += tmpl[n % len(tmpl)]
            n += 1
        if written + len(buf) < size:           # full: a filler closes it, the data goes on in the next file
            buf += _filler(FILE_SIZE - len(buf), T0 + n)
            n += 1
        written += len(buf)
        (d / f"{index:020d}").write_bytes(bytes(buf) + bytes(FILE_SIZE - len(buf)))
        index += 1
    return n


if __name__ == "__main__":
    print(build(Path(sys.argv[1]), int(sys.argv[2]) << 20))
