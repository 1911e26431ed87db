"""The row schemas (``mqtool/<family>/rows.py``) are the one declaration of every output field: the Parquet/Spark
schema, the NDJSON key order of the Python and compiled row builders, the compiled helpers' key tuples and the
docs' field tables all agree with them (#20 item 3)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.kafka import ranges as KR, rows as KRows
from mqtool.litemq import ranges as LR, rows as LRows
from mqtool.options import DumpOptions, ScanStats
from mqtool.rocketmq import nativedump, ops as rops, ranges as RR, rows as RRows
from mqtool.rows import Field, RowSchema, export_fields

from tests.conftest import require_realdata

REPO = Path(__file__).resolve().parent.parent

# The export schemas as they were written by hand before the schemas existed (commit c1ba2e8, the ROW_FIELDS
# literals of mqtool/<family>/ranges.py): the Parquet/Spark schema must not change.
ROCKETMQ_ROW_FIELDS = [
    ("store", "string"), ("kind", "string"), ("file", "string"), ("position", "long"), ("offset", "long"),
    ("size", "int"), ("magic", "string"), ("body_crc", "long"), ("crc_ok", "bool"), ("queue_id", "int"),
    ("flag", "int"), ("queue_offset", "long"), ("physical_offset", "long"), ("sys_flag", "int"),
    ("transaction", "string"), ("born_timestamp", "long"), ("born_host", "string"), ("store_timestamp", "long"),
    ("store_host", "string"), ("reconsume_times", "int"), ("prepared_transaction_offset", "long"),
    ("topic", "string"), ("properties", "map<string,string>"), ("keys", "array<string>"), ("tags", "string"),
    ("uniq_key", "string"), ("msg_id", "string"), ("body_size", "int"), ("compression", "string"),
    ("property_pairs", "array<array<string>>"), ("body", "string"), ("body_error", "string"),
]
LITEMQ_ROW_FIELDS = [
    ("store", "string"), ("kind", "string"), ("file", "string"), ("position", "long"), ("offset", "long"),
    ("size", "long"), ("msg_id", "string"), ("topic", "string"), ("queue_id", "long"), ("tags", "array<string>"),
    ("keys", "array<string>"), ("properties", "map<string,string>"), ("body_size", "long"),
    ("message_type", "string"), ("message_type_code", "int"), ("priority", "int"), ("reliability", "int"),
    ("delay_time", "long"), ("transaction_id", "string"), ("status", "string"), ("status_code", "int"),
    ("sharding_key", "string"), ("broadcast", "bool"), ("born_timestamp", "long"), ("born_host", "string"),
    ("store_host", "string"), ("store_timestamp", "long"), ("queue_offset", "long"), ("commitlog_offset", "long"),
    ("store_size", "long"), ("consume_start_time", "long"), ("consume_end_time", "long"), ("consume_count", "long"),
    ("stale", "bool"), ("state", "string"), ("bad_utf8", "array<string>"), ("body", "string"),
]
KAFKA_ROW_FIELDS = [
    ("store", "string"), ("topic", "string"), ("partition", "int"), ("kind", "string"), ("file", "string"),
    ("position", "long"), ("size", "long"), ("magic", "int"), ("offset", "long"), ("last_offset", "long"),
    ("count", "int"), ("codec", "string"), ("timestamp_type", "string"), ("timestamp", "long"),
    ("base_timestamp", "long"), ("partition_leader_epoch", "int"), ("producer_id", "long"),
    ("producer_epoch", "int"), ("base_sequence", "int"), ("last_sequence", "int"), ("is_transactional", "bool"),
    ("is_control", "bool"), ("delete_horizon_ms", "long"), ("crc", "long"), ("crc_ok", "bool"), ("error", "string"),
    ("flags", "string"), ("batch_offset", "long"), ("key_size", "int"), ("value_size", "int"), ("sequence", "int"),
    ("header_keys", "array<string>"), ("control_type", "string"), ("coordinator_epoch", "int"), ("key", "string"),
    ("value", "string"), ("headers", "array<array<string>>"), ("damage", "string"), ("message", "string"),
]


@pytest.mark.parametrize("mod, frozen", [(RR, ROCKETMQ_ROW_FIELDS), (LR, LITEMQ_ROW_FIELDS), (KR, KAFKA_ROW_FIELDS)])
def test_export_schema_unchanged(mod, frozen):
    assert mod.ROW_FIELDS == frozen


def test_export_union_unchanged():
    from mqtool import dataset

    want = dataset.union_fields({"rocketmq": ROCKETMQ_ROW_FIELDS, "litemq": LITEMQ_ROW_FIELDS,
                                 "kafka": KAFKA_ROW_FIELDS}) + list(dataset.FULL_COLUMNS)
    assert dataset.union_fields(dataset.family_fields()) + list(dataset.FULL_COLUMNS) == want


_SPARK_TYPES = {"string": "string", "bigint": "long", "int": "int", "boolean": "bool",
                "map<string,string>": "map<string,string>", "array<string>": "array<string>",
                "array<array<string>>": "array<array<string>>"}


def _section(doc: str, title: str) -> str:
    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    start = text.index(title)
    return text[start:text.index("\n### ", start + 1)]


def test_rocketmq_schema_equals_the_spark_doc_table():
    """docs/spark.md lists the RocketMQ columns by hand in a two-column table (left column, then right)."""
    left, right = [], []
    for line in _section("spark.md", "### Schema: RocketMQ messages").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        for names, typ, side in ((cells[0], cells[1], left), (cells[3], cells[4], right)):
            for n in re.findall(r"`([a-z0-9_]+)`", names):
                side.append((n, _SPARK_TYPES[typ.split(" (")[0]]))
    assert left + right == RR.ROW_FIELDS


def test_litemq_schema_equals_the_spark_doc_list():
    text = _section("spark.md", "### Schema: LiteMQ messages")
    text = text[text.index("first:") + 6:text.index("A NDJSON row")]
    assert re.findall(r"`([a-z0-9_]+)`", text) == [n for n, _ in LR.ROW_FIELDS]


def test_kafka_schema_equals_the_spark_doc_lists():
    text = _section("spark.md", "### Schema: Kafka log rows")
    docs = {}
    for kind in ("batch", "record", "damage"):
        item = re.search(rf"^\* `{kind}`[^:]*:(.*?)(?=^\* |^`mqtool export`)", text, re.S | re.M).group(1)
        item = re.sub(r"\([^)]*\)", "", item.split(" — ")[0])     # no values, no note on `decoded` (no column)
        docs[kind] = [n for n in re.findall(r"`([a-z0-9_]+)`", item) if n != "body"]    # "with `body` set"
    for schema in KRows.KINDS:       # the prose lists the names of each kind (its own order): the same set
        assert set(docs[schema.kind]) == {n for n, _ in schema.export_fields()} - {"kind"}, schema.kind


# ---- the compiled helpers' key order ------------------------------------------------------------------------------

def _c_enum(path: str, first: str) -> list[str]:
    """The key enum of a C helper (``enum { K_FIRST, …, N… }``), as lower-case names without ``K_``."""
    src = (REPO / path).read_text(encoding="utf-8")
    m = re.search(r"enum\s*\{\s*(K_" + first + r"\b[^}]*)\}", src)
    assert m, f"{path}: no key enum starting with K_{first} (the compiled helper changed: update this test)"
    return [n[2:].lower() for n in re.findall(r"\bK_\w+", m.group(1))]


# the C names that abbreviate a row key (written here, independently of the schema)
_C_ABBREVIATIONS = {"born_ts": "born_timestamp", "store_ts": "store_timestamp", "reconsume": "reconsume_times",
                    "prepared": "prepared_transaction_offset"}


def test_rocketmq_c_key_order_equals_the_schema():
    c = [_C_ABBREVIATIONS.get(n, n) for n in _c_enum("mqtool/_native/rmqdump.h", "KIND")]
    assert tuple(c) == nativedump.ROW_KEYS == RRows.NATIVE_KEYS
    names = RRows.MESSAGE.names()
    assert [n for n in names if n in c] == c        # schema order


def test_kafka_c_key_order_equals_the_schema():
    c = _c_enum("mqtool/_native/kafka.c", "OFFSET")
    assert tuple(c) == KRows.NATIVE_RECORD_KEYS
    assert all(n in KRows.RECORD.by_name for n in c)


# ---- NDJSON key order: Python rows == compiled rows == schema -------------------------------------------------------

def _problems(schemas, rows, kinds) -> list:
    by_kind = {s.kind: s for s in schemas}
    out = []
    seen = set()
    for r in rows:
        if r.get("kind") not in kinds:
            continue
        seen.add(r["kind"])
        p = by_kind[r["kind"]].check_row(r)
        if p:
            out.append((r.get("file"), r.get("position"), p))
    assert seen, "no rows of the kinds checked"
    return out[:5]


def _rmq_rows(store, native_on, monkeypatch, **kw):
    monkeypatch.setenv("MQTOOL_NATIVE", "1" if native_on else "0")
    _, rows, _ = rops.dump("commitlog", str(store), DumpOptions(jobs=1, **kw), ScanStats())
    rows = list(rows)
    monkeypatch.undo()
    return rows


@pytest.mark.parametrize("body", ["none", "text", "base64"])
def test_rocketmq_rows_keys_in_schema_order(monkeypatch, body):
    stores = [REPO / "fixtures" / "rocketmq" / "store"] + sorted(
        p.parent for p in require_realdata("rocketmq").glob("*/store/commitlog") if p.is_dir())
    checked = 0
    for store in stores:
        py = _rmq_rows(store, False, monkeypatch, body=body, include_blank=True)
        nat = _rmq_rows(store, True, monkeypatch, body=body, include_blank=True)
        assert [list(r) for r in nat] == [list(r) for r in py], store
        assert _problems([RRows.MESSAGE, RRows.BLANK], py, {"message", "blank"}) == [], store
        checked += len(py)
    assert checked > 100


def _kafka_rows(path, monkeypatch, native_on, **kw):
    from mqtool.kafka import ops as kops

    if not native_on:
        monkeypatch.setenv("MQTOOL_NATIVE", "0")
    _, rows, _ = kops.dump("kafka", str(path), DumpOptions(jobs=1, **kw), ScanStats())
    rows = list(rows)
    monkeypatch.undo()
    return rows


@pytest.mark.parametrize("kw", [dict(deep=True), dict(print_data=True), dict(print_data=True, body="base64")])
def test_kafka_rows_keys_in_schema_order(monkeypatch, kw):
    stores = [REPO / "fixtures" / "kafka" / "logdir"] + [
        p for p in sorted(require_realdata("kafka").iterdir()) if p.is_dir()]
    checked = 0
    for store in stores:
        py = _kafka_rows(store, monkeypatch, False, **kw)
        nat = _kafka_rows(store, monkeypatch, True, **kw)
        assert [list(r) for r in nat] == [list(r) for r in py], store
        assert _problems(KRows.KINDS, py, {"batch", "record", "damage"}) == [], store
        checked += len(py)
    assert checked > 100


@pytest.mark.parametrize("body", ["none", "text"])
def test_litemq_rows_keys_in_schema_order(body):
    from mqtool.litemq import ops as lops

    stores = [REPO / "fixtures" / "litemq" / "store", REPO / "fixtures" / "litemq" / "restarted"] + [
        require_realdata("litemq", name, "data", "broker") for name in ("clean", "crash")]
    for store in stores:
        _, rows, _ = lops.dump("commitlog", str(store), DumpOptions(jobs=1, body=body), ScanStats())
        assert _problems([LRows.RECORD], list(rows), {"message"}) == [], store
        _, rows, _ = lops.dump("consumequeue", str(store), DumpOptions(jobs=1), ScanStats())
        assert _problems([LRows.CQ], list(rows), {"cq_entry"}) == [], store


# ---- the schema machinery ------------------------------------------------------------------------------------------

def test_check_row_finds_undeclared_misordered_and_missing_keys():
    s = RowSchema("x", [Field("a", "long"), Field("b", "string", optional=True), Field("c", "bool")])
    assert s.check_row({"a": 1, "b": "x", "c": True}) == []
    assert s.check_row({"a": 1, "c": True}) == []
    assert s.check_row({"c": True, "a": 1}) == ["key 'a' out of schema order"]
    assert s.check_row({"a": 1, "c": True, "z": 0}) == ["undeclared key 'z'"]
    assert s.check_row({"a": 1}) == ["required key 'c' missing"]


def test_export_fields_union_and_conflicts():
    a = RowSchema("a", [Field("x", "long"), Field("y", "string", export=False), Field("z", "int")])
    b = RowSchema("b", [Field("x", "long"), Field("w", "bool")])
    assert export_fields([Field("store", "string")], [a, b]) == [("store", "string"), ("x", "long"), ("z", "int"),
                                                                 ("w", "bool")]
    with pytest.raises(TypeError):
        export_fields([], [a, RowSchema("c", [Field("z", "long")])])
    with pytest.raises(TypeError):
        Field("d", "json")          # a JSON value is no export column


def test_a_new_column_is_one_declaration():
    """A field added to a schema reaches the export schema and, with a header and a place in the table order,
    the table; nothing else is edited."""
    extra = Field("new_col", "long", "a new column", header="New", justify="right")
    s = RowSchema("message", [*RRows.MESSAGE, extra])
    assert export_fields(RRows.CONTEXT, [s])[-1] == ("new_col", "long")
    assert [c.key for c in s.columns(RRows.MESSAGE_TABLE + ("new_col",))][-1] == "new_col"


def test_table_columns_come_from_the_schema():
    assert [c.key for c in rops.MESSAGE_COLUMNS] == list(RRows.MESSAGE_TABLE)
    for cols, schema in ((rops.MESSAGE_COLUMNS, RRows.MESSAGE), (LRows.MESSAGE_COLUMNS, LRows.RECORD),
                         (LRows.CQ_COLUMNS, LRows.CQ)):
        for c in cols:
            assert c.header and schema[c.key].name == c.key
    from mqtool.kafka.dump import LOG_COLUMNS
    assert [c.key for c in LOG_COLUMNS] == list(KRows.LOG_TABLE)


def test_docs_field_tables_are_current():
    r = subprocess.run([sys.executable, str(REPO / "tools" / "gen_row_docs.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _spec(cols) -> list[tuple]:
    return [(c.key, c.header, c.justify, c.max_width, c.no_wrap, c.priority) for c in cols]


def test_consumequeue_tables_unchanged():
    """The consumequeue tables as they were written by hand before the schemas (commit c1ba2e8)."""
    from mqtool.render import Column

    assert _spec(RRows.CQ_COLUMNS) == _spec([
        Column("topic", "Topic"), Column("queue_id", "Q", justify="right"),
        Column("queue_offset", "QOffset", justify="right"), Column("offset", "CL offset", justify="right"),
        Column("size", "Size", justify="right"), Column("tags_code", "TagsCode", justify="right"),
        Column("state", "State"), Column("file", "File", max_width=50)])
    assert _spec(LRows.CQ_COLUMNS) == _spec([
        Column("topic", "Topic"), Column("queue_id", "Q", justify="right"),
        Column("queue_offset", "QOffset", justify="right"), Column("offset", "CommitLog offset", justify="right"),
        Column("size", "Size", justify="right"), Column("tag_hash", "TagHash", justify="right"),
        Column("store_timestamp", "Stored (UTC)"), Column("stale_reason", "Stale"),
        Column("file", "File", max_width=48)])


def test_rocketmq_consumequeue_rows_keys_in_schema_order():
    stores = [REPO / "fixtures" / "rocketmq" / "store"] + sorted(
        p.parent for p in require_realdata("rocketmq").glob("*/store/consumequeue") if p.is_dir())
    for store in stores:
        _, rows, _ = rops.dump("consumequeue", str(store), DumpOptions(jobs=1), ScanStats())
        assert _problems([RRows.CQ_UNIT], list(rows), {"cq_unit"}) == [], store


def test_message_tables_unchanged():
    """The message tables as they were written by hand before the schemas (commit c1ba2e8; formatters aside,
    whose output the table tests check)."""
    from mqtool.kafka.dump import LOG_COLUMNS
    from mqtool.render import Column

    rocketmq = [Column("offset", "Offset", justify="right", no_wrap=True, priority=0),
        Column("size", "Size", justify="right", no_wrap=True, priority=3),
        Column("magic", "Ver", priority=7),
        Column("topic", "Topic", max_width=40, priority=0),
        Column("queue_id", "Q", justify="right", priority=1),
        Column("queue_offset", "QOffset", justify="right", priority=1),
        Column("tags", "Tags", max_width=20, priority=3),
        Column("keys", "Keys", max_width=30, priority=2),
        Column("store_timestamp", "Stored (UTC)", fmt=None, no_wrap=True, priority=2),
        Column("born_host", "Born host", priority=6),
        Column("transaction", "Txn", priority=5),
        Column("compression", "Comp", priority=5),
        Column("body_size", "Body", justify="right", priority=4),
        Column("crc_ok", "CRC", priority=3),
        Column("msg_id", "MsgId", no_wrap=True, priority=0)]
    rocketmq_body = Column("body", "Body data", max_width=60, priority=2)
    litemq = [Column("offset", "Offset", justify="right", priority=0),
        Column("size", "Size", justify="right", priority=3),
        Column("topic", "Topic", priority=0),
        Column("queue_id", "Q", justify="right", priority=1),
        Column("message_type", "Type", priority=5),
        Column("msg_id", "MessageID", max_width=28, priority=0),
        Column("tags", "Tags", max_width=20, priority=3),
        Column("keys", "Keys", max_width=24, priority=2),
        Column("store_timestamp", "Stored (UTC)", fmt=None, priority=2, no_wrap=True),
        Column("body_size", "Body", justify="right", priority=4),
        Column("stale", "Stale", fmt=None, priority=1)]
    kafka = [Column("kind", "Kind", priority=4),
        Column("file", "File", fmt=None, max_width=26, priority=3),
        Column("position", "Pos", justify="right", priority=2),
        Column("offset", "Offset", justify="right", priority=0),
        Column("last_offset", "Last", justify="right", priority=3),
        Column("count", "N", justify="right", priority=3),
        Column("size", "Size", justify="right", priority=4),
        Column("magic", "M", justify="right", priority=6),
        Column("codec", "Codec", priority=5),
        Column("timestamp", "Timestamp", fmt=None, priority=1, no_wrap=True),
        Column("producer_id", "PID", justify="right", fmt=None, priority=5),
        Column("flags", "Flags", priority=5),
        Column("crc_ok", "CRC ok", priority=3),
        Column("decoded", "Decoded", fmt=None, max_width=60, priority=1),
        Column("key", "Key", fmt=None, max_width=30, priority=1),
        Column("value", "Value", fmt=None, max_width=40, priority=2)]
    assert _spec(rops.MESSAGE_COLUMNS) == _spec(rocketmq)
    assert _spec([rops.BODY_COLUMN]) == _spec([rocketmq_body])
    assert _spec(LRows.MESSAGE_COLUMNS) == _spec(litemq)
    assert _spec(LOG_COLUMNS) == _spec(kafka)


def test_kafka_index_tables_unchanged_and_rows_in_schema_order():
    """The index file tables as they were written by hand before the schemas (commit c1ba2e8), and the rows of
    every index file of the fixture and the real stores in schema order."""
    from mqtool.kafka import ops as kops
    from mqtool.kafka.dump import columns_for
    from mqtool.render import Column

    assert _spec(columns_for("index")) == _spec([
        Column("file", "File"), Column("position", "Pos", justify="right"),
        Column("offset", "Offset", justify="right"), Column("log_position", "Log position", justify="right")])
    assert _spec(columns_for("timeindex")) == _spec([
        Column("file", "File"), Column("position", "Pos", justify="right"),
        Column("timestamp", "Timestamp", justify="right"), Column("time", "Time"),
        Column("offset", "Offset", justify="right")])
    assert _spec(columns_for("txnindex")) == _spec([
        Column("file", "File"), Column("position", "Pos", justify="right"),
        Column("producer_id", "PID", justify="right"), Column("first_offset", "First", justify="right"),
        Column("last_offset", "Last", justify="right"), Column("last_stable_offset", "LSO", justify="right")])
    roots = [REPO / "fixtures" / "kafka" / "logdir", require_realdata("kafka")]
    seen = set()
    for suffix, schema in ((".index", KRows.INDEX_ENTRY), (".timeindex", KRows.TIME_INDEX_ENTRY),
                           (".txnindex", KRows.ABORTED_TXN)):
        for f in sorted(p for root in roots for p in root.rglob("*" + suffix))[:40]:
            _, rows, _ = kops.dump("kafka", str(f), DumpOptions(jobs=1), ScanStats())
            rows = list(rows)
            if rows:
                seen.add(suffix)
                assert _problems([schema], rows, {schema.kind}) == [], f
    assert seen == {".index", ".timeindex", ".txnindex"}
