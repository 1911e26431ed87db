"""Tables fit the terminal: columns chosen by priority for the width, identifiers whole, a vertical view when
a row cannot fit or one record is shown; --fields, --as table/vertical/csv/tsv."""
from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from rich.console import Console

from conftest import FIXTURES

RMQ = FIXTURES / "rocketmq" / "store"
KAFKA = FIXTURES / "kafka" / "logdir"
LITEMQ = FIXTURES / "litemq" / "store"


def _rows(run_cli, *args):
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    return [json.loads(x) for x in out.splitlines()]


def _draw(rows, columns, width):
    from mqtool import render

    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, force_terminal=False)
    render.render_table(rows, columns, console=con)
    return buf.getvalue()


def _columns(family):
    if family == "rocketmq":
        from mqtool.rocketmq.ops import MESSAGE_COLUMNS
        return MESSAGE_COLUMNS
    if family == "litemq":
        from mqtool.litemq.rows import MESSAGE_COLUMNS
        return MESSAGE_COLUMNS
    from mqtool.kafka.dump import LOG_COLUMNS
    return LOG_COLUMNS


CASES = {"rocketmq": (("dump", "commitlog", RMQ), ("offset", "msg_id", "topic")),
         "litemq": (("dump", "commitlog", LITEMQ), ("offset", "msg_id", "topic")),
         "kafka": (("dump", "kafka", KAFKA, "--print-data"), ("offset",))}


@pytest.mark.parametrize("family", sorted(CASES))
@pytest.mark.parametrize("width", [80, 100, 120, 160, 220])
def test_tables_fit_and_identifiers_stay_whole(run_cli, family, width):
    args, idents = CASES[family]
    rows = _rows(run_cli, *args)[:30]
    columns = _columns(family)
    text = _draw(rows, columns, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines)
    for r in rows:
        for key in idents:
            if r.get(key) is not None:
                assert str(r[key]) in text, (key, r[key])          # never truncated or folded
    header = next(line for line in lines if line.startswith("┃"))
    shown = [h.strip() for h in header.strip("┃").split("┃")]
    assert all(h in {c.header for c in columns} for h in shown), shown    # headers never split mid-word
    if width >= 220:                  # room for all: only the columns empty in every row are left out
        assert set(shown) == {c.header for c in columns if any(c.cell(r) for r in rows) or c.priority == 0}


def test_least_important_columns_go_first():
    from mqtool import tables
    from mqtool.rocketmq.ops import MESSAGE_COLUMNS

    row = {"offset": 123456, "size": 300, "magic": "v1", "topic": "Orders", "queue_id": 1, "queue_offset": 7,
           "tags": "T", "keys": ["k1"], "store_timestamp": 1795338600007, "born_host": "10.0.0.1:1234",
           "transaction": None, "compression": None, "body_size": 90, "crc_ok": True,
           "msg_id": "0A00000500002A9F00000000000002FF"}
    shown, _ = tables.fit(MESSAGE_COLUMNS, [row], 80)
    keys = [c.key for c in shown]
    assert {"offset", "topic", "msg_id"} <= set(keys)
    left_out = {c.key for c in MESSAGE_COLUMNS} - set(keys)
    assert "born_host" in left_out and "magic" in left_out
    assert tables.table_width(tables.natural_widths(shown, [row])) <= 80 or \
        tables.table_width(tables.least_width(c, w) for c, w in zip(shown, tables.natural_widths(shown, [row]))) <= 80


def test_a_row_that_cannot_fit_is_shown_vertically(run_cli):
    rows = _rows(run_cli, "dump", "commitlog", RMQ)
    long_topic = next(r for r in rows if len(r["topic"]) > 100)
    text = _draw([long_topic, rows[0]], _columns("rocketmq"), 100)
    assert "-[ record 1 ]" in text and "-[ record 2 ]" in text
    assert long_topic["topic"] in text.replace("\n", "") and long_topic["msg_id"] in text


def test_one_record_is_shown_vertically(run_cli):
    rows = _rows(run_cli, "dump", "commitlog", RMQ)[:1]
    text = _draw(rows, _columns("rocketmq"), 200)
    assert text.count("-[ record") == 1
    assert f"Topic : {rows[0]['topic']}" in text and f"MsgId : {rows[0]['msg_id']}" in text


def test_fields_choose_columns_in_json_and_table(run_cli):
    code, out, _ = run_cli("dump", "commitlog", RMQ, "--json", "--fields", "offset,topic,keys", "--limit", "3")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(rows) == 3 and all(list(r) == ["offset", "topic", "keys"] for r in rows)
    code, out, _ = run_cli("dump", "commitlog", RMQ, "--as", "table", "--fields", "Offset,msg_id", "--limit", "2")
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert [h.strip() for h in header.strip("┃").split("┃")] == ["Offset", "MsgId"]


def test_table_forced_in_a_pipe_keeps_every_column(run_cli):
    code, out, _ = run_cli("dump", "commitlog", RMQ, "--as", "table", "--limit", "2")
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert code == 0 and "Born host" in header and "MsgId" in header and "Txn" in header


@pytest.mark.parametrize("mode, delim", [("csv", ","), ("tsv", "\t")])
def test_csv_and_tsv_read_back(run_cli, mode, delim):
    want = _rows(run_cli, "dump", "commitlog", RMQ)
    code, out, _ = run_cli("dump", "commitlog", RMQ, "--as", mode)
    got = list(csv.DictReader(io.StringIO(out), delimiter=delim))
    assert code == 0 and len(got) == len(want)
    for g, w in zip(got, want):
        assert int(g["offset"]) == w["offset"] and g["topic"] == w["topic"] and g["msg_id"] == w["msg_id"]
        assert g["keys"] == " ".join(w["keys"])


def test_fields_apply_to_every_ndjson_row_of_every_command(run_cli, tmp_path):
    """--fields was offered by every command with --json but ignored by info, verify, inspect, explain,
    rebuild-index and the summaries of query --unconsumed-by, diff and carve: every NDJSON row on stdout now
    has exactly the keys asked for, in that order (null where a row has none)."""
    seg = RMQ / "commitlog" / "00000000000000000000"
    commands = [("info", RMQ), ("verify", "store", RMQ), ("verify", "store", KAFKA, "--deep"),
                ("rebuild-index", RMQ, "--compare"), ("query", RMQ, "--unconsumed-by", "billing"),
                ("inspect", seg, "--position", "0"), ("diff", RMQ, RMQ), ("explain", "cq-dangling"),
                ("explain", "--list"), ("carve", seg), ("dump", "kafka", KAFKA),
                ("export", LITEMQ, "--to", tmp_path / "x")]
    for args in commands:
        if args[0] == "export":
            pytest.importorskip("pyarrow")
        code, out, err = run_cli(*args, "--json", "--fields", "kind,code,topic")
        rows = [json.loads(x) for x in out.splitlines()]
        assert code in (0, 1) and rows, (args, err)
        assert all(list(r) == ["kind", "code", "topic"] for r in rows), (args, rows[:3])
    summary = [r for r in _rows(run_cli, "query", RMQ, "--unconsumed-by", "billing") if r["kind"] != "message"]
    assert summary and all(r["topic"] == "Orders" for r in summary)       # the summary rows are projected too


@pytest.mark.parametrize("args", [("info", RMQ), ("inspect", RMQ / "commitlog" / "00000000000000000000",
                                                   "--position", "0"), ("verify", "store", RMQ),
                                  ("rebuild-index", RMQ, "--compare"), ("explain", "cq-dangling")])
def test_fields_without_ndjson_where_no_table_shows_them_is_a_usage_error(run_cli, args):
    """A view for people that is no table of those fields (info's panels, inspect's tree, verify's finding
    lines, explain's text) cannot honour --fields: one line, exit 2, instead of silently ignoring it."""
    code, out, err = run_cli(*args, "--as", "table", "--fields", "kind")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--fields" in err and "--json" in err, err


def test_fields_cannot_be_empty(run_cli):
    code, _, err = run_cli("dump", "commitlog", RMQ, "--fields", ",")
    assert code == 2 and "--fields" in err


def test_paths_in_cells_are_relative_to_the_store(run_cli, tmp_path):
    """Table cells name files below the store relative to it; NDJSON keeps the whole path."""
    import shutil

    store = tmp_path / "a-long-case-directory-name" / "store"
    shutil.copytree(RMQ, store)
    seg = store / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    data[4:8] = b"\0\0\0\0"
    seg.write_bytes(bytes(data))
    for view in (("--as", "table", "--table", "--fields", "code,file,position"), ("--as", "table")):   # tables; lines
        code, out, _ = run_cli("verify", "commitlog", store, *view)
        lines = [line for line in out.splitlines() if "bad-magic" in line or "commitlog/0" in line]
        assert code == 1 and any("commitlog/00000000000000000000" in line for line in lines)
        assert not any(str(tmp_path) in line for line in lines)
    code, out, _ = run_cli("verify", "commitlog", store, "--json")
    assert str(seg) in out


def test_decoded_internal_records_in_tables(run_cli):
    """__consumer_offsets records: the table shows what they decode to (expected.json says batch 0 holds
    OffsetCommit records and batch 5 GroupMetadata), not only raw key/value bytes."""
    from conftest import require_realdata

    part = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "coordinator", "__consumer_offsets-0")
    code, out, _ = run_cli("dump", "kafka", part, "--print-data", "--as", "vertical")
    assert code == 0
    decoded = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("Decoded :")]
    assert any(d.startswith("OffsetCommit") and "group=" in d and "topic=" in d for d in decoded)
    assert any(d.startswith("GroupMetadata") for d in decoded)


# ---- large tables: rows drawn without rich's per-cell cost, exactly as rich draws them -----------------------------

_CELL = st.one_of(
    st.text(alphabet=st.sampled_from("ab c-/_.:0123456789"), max_size=70),        # plain words, long runs
    st.text(max_size=30),                                    # any text: controls (escaped), wide characters
    st.sampled_from(["", " ", "x" * 120, "a " * 40, "主题" * 20, "ключ значение " * 5, "e\u0301",
                     "\u200b" * 3, "a\tb\nc", "🙂" * 9, "  lead", "trail  "]),
    st.integers(-(1 << 63), (1 << 63) - 1))


def _rich_and_fast(columns, rows, width, title, need_fast=False, **console_kw):
    """(what rich's table of the rows prints, what _TableRows prints) on a console ``width`` wide (``need_fast``:
    the batch must not fall back to rich's table: no column is squeezed to its padding)."""
    from mqtool import render, tables

    fitted = tables.natural_widths(columns, rows)
    out = []
    for fast in (False, True):
        buf = io.StringIO()
        con = Console(file=buf, width=width, legacy_windows=False, **console_kw)
        if fast:
            drawn = render._TableRows.of(columns, fitted, rows, title, con)
            assert isinstance(drawn, render._TableRows) or not need_fast
        else:
            drawn = render._new_table(columns, fitted, title)
            for r in rows:
                drawn.add_row(*[render.text(c.cell(r)) for c in columns])
        con.print(drawn)
        out.append(buf.getvalue())
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cells=st.lists(st.lists(_CELL, min_size=10, max_size=10), min_size=1, max_size=12),
       width=st.sampled_from([40, 80, 100, 160, 400]), title=st.sampled_from([None, "Findings"]),
       console=st.sampled_from([dict(color_system=None), dict(force_terminal=True, color_system="truecolor"),
                                dict(force_terminal=True, color_system="standard", safe_box=True),
                                dict(color_system=None, emoji=False)]))
def test_fast_table_rows_are_richs_table(cells, width, title, console):
    """Finding columns (left, right, essential and wrapped ones) with odd cells, on narrow and wide consoles,
    with and without colours: the batch drawn by render._TableRows is byte for byte rich's table."""
    from mqtool.render import FINDING_COLUMNS

    rows = [dict(zip([c.key for c in FINDING_COLUMNS], r)) for r in cells]
    rich_out, fast_out = _rich_and_fast(FINDING_COLUMNS, rows, width, title, **console)
    assert fast_out == rich_out


@pytest.mark.parametrize("family", sorted(CASES))
def test_fast_table_rows_on_fixture_rows(run_cli, family):
    from mqtool import tables

    args, _ = CASES[family]
    rows = _rows(run_cli, *args)
    for width in (240, 300, 400):
        shown, _ = tables.fit(_columns(family), rows, width)        # the columns render_table shows there
        rich_out, fast_out = _rich_and_fast(shown, rows, width, "Messages", need_fast=True, color_system=None)
        assert fast_out == rich_out


def test_long_table_prints_in_batches_with_their_own_widths():
    """Batches keep their own column widths (as rich sized each batch's table before): a longer value in a
    later batch widens that batch only; every row is printed once, in order."""
    from mqtool import render
    from mqtool.columns import Column

    cols = [Column("n", "N", justify="right", priority=0), Column("v", "Value", max_width=40)]
    rows = [{"n": i, "v": "short" if i < 5 else "a much longer value here"} for i in range(8)]
    buf = io.StringIO()
    con = Console(file=buf, width=100, color_system=None, force_terminal=False)
    assert render.render_table(iter(rows), cols, console=con, batch=5) == 8
    out = buf.getvalue().splitlines()
    tops = [line for line in out if line.startswith("┏")]
    assert len(tops) == 2 and len(tops[0]) < len(tops[1])
    assert [int(line.split("│")[1]) for line in out if line.startswith("│")] == list(range(8))
