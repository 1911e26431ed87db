"""The fuzz targets of every family, by name: one function per decoder entry point, ``target(data: bytes) -> None``
(``fuzz/<family>_targets.py``).

A target returns normally for any input; it raises only on a bug: an exception the decoder is not allowed
to let out (anything but its documented failure type), or a broken invariant (records overlapping, a record
claiming bytes the input does not have, a scan that does not end). Shared by the bounded hypothesis tests
(``tests/test_{rocketmq,litemq,kafka}_fuzz_targets.py``) and the long runner (``fuzz/run.py``, atheris or hypothesis).

Targets that need a file write the input to a private scratch directory (never near real data).
"""
from __future__ import annotations

from pathlib import Path

from fuzz import kafka_targets as _kafka, litemq_targets as _litemq, rocketmq_targets as _rocketmq
from fuzz.scratch import cleanup, read_seeds

# RocketMQ targets by their entry point's name; LiteMQ and Kafka ones as "<family>.<entry point>"
TARGETS = dict(_rocketmq.TARGETS)
TARGETS.update(_litemq.TARGETS)
TARGETS.update(_kafka.TARGETS)


def seeds(realdata: Path | None) -> dict[str, list[bytes]]:
    """Real bytes to mutate, per target (empty lists when the realdata folder is absent)."""
    out: dict[str, list[bytes]] = {k: [] for k in TARGETS}
    for fam in (_litemq, _kafka):
        out.update(fam.seeds(realdata))
    if realdata is None or not realdata.exists():
        return out
    rq = realdata / "rocketmq"

    def grab(glob: str, limit: int = 3) -> list[bytes]:
        return read_seeds(rq, glob, limit)

    segs = grab("gen-5.1.4-clean/store/commitlog/*", 2) + grab("apache-rocketmq-fork-4e25b979/store/commitlog/*", 1)
    out["decode_message"] = [s[:4096] for s in segs]
    out["scan"] = segs
    out["scan_file"] = segs[:1]
    out["consumequeue"] = grab("gen-5.1.4-clean/store/consumequeue/TopicA/*/*", 2)
    out["index"] = grab("gen-5.1.4-clean/store/index/*", 1)
    out["checkpoint"] = grab("gen-*/store/checkpoint", 2)
    out["config"] = grab("*/store/config/*.json", 4)
    out["store"] = [bytes([10]) + c + i + s[:3000] for c, i, s in
                    zip(out["consumequeue"], [x[:376] for x in out["index"]] * 2, segs)]
    out["properties"] = []
    return out


__all__ = ["TARGETS", "seeds", "cleanup"]
