"""Counts read as English ('1 topic', '2 batches') and Kafka tables speak of partitions, not queues."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from conftest import FIXTURES


@pytest.mark.parametrize("n, word, want", [(1, "topic", "1 topic"), (2, "topic", "2 topics"), (0, "queue", "0 queues"),
                                           (1, "batch", "1 batch"), (3, "batch", "3 batches"),
                                           (1, "entry", "1 entry"), (5, "entry", "5 entries"), (2, "key", "2 keys")])
def test_plural(n, word, want):
    from mqtool.common import plural

    assert plural(n, word) == want


@pytest.mark.parametrize("store, unit, other", [(FIXTURES / "kafka" / "logdir", "partition", "queue"),
                                                (FIXTURES / "rocketmq" / "store", "queue", "partition")])
def test_info_names_the_family_unit(store, unit, other):
    from mqtool.info import build_info
    from mqtool.options import InfoOptions
    from mqtool.render_info import render_info

    info = build_info(store, None, InfoOptions())
    buf = io.StringIO()
    render_info(info, Console(file=buf, width=200, color_system=None))
    text = buf.getvalue()
    assert f"Per {unit}" in text and f"Per {other}" not in text
    assert " 1 topics" not in text and " 1 batches" not in text
    n = len(info.topics)
    assert f" in {n} topic{'' if n == 1 else 's'})" in text          # spelled out here, independently of plural()


def test_generic_tables_have_headers_in_words(run_cli):
    """decode-msgid and LiteMQ's checkpoint/abort/index dumps have no column list: headers come from the keys."""
    from mqtool.render import key_columns

    assert [c.header for c in key_columns(["queue_offset", "producer_id", "crc_ok"])] == \
        ["Queue offset", "Producer ID", "CRC ok"]
    code, out, _ = run_cli("decode-msgid", "0A00000500002A9F00000000000002FF", "--as", "table")
    assert code == 0 and "_" not in "".join(line for line in out.splitlines() if line.startswith("┃"))
