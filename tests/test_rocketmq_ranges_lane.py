"""verify --jobs: the range tasks use the one-process fast lane (for units after the range's first message of
each queue); findings and summary equal the lane-off run and the one-process run, and the lane does run — the
Python lane and the compiled one (``mqtool/_native/rmqverify.c``)."""
from __future__ import annotations

import pytest

from mqtool.ranges import InlineRunner
from mqtool.rocketmq.verify import native_lane as V
from builders import damage_segments
from conftest import rocketmq_store_copy
from mqtool.options import VerifyOptions
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.verify import verify_store


def run_verify(store, part="store", **kw):
    findings, summary_fn = verify_store(open_store(store), part, VerifyOptions(**kw))
    return [f.to_dict() for f in findings], summary_fn().to_dict()


@pytest.fixture
def lane_counter(monkeypatch, lane_impl):
    consumed = []
    real = V._fast_lane

    def counting(ctx, expected_next, known_queues_only=False, firsts=None):
        lane = real(ctx, expected_next, known_queues_only, firsts)
        assert (lane.__name__ == "native_lane") == (lane_impl == "native")

        def wrapped(*a):
            r = lane(*a)
            if known_queues_only:
                consumed.append(r[1])
            return r
        return wrapped

    monkeypatch.setattr(V, "_fast_lane", counting)
    return consumed


@pytest.mark.parametrize("damaged", [False, True], ids=["clean", "damaged"])
def test_range_lane_equals_full_path(tmp_path, monkeypatch, lane_counter, damaged):
    store = rocketmq_store_copy(tmp_path)
    if damaged:
        damage_segments(store)
    ref = run_verify(store, part="commitlog")
    for split in (4096, 65536, 1 << 20):
        lane_counter.clear()
        with_lane = run_verify(store, part="commitlog", runner=InlineRunner(), split_size=split)
        assert sum(lane_counter) > 0, "the lane consumed nothing in the range tasks"
        monkeypatch.setattr(V, "USE_FAST_LANE", False)
        without = run_verify(store, part="commitlog", runner=InlineRunner(), split_size=split)
        monkeypatch.setattr(V, "USE_FAST_LANE", True)
        assert with_lane == ref, split
        assert without == ref, split
