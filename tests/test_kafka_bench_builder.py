"""The Kafka bench input builder (bench/build_kafka.py) writes what a broker would: every batch reads back with
a valid CRC-32C through mqtool, every codec decompresses, and its .index/.timeindex equal a second
implementation of the recovery rule (mqtool's rebuild-index)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.build_kafka import build_store  # noqa: E402


def _summary(out: str) -> dict:
    return [json.loads(line) for line in out.splitlines() if line.strip()][-1]


def test_kafka_bench_input_is_sound(tmp_path, run_cli):
    info = build_store(tmp_path / "store", 3 << 20, segment_bytes=1 << 20, log=lambda s: None)
    assert info["segments"] >= 3                           # rolled at segment_bytes
    assert all(n > 0 for n in info["records_by_codec"].values())   # every codec present
    code, out, _ = run_cli("verify", "store", tmp_path / "store", "--deep", "--json")
    s = _summary(out)
    assert code == 0 and s["verdict"] == "sound", out[-2000:]
    assert s["records"] == info["messages"] and s["batches"] == info["batches"]
    assert s["bytes"] == info["data_bytes"]
    code, out, _ = run_cli("rebuild-index", tmp_path / "store", "--compare", "--json")
    s = _summary(out)
    assert code == 0 and s["differing"] == 0 and s["identical"] == 3 * info["segments"], out[-2000:]
