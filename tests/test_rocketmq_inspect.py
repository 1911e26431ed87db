"""`mqtool inspect` on RocketMQ: a unit field by field, from real stores (expected.json), units built by the schema
(positions computed by hand from the format reference), and damaged copies."""
from __future__ import annotations

import json
import shutil
import zlib

import pytest

from conftest import load_json, require_realdata
from formats import rocketmq as F
from mqtool.rocketmq.inspect import inspect, inspect_unit
from tests.builders import rocketmq_unit

DS = "gen-5.1.4-clean"


def _by(ins):
    return {f.path: f for f in ins.fields}


def _rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def real():
    exp = load_json(require_realdata("rocketmq", DS, "expected.json"))["messages"]
    return require_realdata("rocketmq", DS, "store"), {m["seq"]: m for m in exp}


# ---- real store: values from expected.json -----------------------------------------------------------------

@pytest.mark.parametrize("seq", [0, 441, 445, 447])     # plain, 20000-byte body, magic v2, IPv6 born host
def test_real_message_matches_expected(real, seq):
    store, exp = real
    m = exp[seq]
    ins = inspect(store, offset=m["commitLogOffset"])
    by = _by(ins)
    assert ins.ok and ins.broken is None
    assert ins.offset == m["commitLogOffset"] and ins.size == m["wroteBytes"]
    assert by["TOTALSIZE"].value == m["wroteBytes"] and by["TOTALSIZE"].ok
    assert by["TOPIC"].value == m["storedTopic"]
    assert by["BODY"].size == m["storedBodyLength"]
    assert by["QUEUEID"].value == m["storedQueueId"] and by["QUEUEOFFSET"].value == m["queueOffset"]
    assert by["SYSFLAG"].value == m["storedSysFlag"]
    assert by["PHYSICALOFFSET"].ok and by["PHYSICALOFFSET"].value == m["commitLogOffset"]
    assert by["BODYCRC"].ok
    assert ins.summary["keys"] == m["keys"] and ins.summary["tags"] == m["tags"]
    assert ins.summary["version"] == ("v2" if len(m["storedTopic"]) > 127 else "v1")
    # each property of the stored string is a nested field (depth 1) with its value
    pairs = [p.split("\x01", 1) for p in m["storedPropertiesString"].split("\x02") if p]
    nested = [(f.name, f.value) for f in ins.fields if f.path.startswith("PROPERTIES.")]
    assert nested == [tuple(p) for p in pairs]
    assert all(f.depth == 1 for f in ins.fields if f.path.startswith("PROPERTIES."))
    # the offset lies in the segment the geometry names (65536-byte files)
    assert ins.position == m["commitLogOffset"] % 65536
    assert ins.file.endswith(f"{m['commitLogOffset'] - ins.position:020d}")


def test_real_ipv6_host_widths(real):
    store, exp = real
    by = _by(inspect(store, offset=exp[447]["commitLogOffset"]))
    assert by["BORNHOST"].size == 20 and by["BORNHOST"].value == "[2001:db8::1]:54321"
    assert by["STORETIMESTAMP"].position - by["BORNHOST"].position == 20


def test_real_compressed_body_inflates(real):
    store, exp = real
    m = exp[442]                                     # ZLIB, 2080 stored bytes, 43090 inflated
    by = _by(inspect(store, offset=m["commitLogOffset"]))
    assert by["BODY"].size == m["storedBodyLength"]
    assert by["BODY"].ok and by["BODY"].actual == f"inflates to {m['uncompressedBodyLength']} bytes"


def test_real_blank_unit(real):
    store, exp = real
    # the last message of the first 65536-byte file ends where the BLANK unit starts
    start = max(m["commitLogOffset"] + m["wroteBytes"] for m in exp.values()
                if m.get("commitLogOffset") is not None and m["commitLogOffset"] + m["wroteBytes"] <= 65536)
    ins = inspect(store, offset=start)
    by = _by(ins)
    assert ins.kind == "blank" and ins.ok
    assert by["TOTALSIZE"].value == 65536 - start and by["MAGICCODE"].value.startswith("0xCBD43194")
    assert [f.path for f in ins.fields] == ["TOTALSIZE", "MAGICCODE"]


def test_cli_json_rows(real, run_cli):
    store, exp = real
    code, out, _ = run_cli("inspect", store, "--offset", exp[0]["commitLogOffset"], "--json")
    rows = _rows(out)
    assert code == 0
    assert all(r["kind"] == "field" for r in rows[:-1]) and rows[-1]["kind"] == "record"
    assert rows[-1]["ok"] is True and rows[-1]["topic"] == exp[0]["storedTopic"]
    body = next(r for r in rows if r["path"] == "BODY")
    assert body["position"] == 88 and body["size"] == exp[0]["storedBodyLength"]
    assert [r["index"] for r in rows[:-1]] == list(range(len(rows) - 1))


def test_cli_offset_outside_store(real, run_cli):
    store, _ = real
    code, out, err = run_cli("inspect", store, "--offset", 10 ** 12)
    assert code == 2 and "beyond the end of the commitlog" in err and out == ""
    assert len(err.strip().splitlines()) == 1


def test_cli_needs_one_of_offset_position(real, run_cli):
    store, _ = real
    assert run_cli("inspect", store)[0] == 2
    assert run_cli("inspect", store, "--offset", 0, "--position", 0)[0] == 2
    code, _, err = run_cli("inspect", store, "--position", 0)
    assert code == 2 and "--position needs a file" in err


# ---- built units: positions by hand (reference §1: 4+4+4+4+4+8+8+4+8+host+8+host+4+8+4) -------------------

def test_positions_ipv4_v1():
    u = rocketmq_unit(b"T", b"hello", b"KEYS\x01k1\x02TAGS\x01a", phys=4096)
    ins = inspect_unit(u, 0, "00000000000000004096", 4096)
    pos = {f.path: (f.position, f.size) for f in ins.fields}
    assert pos["TOTALSIZE"] == (0, 4) and pos["MAGICCODE"] == (4, 4) and pos["BODYCRC"] == (8, 4)
    assert pos["QUEUEOFFSET"] == (20, 8) and pos["PHYSICALOFFSET"] == (28, 8) and pos["SYSFLAG"] == (36, 4)
    assert pos["BORNHOST"] == (48, 8) and pos["BORNHOST.addr"] == (48, 4) and pos["BORNHOST.port"] == (52, 4)
    assert pos["STOREHOSTADDRESS"] == (64, 8) and pos["BODYLENGTH"] == (84, 4) and pos["BODY"] == (88, 5)
    assert pos["TOPICLENGTH"] == (93, 1) and pos["TOPIC"] == (94, 1) and pos["PROPERTIESLENGTH"] == (95, 2)
    assert pos["PROPERTIES"] == (97, 14)
    assert pos["PROPERTIES.KEYS"] == (97, 8) and pos["PROPERTIES.TAGS"] == (105, 6)   # "KEYS\1k1\2", "TAGS\1a"
    assert ins.ok and _by(ins)["TOTALSIZE"].expected == 111 == len(u)


def test_positions_ipv6_v2():
    flags = F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG
    u = rocketmq_unit(b"TT", b"x", b"", version="v2", sysflag=flags, born="[::1]:1", store="[fd00::5]:10911")
    pos = {f.path: (f.position, f.size) for f in inspect_unit(u, 0, "f", None).fields}
    assert pos["BORNHOST"] == (48, 20) and pos["STORETIMESTAMP"] == (68, 8) and pos["STOREHOSTADDRESS"] == (76, 20)
    assert pos["BODYLENGTH"] == (108, 4) and pos["BODY"] == (112, 1)
    assert pos["TOPICLENGTH"] == (113, 2) and pos["TOPIC"] == (115, 2) and pos["PROPERTIES"] == (119, 0)


def test_unit_in_the_middle_of_a_segment():
    first = rocketmq_unit(phys=1000)
    second = rocketmq_unit(b"B", b"second", phys=1000 + len(first))
    ins = inspect_unit(first + second, len(first), "seg", 1000)
    by = _by(ins)
    assert ins.offset == 1000 + len(first) and by["TOPIC"].value == "B" and by["BODY"].position == len(first) + 88
    assert ins.ok


# ---- damage ------------------------------------------------------------------------------------------------

def test_flipped_body_byte_fails_crc_with_values():
    u = bytearray(rocketmq_unit(body=b"hello"))
    u[88] ^= 0x01
    ins = inspect_unit(bytes(u), 0, "00000000000000000000", 0)
    crc = _by(ins)["BODYCRC"]
    assert crc.ok is False and crc.code == "crc-mismatch"
    assert crc.expected == zlib.crc32(bytes(u[88:93])) & 0x7FFFFFFF
    assert crc.actual == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert not ins.ok and ins.broken is None            # the schema still matches: only the check fails


def test_wrong_physical_offset():
    ins = inspect_unit(rocketmq_unit(phys=5), 0, "00000000000000000000", 0)
    f = _by(ins)["PHYSICALOFFSET"]
    assert (f.ok, f.expected, f.actual, f.code) == (False, 0, 5, "physical-offset-mismatch")


def test_truncated_unit_breaks_where_the_data_ends():
    u = rocketmq_unit()[:96]                             # cut inside PROPERTIESLENGTH (95..97)
    ins = inspect_unit(u, 0, "f", None)
    assert ins.broken is not None and ins.broken.path == "PROPERTIESLENGTH" and ins.broken.position == 95
    assert _by(ins)["TOTALSIZE"].ok is False and _by(ins)["TOTALSIZE"].code == "truncated-record"
    assert ins.fields[-1].path == "PROPERTIESLENGTH" and ins.fields[-1].ok is False
    assert [f.path for f in ins.fields][:3] == ["TOTALSIZE", "MAGICCODE", "BODYCRC"]


def test_bad_magic_breaks_at_the_magic():
    u = bytearray(rocketmq_unit())
    u[4:8] = b"\x12\x34\x56\x78"
    ins = inspect_unit(bytes(u), 0, "f", None)
    magic = _by(ins)["MAGICCODE"]
    assert ins.broken.path == "MAGICCODE" and ins.broken.position == 4
    assert magic.ok is False and magic.actual == "0x12345678" and magic.code == "bad-magic"
    assert len(ins.fields) == 2


def test_totalsize_disagrees_with_fields():
    u = bytearray(rocketmq_unit() + bytes(8))
    u[0:4] = (111 + 8).to_bytes(4, "big")
    f = _by(inspect_unit(bytes(u), 0, "f", None))["TOTALSIZE"]
    assert (f.ok, f.expected, f.actual, f.code) == (False, 111, 119, "size-mismatch")


def test_property_framing():
    props = b"KEYS\x01k1\x02junk\x02TAGS\x01a\x02"
    ins = inspect_unit(rocketmq_unit(props=props), 0, "f", None)
    nested = [f for f in ins.fields if f.depth == 1 and f.path.startswith("PROPERTIES")]
    assert [f.path for f in nested] == ["PROPERTIES.KEYS", "PROPERTIES[1]", "PROPERTIES.TAGS"]
    assert nested[1].ok is False and nested[1].actual == "junk" and nested[1].position == 97 + 8
    assert [f.size for f in nested] == [8, 5, 7]       # the trailing \x02 belongs to the last pair


def test_prop_crc_checked():
    # a unit that carries __CRC32# over everything before the 20 reserved bytes (reference §1.7)
    props = b"KEYS\x01k\x02" + (F.PROPERTY_CRC32 + "\x01").encode() + b"0" * 10 + b"\x02"
    u = bytearray(rocketmq_unit(props=props))
    crc = zlib.crc32(bytes(u[:len(u) - F.CRC32_RESERVED_LEN])) & 0x7FFFFFFF
    u[-11:-1] = F.encode_prop_crc(crc).encode()
    f = _by(inspect_unit(bytes(u), 0, "f", None))[f"PROPERTIES.{F.PROPERTY_CRC32}"]
    assert f.ok is True and f.expected == crc
    u[20] ^= 1                                          # QUEUEOFFSET: only the whole-message CRC covers it
    f = _by(inspect_unit(bytes(u), 0, "f", None))[f"PROPERTIES.{F.PROPERTY_CRC32}"]
    assert f.ok is False and f.code == "prop-crc-mismatch"


def test_huge_body_is_bounded():
    body = bytes(range(256)) * 4096                     # 1 MiB
    ins = inspect_unit(rocketmq_unit(body=body), 0, "f", None)
    f = _by(ins)["BODY"]
    assert f.size == len(body) and f.value is None and f.tail and len(f.head) < 200
    assert "…" in f.to_row(0)["hex"] and f.to_row(0)["hex_complete"] is False
    assert len(ins.head) + len(ins.tail) < 4096 and ins.ok


def test_damaged_copy_cli_exit_1(real, run_cli, tmp_path):
    store, exp = real
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    seg = copy / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    data[8] ^= 0xFF                                     # BODYCRC of the first unit
    seg.write_bytes(bytes(data))
    code, out, _ = run_cli("inspect", copy, "--offset", 0, "--json")
    rows = _rows(out)
    crc = next(r for r in rows if r["path"] == "BODYCRC")
    assert code == 1 and crc["ok"] is False and rows[-1]["failed"] == 1
    assert rows[-1]["first_failure"]["field"] == "BODYCRC"
    code, out, _ = run_cli("inspect", seg, "--position", 0, "--json")
    assert code == 1


# ---- terminal view -----------------------------------------------------------------------------------------

def test_terminal_view_hexdump_and_list(tmp_path, run_cli):
    seg = tmp_path / f"{0:020d}"
    seg.write_bytes(rocketmq_unit(topic=b"T\x1b[2J", phys=0))
    code, out, _ = run_cli("inspect", seg, "--position", 0, "--as", "table", "--color", "never")
    assert code == 0
    lines = out.splitlines()
    total = F.calc_msg_length("v1", 0, 5, 5, 14)
    assert lines[1].startswith(f"00000000  00 00 00 {total:02x} da a3 20 a7")
    assert lines[2].split() == ["^0", "^1", "^2", "^3"]           # field numbers where each field starts
    assert "\x1b" not in out and "T\\x1b[2J" in out              # a hostile topic is shown escaped
    assert any(" BODYCRC " in ln and " ok" in ln for ln in lines)
    assert lines[-1].startswith("all 4 checks pass")


def test_terminal_view_names_the_break(tmp_path, run_cli):
    f = tmp_path / "piece"
    f.write_bytes(rocketmq_unit()[:60])
    code, out, _ = run_cli("inspect", f, "--position", 0, "--format", "rocketmq", "--as", "table",
                           "--color", "never")
    assert code == 1
    assert "the schema breaks at STORETIMESTAMP (position 56)" in " ".join(out.split())


@pytest.mark.parametrize("ds", ["gen-4.9.7-clean", DS])
def test_every_real_message_passes(ds):
    store = require_realdata("rocketmq", ds, "store")
    exp = load_json(require_realdata("rocketmq", ds, "expected.json"))["messages"]
    units = [m for m in exp if m.get("commitLogOffset") is not None and m.get("putStatus") == "PUT_OK"]
    assert len(units) > 400
    for m in units:
        ins = inspect(store, offset=m["commitLogOffset"])
        assert ins.ok, (m["seq"], [f.to_row(0) for f in ins.failed], ins.broken)
        assert ins.summary["topic"] == m.get("storedTopic", m["sentTopic"])
        # a putMessages batch entry wrote several units: the first is the one at its offset
        assert ins.size == m["wroteBytes"] if "items" not in m else ins.size < m["wroteBytes"]
