"""The Kafka walker's checking budget (mqtool.kafka.scan, mqtool.damage.CheckBudget): crafted bytes holding a
plausible batch header every 61 bytes, each claiming the rest of the file with a wrong CRC, cost a CRC over the
rest of the file per candidate without it (quadratic: a hang on a few MB). Measured in bytes checksummed
(counted by wrapping the walker's CRC), never in seconds."""
from __future__ import annotations

import json

from builders import kafka_batch
from mqtool.damage import CHECK_BUDGET_FACTOR
from mqtool.kafka import scan as S

HDR = 61        # a v2 batch header (formats/kafka.py RecordBatchHeader), log overhead included


def _near_miss(count: int, end: int | None = None) -> bytes:
    """``count`` back-to-back v2 headers of a sane shape, each claiming the bytes up to ``end`` (default: the
    end of the headers), CRC wrong."""
    total = count * HDR if end is None else end
    out = bytearray()
    for _ in range(count):
        out += S._HDR_V2.pack(0, total - len(out) - 12, -1, 2, 12345, 0, 0, -1, -1, -1, -1, -1, 0)
    return bytes(out)


def test_near_miss_headers_cost_linear_checking(crc_bytes):
    """4000 candidates, each claiming ~half the file on average: unbudgeted that is ~30 GB of CRC; the walk
    stays within its budget (8x the file plus the floor), plus one candidate past it, and still ends with one
    skipped range over the whole file that says candidates were not checked."""
    data = b"\xff" * 5 + _near_miss(4000)
    n = len(data)
    events = list(S.scan(data, "x"))
    assert [(e.code, e.position, e.end) for e in events] == [("skipped", 0, n)]
    assert "past the checking budget" in events[0].message
    assert crc_bytes[0] <= CHECK_BUDGET_FACTOR * n + S.WALK_BUDGET_FLOOR + n
    assert crc_bytes[0] < 4000 * n // 10        # far below the quadratic cost (the check can fail)


def test_good_small_batches_between_near_misses_are_still_read(crc_bytes):
    """Small valid batches each followed by a header claiming all but the last 30 bytes of the file (garbage,
    so the length does not lead to another batch): the main walk's own decode of that header is a CRC over
    the rest each time. Every batch is read, the checking stays linear."""
    good = kafka_batch(0, 1)
    parts = []
    pair = len(good) + HDR
    count = 3000
    n = count * pair + 30
    for k in range(count):
        parts.append(kafka_batch(k, 1))
        at = k * pair + len(good)
        parts.append(S._HDR_V2.pack(0, n - 30 - at - 12, -1, 2, 12345, 0, 0, -1, -1, -1, -1, -1, 0))
    data = b"".join(parts) + b"\xff" * 30
    assert len(data) == n
    events = list(S.scan(data, "x"))
    batches = [e for e in events if not hasattr(e, "code")]
    assert [b.base_offset for b in batches] == list(range(count))
    assert all(b.crc_ok for b in batches)
    # the budget, one candidate past it, and the small batches (always checked) twice: resync and decode
    assert crc_bytes[0] <= CHECK_BUDGET_FACTOR * n + S.WALK_BUDGET_FLOOR + n + 2 * count * len(good)
    assert crc_bytes[0] < count * n // 10


def test_budget_is_not_reached_by_ordinary_damage(crc_bytes):
    """A segment of real-sized batches with a few damaged stretches: every batch after the damage is found
    and no candidate is passed over."""
    batches = [kafka_batch(10 * k, 3, pad=300) for k in range(200)]
    data = bytearray(b"".join(batches))
    for k in (20, 90, 150):
        at = sum(len(b) for b in batches[:k])
        data[at + 8:at + 12] = (4096).to_bytes(4, "big")      # a length that leads nowhere
    events = list(S.scan(bytes(data), "x"))
    skipped = [e for e in events if getattr(e, "code", None) == "skipped"]
    assert len(skipped) == 3 and not any("checking budget" in e.message for e in skipped)
    assert len([e for e in events if not hasattr(e, "code")]) == 197


def test_range_reader_is_budgeted(crc_bytes):
    """A range reader checks within its start search's strict budget, its walk's budget (and one candidate
    past it), and the strict budget of each later range start it looks for to know where to stop."""
    data = b"\xff" * 5 + _near_miss(3000)
    n = len(data)
    events = list(S.scan_range(data, "x", 1000, n // 2))
    assert events == []                 # no batch in the range: it owns nothing
    assert crc_bytes[0] <= CHECK_BUDGET_FACTOR * (n // 2) + S.WALK_BUDGET_FLOOR
    crc_bytes[0] = 0
    events = list(S.scan_range(data, "x", 0, n // 2))
    assert [e.code for e in events] == ["skipped"]
    # the walk (its budget and one candidate past it) and the start of the range after it
    assert crc_bytes[0] <= 2 * (CHECK_BUDGET_FACTOR * (n // 2) + S.WALK_BUDGET_FLOOR) + n
    assert crc_bytes[0] < 3000 * n // 10


def test_cli_verify_reports_the_unchecked_candidates(tmp_path, run_cli):
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(kafka_batch(0, 2) + b"\xff" * 5 + _near_miss(3000))
    code, out, err = run_cli("verify", "store", part, "--json")
    assert code == 1, err
    rows = [json.loads(x) for x in out.splitlines()]
    skipped = [r for r in rows if r.get("code", "").endswith("skipped-bytes")]
    assert len(skipped) == 1 and "past the checking budget" in skipped[0]["message"], rows
