"""Root causes (mqtool.causes): which damaged spans are one damage and which are separate roots, in verify's
linking and in the one count of damaged ranges (verify's summary, ``info``)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mqtool.findings import ERROR, Finding

# ---- adjoining whole units are separate damage -------------------------------------------------------------


def _link(spans):
    """(code, start, end) findings through one Linker: (findings, (ranges, bytes))."""
    from mqtool.causes import Linker

    lk = Linker()
    out = list(lk.link(Finding(ERROR, code, "seg", a, a, "x", span=(a, b)) for code, a, b in spans))
    return out, lk.damage()


def test_back_to_back_crc_failures_are_separate_roots():
    """Three whole units side by side, each with its own failing check: three roots, three ranges (they used to
    merge into one root, the later two its consequences)."""
    out, damage = _link([("crc-mismatch", 100, 200), ("prop-crc-mismatch", 200, 260),
                         ("body-inflate-failed", 260, 300)])
    assert [f.caused_by for f in out] == [None, None, None]
    assert damage == (3, 200)


def test_two_checks_of_one_unit_are_one_root():
    """A unit whose body CRC and whole-message CRC both fail: the same bytes, one root."""
    out, damage = _link([("crc-mismatch", 100, 200), ("prop-crc-mismatch", 100, 200)])
    assert [f.caused_by for f in out] == [None, out[0].id]
    assert damage == (1, 100)


@pytest.mark.parametrize("order", [0, 1])
def test_framing_damage_adjoining_framing_damage_is_one(order):
    """A segment cut short and the gap after it, a framing break and the unit it cuts: one root, whichever comes
    first in the stream."""
    spans = [("truncated-record", 1000, 1040), ("segment-size", 1040, 4096)]
    out, damage = _link(spans[::-1] if order else spans)
    assert [f.caused_by for f in out] == [None, out[0].id]
    assert damage == (1, 3096)


@pytest.mark.parametrize("order", [0, 1])
def test_a_whole_unit_next_to_framing_damage_is_its_own_root(order):
    """A framing break that ends where a well-framed unit with a bad CRC begins (and one that begins where it
    ends): the unit's own framing bounds its damage, so it is a root of its own."""
    spans = [("zeroed-range", 0, 100), ("crc-mismatch", 100, 200), ("truncated-record", 200, 250)]
    out, damage = _link(spans[::-1] if order else spans)
    assert [f.caused_by for f in out] == [None, None, None]
    assert damage == (3, 250)


def test_framing_damage_overlapping_a_whole_unit_is_one():
    out, damage = _link([("crc-mismatch", 100, 200), ("zeroed-range", 150, 300)])
    assert [f.caused_by for f in out] == [None, out[0].id]
    assert damage == (1, 200)


def test_kafka_whole_batch_codes_are_whole_units_in_their_file():
    from mqtool.causes import Linker

    lk = Linker()
    spans = [("kafka.crc-mismatch", 0, 80), ("kafka.payload-inflate-failed", 80, 150),
             ("kafka.skipped-bytes", 150, 170), ("kafka.no-readable-batch", 170, 200)]
    out = list(lk.link(Finding(ERROR, code, "p/0.log", a, None, "x", span=(a, b)) for code, a, b in spans))
    assert [f.caused_by for f in out] == [None, None, None, out[2].id]
    assert lk.damage() == (3, 200)


# ---- DamageSpans against a model ---------------------------------------------------------------------------

def _model(spans):
    """The ranges ``spans`` make, worked out the slow way: two spans are one damage when they share a byte (an
    empty span [p, p) holds the byte at p for this), or when one ends where the other starts and neither is a
    whole unit (``whole``); one damage is the union of a connected group (union-find over all pairs)."""
    parent = list(range(len(spans)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    def joined(p, q):
        (a, b, wp), (c, d, wq) = p, q
        if max(a, c) < min(b, d):                        # a shared byte
            return True
        if (a == b and c <= a < d) or (c == d and a <= c < b):   # an empty span on a byte of the other
            return True
        return (b == c or d == a) and not wp and not wq

    for i in range(len(spans)):
        for j in range(i):
            if joined(spans[i], spans[j]):
                parent[root(i)] = root(j)
    groups: dict[int, list] = {}
    for i, (a, b, _) in enumerate(spans):
        groups.setdefault(root(i), []).append((a, b))
    return sorted((min(a for a, _ in g), max(b for _, b in g)) for g in groups.values())


@pytest.mark.parametrize("seed", range(150))
def test_damage_spans_match_a_model(seed):
    """Random spans (some whole units) in random order: the merged ranges are the model's; with no whole unit
    they are the maximal runs of covered byte positions."""
    from mqtool.causes import DamageSpans

    rnd = random.Random(seed)
    n = rnd.randint(1, 25)
    spans = []
    for _ in range(n):
        a = rnd.randint(0, 120)
        b = a + rnd.choice([0, 1, 2, 3, 5, 8, 13, 30])
        spans.append((a, b, rnd.random() < (0 if seed % 3 == 0 else 0.4) and b > a))
    sp = DamageSpans()
    for k, (a, b, whole) in enumerate(spans):
        sp.join(a, b, k, whole=whole)
    got = [(s, e) for s, e, _ in sp.roots]
    assert got == _model(spans), spans
    assert sp.starts == [s for s, _ in got]
    assert sp.totals() == (len(got), sum(e - s for s, e in got))
    for s, e in got:
        if e > s:
            assert sp.find(s)[:2] == [s, e] and sp.find(e - 1)[:2] == [s, e]
    if seed % 3 == 0:           # no whole unit: ranges are the runs of covered positions (empty spans aside)
        covered = set()
        for a, b, _ in spans:
            covered.update(range(a, b))
        runs = []
        for p in sorted(covered):
            if runs and runs[-1][1] == p:
                runs[-1][1] = p + 1
            else:
                runs.append([p, p + 1])
        assert [r for r in got if r[1] > r[0]] == [tuple(r) for r in runs]


# ---- on stores built here ----------------------------------------------------------------------------------

def _crc_store(root: Path, bad=(1, 2, 3), n=5):
    """``n`` RocketMQ units side by side in one segment, a body byte of each unit in ``bad`` flipped (the body
    CRC fails, the framing holds); returns (store, [(offset, size)])."""
    from builders import rocketmq_segment_store, rocketmq_unit

    def make(i, phys):
        body = b"body %d" % i
        u = bytearray(rocketmq_unit(b"T", body, phys=phys, queue_offset=i))
        if i in bad:
            u[u.index(body)] ^= 0x20
        return bytes(u)

    return root, rocketmq_segment_store(root, n, make)


@pytest.mark.parametrize("mode", ["native", "no-lane", "ranges"])
def test_rocketmq_back_to_back_crc_failures_are_separate_roots(tmp_path, monkeypatch, mode):
    """Three adjoining units with bad body CRCs: three roots spanning their units, three damaged ranges in
    verify's summary and in ``info``."""
    from mqtool import causes, native
    from mqtool.info import build_info
    from mqtool.options import InfoOptions, VerifyOptions
    from mqtool.rocketmq.store import open_store
    from mqtool.rocketmq.verify import native_lane, verify_store

    store, at = _crc_store(tmp_path / "store")
    monkeypatch.setattr(native_lane, "USE_FAST_LANE", mode != "no-lane")
    kw = dict(jobs=2, split_size=4096) if mode == "ranges" else {}
    with native.switched(mode != "no-lane"):
        findings, summary_fn = verify_store(open_store(store), "commitlog", VerifyOptions(progress=False, **kw))
        gen, summary = causes.linked(findings, summary_fn)
        errors = [f for f in gen if f.severity == ERROR]
        s = summary()
        info = build_info(store, None, InfoOptions(progress=False))
    want = [(o, o + n) for o, n in at[1:4]]
    assert [(f.code, f.span, f.caused_by) for f in errors] == [("crc-mismatch", w, None) for w in want]
    assert (s.damaged_ranges, s.damaged_bytes) == (3, sum(n for _, n in at[1:4]))
    assert (info.damage_total, info.damaged_bytes) == (3, sum(n for _, n in at[1:4]))
    assert sorted((d.offset, d.length) for d in info.damage) == at[1:4]


def test_kafka_back_to_back_batch_failures_are_separate_roots(run_cli, tmp_path):
    """Adjoining v2 batches, each damaged on its own while its framing holds: one whose CRC32C fails (a value byte
    flipped), then two gzip batches whose payload is no gzip stream under a valid CRC: three roots, three damaged
    ranges in verify and ``info``."""
    from formats import kafka as K

    from builders import kafka_batch, kafka_builder

    B = kafka_builder()
    bad_gzip = [B.frame_v2(2 + i, b"no gzip stream %d" % i, 1, base_ts=B.T0, max_ts=B.T0, codec=K.CODEC_GZIP)
                for i in range(2)]
    batches = [bytearray(kafka_batch(0, 2)), *bad_gzip, kafka_batch(4, 2)]
    k = batches[0].index(b"v1")
    batches[0][k + 1] ^= 0x01
    B.write_segments(tmp_path / "logdir" / "t-0", {0: b"".join(batches)}, 4096)
    pos = [0]
    for b in batches:
        pos.append(pos[-1] + len(b))
    code, out, _ = run_cli("verify", "store", tmp_path / "logdir", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    errors = [(r["code"], r["position"], r["caused_by"]) for r in rows if r["kind"] == "finding"
              and r["severity"] == "error"]
    assert code == 1 and errors == [("kafka.crc-mismatch", pos[0], None),
                                    ("kafka.payload-inflate-failed", pos[1], None),
                                    ("kafka.payload-inflate-failed", pos[2], None)]
    assert (rows[-1]["damaged_ranges"], rows[-1]["damaged_bytes"]) == (3, pos[3])
    _, out, _ = run_cli("info", tmp_path / "logdir", "--json")
    info = json.loads(out)
    assert (info["damage_total"], info["damaged_bytes"]) == (3, pos[3])
