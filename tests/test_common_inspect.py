"""`mqtool inspect`'s schema walker on hostile bytes: whatever the bytes, every family's engine returns an
inspection (a break, failed checks) and never raises; memory stays bounded."""
from __future__ import annotations

import random

import pytest

from mqtool.codes import lookup
from mqtool.kafka.inspect import inspect_entry
from mqtool.litemq.inspect import inspect_record
from mqtool.rocketmq.inspect import inspect_unit
from mqtool.schemawalk import MAX_ROWS
from tests.builders import kafka_batch, litemq_builder, rocketmq_unit

ENGINES = {"rocketmq": lambda b, p: inspect_unit(b, p, "f", 0), "kafka": lambda b, p: inspect_entry(b, p, "f", 1),
           "litemq": lambda b, p: inspect_record(b, p, "f", 0)}


def _valid(family: str) -> bytes:
    if family == "rocketmq":
        return rocketmq_unit()
    if family == "kafka":
        return kafka_batch(0, n=3)
    B = litemq_builder()
    return B.encode_record(B.new_fields(Topic="t", Tags=["x"], Body=b"abc"))


@pytest.mark.parametrize("family", sorted(ENGINES))
def test_random_and_mutated_bytes_never_raise(family):
    rnd = random.Random(21)
    good = _valid(family)
    assert ENGINES[family](good, 0).ok
    codes = set()
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rnd.randint(1, 6)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        data = bytes(data[:rnd.randint(1, len(data))]) if rnd.random() < 0.3 else bytes(data)
        ins = ENGINES[family](data, 0)
        assert len(ins.fields) <= MAX_ROWS + 1
        assert ins.ok == (ins.broken is None and not ins.failed)
        for i, f in enumerate(ins.fields):
            f.to_row(i)
            codes.add(f.code)
        ins.summary_row()
    # every code a check names is one `mqtool explain` knows
    assert [c for c in codes if c is not None and lookup(c) is None] == []
    noise = bytes(rnd.randrange(256) for _ in range(4096))
    for p in range(0, 4000, 97):
        ENGINES[family](noise, p)
