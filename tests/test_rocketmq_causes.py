"""RocketMQ root causes across segments: a queue-offset gap names the damage that lost its messages when that
damage lies in an earlier segment (a unit there, the segment's cut tail, a missing segment), on every lane."""
from __future__ import annotations

from pathlib import Path

import pytest

SEG = 8192


def _two_segment_store(root: Path, how: str):
    """Queue A: a0, a1, then a2 in the next segment; queue B's units in between (hand-laid, listed below).
    ``how``: ``unit`` (a1's MAGICCODE broken), ``cut`` (segment 0 cut 500 bytes into a1), ``missing`` (no a1 in
    segment 0, and the segment after it gone: a2 lies in the one after that). Returns (store, {name: offset})."""
    from builders import rocketmq_builder, rocketmq_unit

    seg0, at = bytearray(), {}
    for name, topic, qoff in [("a0", b"A", 0), ("b0", b"B", 0), ("a1", b"A", 1), ("b1", b"B", 1), ("b2", b"B", 2)]:
        if how == "missing" and name == "a1":
            continue
        u = rocketmq_unit(topic, bytes([65 + len(at)]) * 1000, phys=len(seg0), queue_offset=qoff)
        at[name] = len(seg0)
        seg0 += u
    if how == "unit":                           # MAGICCODE: bytes 4..8 of the unit
        seg0[at["a1"] + 4:at["a1"] + 8] = b"\xde\xad\xbe\xef"
    blank = rocketmq_builder().blank(SEG - len(seg0))
    seg0 += blank + bytes(SEG - len(seg0) - len(blank))
    if how == "cut":
        seg0 = seg0[:at["a1"] + 500]
    base = 2 * SEG if how == "missing" else SEG
    seg1 = bytearray()
    for name, topic, qoff in [("a2", b"A", 2), ("b3", b"B", 3)]:
        u = rocketmq_unit(topic, bytes([65 + len(at)]) * 1000, phys=base + len(seg1), queue_offset=qoff)
        at[name] = base + len(seg1)
        seg1 += u
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(seg0))
    (root / "commitlog" / f"{base:020d}").write_bytes(bytes(seg1) + bytes(SEG - len(seg1)))
    return root, at


#: how → the root the gap follows from (code, span), from the plan above: the broken unit a1 (its offset, up to
#: b1); the bytes the cut took, [a1 + 500, SEG), which the segment checks report as missing before the next
#: segment (the unit it cuts is the same damage: its consequence); the missing segment [SEG, 2 * SEG)
_ROOT = {"unit": lambda at: ("bad-magic", (at["a1"], at["b1"])),
         "cut": lambda at: ("segment-missing", (at["a1"] + 500, SEG)),
         "missing": lambda at: ("segment-missing", (SEG, 2 * SEG))}


@pytest.mark.parametrize("how", sorted(_ROOT))
@pytest.mark.parametrize("mode", ["native", "python-lane", "no-lane", "ranges", "ranges-python"])
def test_queue_gap_follows_damage_in_an_earlier_segment(tmp_path, monkeypatch, mode, how):
    from mqtool import causes, native
    from mqtool.options import VerifyOptions
    from mqtool.rocketmq.store import open_store
    from mqtool.rocketmq.verify import native_lane, verify_store

    store, at = _two_segment_store(tmp_path / "store", how)
    monkeypatch.setattr(native_lane, "USE_FAST_LANE", mode != "no-lane")
    kw = dict(jobs=2, split_size=4096) if mode.startswith("ranges") else {}
    with native.switched(mode in ("native", "ranges")):
        findings, _ = verify_store(open_store(store), "commitlog", VerifyOptions(progress=False, **kw))
        found = causes.link(findings)
    gap, = [f for f in found if f.code == "queue-offset-gap" and f.offset == at["a2"]]
    assert (gap.expected, gap.actual, gap.lost_from) == (1, 2, at["b0"])       # a1 lost; a0 ends where b0 starts
    root = {f.id: f for f in found}[gap.caused_by]
    assert (root.code, root.span, root.caused_by) == (*_ROOT[how](at), None)
