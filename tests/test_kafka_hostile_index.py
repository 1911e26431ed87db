"""A ``.index`` / ``.timeindex`` whose entries are all wrong: every entry's findings, in entry order, with the
messages, expected/actual values and ids worked out by hand from the entries written (the checks of
mqtool/kafka/verify/indexes.py were made cheaper per entry for millions of such entries; what they report
must not change). The log: three v2 batches of three records, offsets 0..2, 3..5, 6..8, at positions 0, p1, p2.
"""
from __future__ import annotations

import json
import struct

import pytest

from builders import kafka_batch, kafka_index_entries


@pytest.fixture
def part(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    batches = [kafka_batch(3 * k, 3) for k in range(3)]
    (d / "00000000000000000000.log").write_bytes(b"".join(batches))
    return d, [0, len(batches[0]), len(batches[0]) + len(batches[1])]


def _findings(run_cli, d, file: str):
    """The findings about ``file`` (the other index file is absent: an info finding of its own)."""
    code, out, err = run_cli("verify", "store", d, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 1 and rows[-1]["kind"] == "summary", err
    return [r for r in rows[:-1] if r["file"] == file]


def test_every_wrong_offset_index_entry_is_reported_in_order(run_cli, part):
    d, (_, p1, _p2) = part
    # (relative offset, position): 5 @ 7 (no batch there), 4 @ 7 (goes back; no batch), 3 @ 0 (goes back;
    # the batch at 0 ends at offset 2, none ends at 3), 8 @ p1 (the batch at p1 ends at 5; a later batch ends
    # at 8: written by a multi-batch append)
    (d / "00000000000000000000.index").write_bytes(kafka_index_entries([(5, 7), (4, 7), (3, 0), (8, p1)]))
    f = str(d / "00000000000000000000.index")
    got = [(r["id"], r["code"], r["file"], r["position"], r["offset"], r["expected"], r["actual"], r["message"])
           for r in _findings(run_cli, d, f)]
    assert got == [
        ("F1", "kafka.index-position-not-batch", f, 0, 5, None, 7,
         "entry 0 points at position 7, where no batch starts (log is 282 bytes)"),
        ("F2", "kafka.index-not-monotonic", f, 8, 4, None, None, "entry 1 (4 @ 7) does not increase after (5 @ 7)"),
        ("F3", "kafka.index-position-not-batch", f, 8, 4, None, 7,
         "entry 1 points at position 7, where no batch starts (log is 282 bytes)"),
        ("F4", "kafka.index-not-monotonic", f, 16, 3, None, None, "entry 2 (3 @ 0) does not increase after (4 @ 7)"),
        ("F5", "kafka.index-offset-mismatch", f, 16, 3, 2, 3, "entry 2: index offset 3, log offset 2 at position 0"),
        ("F6", "kafka.index-append-path", f, 24, 8, 5, 8,
         f"entry 3: offset 8 at position {p1}, where a batch ending at 5 starts; 8 is the last offset of a later "
         "batch: written by a multi-batch append (follower, cleaner or a legacy message set); lookups stay "
         "correct (DumpLogSegments reports it as a mismatch)"),
    ]


def test_every_wrong_time_index_entry_is_reported_in_order(run_cli, part):
    d, _ = part
    t0 = 1_700_000_000_000          # kafka_builder().T0 is what the batches' timestamps are near; these are not them
    entries = [(t0 + 9, 2), (t0 + 5, 40), (t0 + 5, 4)]
    (d / "00000000000000000000.timeindex").write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries))
    f = str(d / "00000000000000000000.timeindex")
    got = [(r["code"], r["position"], r["offset"], r["expected"], r["actual"], r["message"])
           for r in _findings(run_cli, d, f)]
    from builders import kafka_builder

    max_ts = kafka_builder().T0 + 3                 # kafka_batch: max timestamp T0 + number of records
    assert got == [
        ("kafka.timeindex-sanity", 24, None, None, None,
         "last entry's timestamp/offset is below the first/base (Kafka's sanity check fails)"),
        ("kafka.timeindex-timestamp-mismatch", 0, 2, max_ts, t0 + 9,
         f"entry 0: timestamp {t0 + 9}, but the batch ending at offset 2 has max timestamp {max_ts}"),
        ("kafka.timeindex-out-of-order", 12, 40, f"> {t0 + 9}", t0 + 5,
         f"entry 1: timestamp {t0 + 5} is not after the previous entry's {t0 + 9}"),
        ("kafka.timeindex-offset-not-found", 12, 40, None, None, "entry 1: offset 40 is in no batch of the log"),
        ("kafka.timeindex-out-of-order", 24, 4, f"> {t0 + 5}", t0 + 5,
         f"entry 2: timestamp {t0 + 5} is not after the previous entry's {t0 + 5}"),
        ("kafka.timeindex-timestamp-mismatch", 24, 4, max_ts, t0 + 5,
         f"entry 2: timestamp {t0 + 5}, but the batch holding offset 4 has max timestamp {max_ts}"),
    ]
