"""write_ndjson writes in bounded batches, also for rows pre-rendered by --jobs workers (it once kept every
pre-rendered line until the end: a 1 GiB `dump --json --jobs 2` peaked at 1.3 GB RSS)."""
from __future__ import annotations

import io
import json

import pytest

from mqtool import render
from mqtool.render import PreRendered, write_ndjson


class _Out(io.StringIO):
    def __init__(self):
        super().__init__()
        self.buffer = _Bin()


class _Bin:
    def __init__(self):
        self.writes: list[bytes] = []

    def write(self, b):
        self.writes.append(bytes(b))

    def flush(self):
        pass


@pytest.mark.skipif(render._orjson is None, reason="the batched binary writer needs orjson")
def test_prerendered_rows_are_written_in_batches():
    out = _Out()
    rows = []
    for i in range(1000):
        rows.append(PreRendered(json.dumps({"i": i})) if i < 900 else {"i": i})   # a long run of worker lines
    assert write_ndjson(iter(rows), out) == 1000
    assert len(out.buffer.writes) >= 1000 // 32
    assert max(len(w) for w in out.buffer.writes) < 64 * 20
    lines = b"".join(out.buffer.writes).decode().splitlines()
    assert [json.loads(x)["i"] for x in lines] == list(range(1000))
