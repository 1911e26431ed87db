#!/usr/bin/env python3
"""A systematic hostile-input campaign against the installed CLI, as an operator meets it.

Where ``fuzz/cli.py`` draws random cases and runs the verbs in-process, this driver walks a fixed matrix:
every verb (each ``dump`` kind, each ``verify`` kind, ``query`` by key/offset/time, ``info``, ``report``,
``export``, ``hash``, ``carve``, ``diff``, ``inspect``, ``rebuild-index`` with ``--out`` and ``--compare``)
x every family (RocketMQ, LiteMQ, Kafka) x a list of mutation classes, applied to a copy of the family's
fixture store and (``--real``) to copies of real broker-written stores from ../shared/realdata (copied to a
temp dir, never changed in place). Each run is a separate process::

    nice -n 15 prlimit --as=2000000000 timeout -s KILL 60 python -m mqtool ...

so a hang, a signal, the address-space limit (a MemoryError) and the real exit code are all seen as an
operator would see them. A run fails when it exits outside {0, 1, 2} (a signal, a kill by the timeout),
prints a traceback, or exits 2 with anything but one ``mqtool: `` line on stderr; ``--strict`` also fails an
exit-2 line for a damaged *file* that names no path.

Mutation classes (``--classes``; each expands to a few deterministic variants per family):

    truncate     the first log segment cut at every field boundary of its first record (positions from the
                 formats/ schemas) and just past it; index/consume-queue files cut one byte short
    length       the first record's length fields (RocketMQ TOTALSIZE/BODYLENGTH, Kafka batchLength,
                 LiteMQ's length prefix) set to 0, -1, 2^31-1
    bitflip      seeded bit flips in a log segment, an index file and a metadata file
    zerotail     a log segment zero-filled from its middle and from its second record
    garbage      a log segment, an index file, a metadata file replaced by random bytes of its size
    shape        a log segment / index file / metadata file replaced by a directory, a FIFO, a dangling
                 symlink, a symlink loop, a link to /dev/zero
    oddsize      index and consume-queue files of sizes no entry size divides (7 more bytes, 3 fewer)
    huge         index and metadata files grown (sparse: no disk used) to 1.5 GB: read whole, past the limit
    meta         metadata files hostile: JSON nested 100000 deep, 20 MB of one string, a 100000-digit number,
                 1e999999, binary, empty; Kafka checkpoint files with huge counts, negative and
                 non-numeric lines; producer snapshots with garbage and a valid-CRC hostile entry count
    codec        Kafka: every codec value 0..7 (and every attribute flag) with the records area intact and
                 overwritten by garbage, CRC made valid; RocketMQ: the compressed sysflag with each
                 compression type over a garbage body, BODYCRC made valid
    names        a topic/partition directory and a segment renamed to bytes that are not UTF-8
    path         the store argument itself: missing, a regular file, an empty directory, a FIFO, a dangling
                 symlink, a symlink loop, /dev/zero, another family's store, a log directory

    python fuzz/cli_campaign.py                          # fixtures, every class, every verb (~10-20 min)
    python fuzz/cli_campaign.py --real                   # also copies of a few real stores (--real-only)
    python fuzz/cli_campaign.py --family kafka --classes codec,meta --verbs dump,verify
    python fuzz/cli_campaign.py --budget 300             # stop starting new cases after 300 s

The table printed at the end is verb x family x class -> counts of exit 0/1/2 and failures; docs/hardening.md
has the table of the last recorded run.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz.cli import STORES, kafka_fix_crc, kafka_v2_batches, replace_file  # noqa: E402

REALDATA = Path(os.environ.get("MQTOOL_REALDATA", ROOT.parent / "shared" / "realdata"))
REAL_STORES = {"rocketmq": ["rocketmq/gen-5.1.4-kill/store", "rocketmq/supergolden-221e78c1/store"],
               "litemq": ["litemq/crash/data/broker"],
               "kafka": ["kafka/generated-4.0.0-SNAPSHOT/broker-append", "kafka/volodymyrzee-kafka-zk-2020/c3-c896d6b"]}
CLASSES = ("truncate", "length", "bitflip", "zerotail", "garbage", "shape", "oddsize", "huge", "meta", "codec",
           "names", "path")
HUGE = 1_500_000_000        # a sparse file of this size costs no disk; read whole it passes the --as limit
LIMIT_AS = 2_000_000_000
TIMEOUT = 60


# ---- what a store holds -------------------------------------------------------------------------------------

def _regular(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file() and not p.is_symlink())


def log_files(family: str, store: Path) -> list[Path]:
    if family == "kafka":
        return [p for p in _regular(store) if p.suffix == ".log"]
    return [p for p in _regular(store) if p.parent.name == "commitlog"]


def index_files(family: str, store: Path) -> list[Path]:
    if family == "kafka":
        return [p for p in _regular(store) if p.suffix in (".index", ".timeindex", ".txnindex")]
    return [p for p in _regular(store) if {"consumequeue", "index"} & set(p.relative_to(store).parts[:1])]


def meta_files(family: str, store: Path) -> list[Path]:
    logs, idx = set(log_files(family, store)), set(index_files(family, store))
    return [p for p in _regular(store) if p not in logs and p not in idx]


def kafka_partition(store: Path) -> Path:
    """The first partition directory of a Kafka log dir (or the store itself when it is one)."""
    logs = sorted(store.rglob("*.log"))
    return logs[0].parent if logs else store


# ---- the first record's field boundaries, from the schemas --------------------------------------------------

def first_record_fields(family: str, data: bytes) -> tuple[dict[str, tuple[int, int]], int]:
    """({field: (offset, size)} of the first record's fixed prefix, the record's end) in a log segment (Kafka:
    of the first v2 batch)."""
    from mqtool.schema_struct import field_positions

    if family == "rocketmq":
        from formats import rocketmq as R
        f = field_positions(R.MessageV1)
        end = struct.unpack_from(">i", data, 0)[0] if len(data) >= 4 else 0
        return f, end
    if family == "kafka":         # the first v2 batch (a segment may start with legacy messages)
        from formats import kafka as K
        batches = kafka_v2_batches(data)
        at, end = batches[0] if batches else (0, 12 + struct.unpack_from(">i", data, 8)[0] if len(data) >= 12 else 0)
        return {k: (o + at, s) for k, (o, s) in field_positions(K.RecordBatchHeader).items()}, end
    from formats import litemq as L
    f = {"length": (0, L.LENGTH_PREFIX)}
    f.update({k: (o + L.LENGTH_PREFIX, s) for k, (o, s) in field_positions(L.Message).items()})
    end = L.LENGTH_PREFIX + struct.unpack_from(">I", data, 0)[0] if len(data) >= 4 else 0
    return f, end


def _length_fields(family: str) -> list[str]:
    return {"rocketmq": ["TOTALSIZE", "BODYLENGTH"], "kafka": ["batchLength", "recordsCount"],
            "litemq": ["length"]}[family]


# ---- mutation classes: each yields (label, function(store)) -------------------------------------------------

def _rewrite(path: Path, fn) -> None:
    path.write_bytes(bytes(fn(bytearray(path.read_bytes()))))


def variants(cls: str, family: str, store: Path):
    """The variants of one class for one store (a list of (label, mutate(store)) with paths relative to it)."""
    logs, idx, meta = log_files(family, store), index_files(family, store), meta_files(family, store)
    rel = lambda p: p.relative_to(store)                                   # noqa: E731
    out = []
    log = rel(logs[0]) if logs else None
    if cls == "truncate" and log is not None:
        fields, end = first_record_fields(family, (store / log).read_bytes()[:65536])
        cuts = sorted({o for o, _ in fields.values()} | {o + s for o, s in fields.values()} | {end - 1, end + 3})
        for c in cuts:
            if c > 0:
                out.append((f"{log.name} cut at {c}", lambda s, c=c: _rewrite(s / log, lambda b: b[:c])))
        for p in idx[:4]:
            out.append((f"{rel(p)} one byte short", lambda s, r=rel(p): _rewrite(s / r, lambda b: b[:-1])))
    elif cls == "length" and log is not None:
        fields, _ = first_record_fields(family, (store / log).read_bytes()[:65536])
        for name in _length_fields(family):
            o, size = fields[name]
            for v in (0, -1, 0x7FFFFFFF):
                def m(b, o=o, size=size, v=v):
                    b[o:o + size] = v.to_bytes(size, "big", signed=True) if v < 0 else \
                        min(v, (1 << (8 * size - 1)) - 1).to_bytes(size, "big")
                    return b
                out.append((f"{name}={v}", lambda s, m=m: _rewrite(s / log, m)))
    elif cls == "bitflip":
        for k, p in enumerate(logs[:1] + idx[:1] + meta[:2]):
            def m(b, k=k):
                rng = random.Random(f"flip:{family}:{k}")
                for _ in range(8):
                    if b:
                        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
                return b
            out.append((f"flips in {rel(p)}", lambda s, r=rel(p), m=m: _rewrite(s / r, m)))
    elif cls == "zerotail" and log is not None:
        _, end = first_record_fields(family, (store / log).read_bytes()[:65536])
        out.append(("zero from the middle", lambda s: _rewrite(s / log, lambda b: b[:len(b) // 2] + bytes(len(b)
                                                                                             - len(b) // 2))))
        out.append(("zero from record 2", lambda s, e=end: _rewrite(s / log, lambda b: b[:e] + bytes(max(0, len(b)
                                                                                                 - e)))))
    elif cls == "garbage":
        for p in logs[:1] + idx[:1] + meta[:2]:
            out.append((f"garbage {rel(p)}", lambda s, r=rel(p): _rewrite(
                s / r, lambda b: random.Random(str(r)).randbytes(max(len(b), 64)))))
    elif cls == "shape":
        for p in logs[:1] + idx[:1] + meta[:1]:
            for how in ("dir", "fifo", "dangling", "loop", "devzero"):
                out.append((f"{how} for {rel(p)}", lambda s, r=rel(p), h=how: replace_file(s / r, h)))
    elif cls == "oddsize":
        for p in idx[:6]:
            out.append((f"{rel(p)} +7 bytes", lambda s, r=rel(p): _rewrite(s / r, lambda b: b + b"\x01" * 7)))
            out.append((f"{rel(p)} -3 bytes", lambda s, r=rel(p): _rewrite(s / r, lambda b: b[:-3])))
    elif cls == "huge":
        for p in idx[:2] + meta[:3]:
            out.append((f"{rel(p)} grown to {HUGE} bytes (sparse)", lambda s, r=rel(p): os.truncate(s / r, HUGE)))
    elif cls == "meta":
        out += _meta_variants(family, store, meta)
    elif cls == "codec":
        out += _codec_variants(family, store, logs)
    elif cls == "names":
        bad = os.fsdecode(b"\xff\xfe\x1b[2J")
        dirs = sorted({p.parent for p in logs + idx if p.parent != store})
        for d in dirs[:2]:
            out.append((f"{rel(d)} renamed", lambda s, r=rel(d): os.rename(s / r, (s / r).with_name(bad + r.name))))
        if log is not None:
            out.append((f"{log} renamed", lambda s: os.rename(s / log, (s / log).with_name(log.name + bad))))
    return out


def _meta_variants(family: str, store: Path, meta: list[Path]):
    rel = lambda p: p.relative_to(store)                                    # noqa: E731
    contents = {"deep": b"[" * 100_000, "huge-string": b'{"a":"' + b"x" * 20_000_000 + b'"}',
                "long-number": b'{"offsetTable":{"t@g":{0:' + b"9" * 100_000 + b"}}}",
                "inf": b'{"offsetTable":{"t@g":{0:1e999999}}}', "binary": bytes(range(256)) * 4, "empty": b"",
                "deep-object": b'{"a":' * 50_000}
    out = []
    jsons = [p for p in meta if p.suffix in (".json", ".bak")] or meta[:1]
    for p in jsons[:2]:
        for k, v in contents.items():
            out.append((f"{rel(p)} {k}", lambda s, r=rel(p), v=v: (s / r).write_bytes(v)))
    if family == "kafka":
        ckpts = [p for p in meta if "checkpoint" in p.name or p.name in ("meta.properties", "partition.metadata")]
        lines = {"huge-count": b"0\n2147483647\nt 0 5\n", "neg-count": b"0\n-1\n", "nonnum": b"0\n1\nt zz 5\n",
                 "long-number": b"0\n1\nt 0 " + b"9" * 100_000 + b"\n", "many": b"0\n1000000\n" +
                 b"t 0 1\n" * 1_000_000, "version": b"9999\n0\n"}
        for p in ckpts[:4]:
            for k, v in lines.items():
                out.append((f"{rel(p)} {k}", lambda s, r=rel(p), v=v: (s / r).write_bytes(v)))
        for p in [p for p in _regular(store) if p.suffix == ".snapshot"][:1]:
            out.append((f"{rel(p)} garbage", lambda s, r=rel(p): (s / r).write_bytes(b"\x00\x01" + os.urandom(60))))
            out.append((f"{rel(p)} 2^31-1 entries", lambda s, r=rel(p): (s / r).write_bytes(_snapshot(0x7FFFFFFF))))
    elif family == "litemq":
        for p in [p for p in meta if p.parent.name == "checkpoint"][:1]:
            out.append((f"{rel(p)} cut", lambda s, r=rel(p): _rewrite(s / r, lambda b: b[:7])))
            out.append((f"{rel(p)} ones", lambda s, r=rel(p): _rewrite(s / r, lambda b: b"\xff" * len(b))))
    else:
        for name in ("checkpoint",):
            if (store / name).is_file():
                out.append((f"{name} ones", lambda s, n=name: _rewrite(s / n, lambda b: b"\xff" * len(b))))
                out.append((f"{name} cut", lambda s, n=name: _rewrite(s / n, lambda b: b[:5])))
    return out


def _snapshot(count: int) -> bytes:
    """A producer snapshot header (version 1, CRC-32C over the rest) whose entry count is ``count``."""
    from formats import kafka as K
    from mqtool.fastcrc import crc32c

    body = count.to_bytes(4, "big") + bytes(K.PRODUCER_SNAPSHOT_ENTRY_SIZE)
    return K.PRODUCER_SNAPSHOT_VERSION.to_bytes(2, "big") + crc32c(body).to_bytes(4, "big") + body


def _codec_variants(family: str, store: Path, logs: list[Path]):
    out = []
    if not logs:
        return out
    log = logs[0].relative_to(store)
    if family == "kafka":
        from formats import kafka as K
        for attrs in list(range(8)) + [0x08, 0x10, 0x20, 0x30, 0x40, 0x7F, 0xFFFF]:
            for garbage in (False, True):
                def m(b, attrs=attrs, garbage=garbage):
                    for p, end in kafka_v2_batches(b)[:2]:
                        b[p + K.V2_ATTRIBUTES_OFFSET:p + K.V2_ATTRIBUTES_OFFSET + 2] = attrs.to_bytes(2, "big")
                        if garbage and end > p + K.V2_HEADER_SIZE:
                            lo = p + K.V2_HEADER_SIZE
                            b[lo:end] = random.Random(attrs).randbytes(end - lo)
                        kafka_fix_crc(b, p, end)
                    return b
                out.append((f"attributes={attrs:#x}{' garbage records' if garbage else ''}",
                            lambda s, m=m: _rewrite(s / log, m)))
    elif family == "rocketmq":
        from formats import rocketmq as R
        fields, end = first_record_fields(family, (store / log).read_bytes()[:65536])
        so, bo, bl = fields["SYSFLAG"][0], fields["BODYCRC"][0], fields["BODYLENGTH"][0]
        for ctype in range(8):
            for body in ("garbage", "ones"):
                def m(b, ctype=ctype, body=body):
                    flag = struct.unpack_from(">i", b, so)[0]
                    flag = (flag & ~R.COMPRESSION_TYPE_MASK) | R.COMPRESSED_FLAG | (ctype << 8)
                    struct.pack_into(">i", b, so, flag)
                    n = struct.unpack_from(">i", b, bl)[0]
                    lo = bl + 4
                    if 0 < n <= end - lo:
                        b[lo:lo + n] = random.Random(ctype).randbytes(n) if body == "garbage" else b"\xff" * n
                        struct.pack_into(">i", b, bo, zlib.crc32(b[lo:lo + n]) & 0x7FFFFFFF)
                    return b
                out.append((f"compressed type {ctype} {body} body", lambda s, m=m: _rewrite(s / log, m)))
    return out


# ---- the store argument itself ------------------------------------------------------------------------------

def path_variants(family: str, scratch: Path):
    """(label, path) pairs: hostile things passed where a store is expected."""
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "file").write_bytes(b"not a store\n")
    (scratch / "empty").mkdir(exist_ok=True)
    if not (scratch / "fifo").exists():
        os.mkfifo(scratch / "fifo")
    for name, target in (("dangling", "nowhere"), ("loop", "loop"), ("zero", "/dev/zero")):
        if not os.path.lexists(scratch / name):
            (scratch / name).symlink_to(target)
    other = {"rocketmq": "kafka", "kafka": "litemq", "litemq": "rocketmq"}[family]
    sub = {"rocketmq": "commitlog", "litemq": "consumequeue", "kafka": "fixture-0/00000000000000000000.log"}[family]
    return [("missing", scratch / "missing"), ("regular file", scratch / "file"), ("empty dir", scratch / "empty"),
            ("fifo", scratch / "fifo"), ("dangling link", scratch / "dangling"), ("link loop", scratch / "loop"),
            ("/dev/zero link", scratch / "zero"), (f"{other} store", STORES[other]),
            (f"sub {sub}", STORES[family] / sub)]


# ---- the verbs ----------------------------------------------------------------------------------------------

def commands(family: str, store: Path, out: Path, pristine: Path) -> list[tuple[str, list[str]]]:
    s = str(store)
    cmds: list[tuple[str, list[str]]] = []
    if family == "kafka":
        part = str(kafka_partition(store)) if store.is_dir() else s
        first = sorted(Path(part).glob("*.log"))[:1] if Path(part).is_dir() else []
        cmds += [("dump", ["dump", "kafka", part, "--deep", "--json"]),
                 ("dump", ["dump", "kafka", s, "--as", "table", "--print-data", "--body", "text"]),
                 ("query", ["query", s, "--offset", "3", "--json"]),
                 ("query", ["query", s, "--time-from", "2000-01-01T00:00:00Z", "--json"]),
                 ("inspect", ["inspect", part, "--offset", "1", "--json"]),
                 ("carve", ["carve", *(str(p) for p in first or [Path(s)]), "--deep", "--json"])]
    else:
        cmds += [("dump", ["dump", k, s, "--json"]) for k in ("commitlog", "consumequeue", "index", "checkpoint",
                                                               "config", "abort")]
        cmds += [("dump", ["dump", "commitlog", s, "--as", "table", "--body", "text"]),
                 ("query", ["query", s, "--key", "k1", "--json"]),
                 ("query", ["query", s, "--topic", "orders", "--queue", "0", "--queue-offset", "1", "--json"]),
                 ("query", ["query", s, "--time-from", "2000-01-01T00:00:00Z", "--json"]),
                 ("inspect", ["inspect", s, "--offset", "0", "--json"])]
        cl = Path(s) / "commitlog"
        segs = sorted(cl.iterdir())[:1] if cl.is_dir() and not cl.is_symlink() else []
        cmds.append(("carve", ["carve", *(str(p) for p in segs or [Path(s)]), "--deep", "--json"]))
        cmds += [("verify", ["verify", k, s, "--json"]) for k in ("commitlog", "consumequeue", "index")]
    cmds += [("verify", ["verify", "store", s, "--json", "--salvage-out", str(out / "salvage"), "--force"]),
             ("verify", ["verify", "store", s, "--as", "table"]),
             ("info", ["info", s, "--json"]),
             ("report", ["report", s, "-o", str(out / "r.html"), "--force"]),
             ("rebuild-index", ["rebuild-index", s, "--out", str(out / "rb"), "--force", "--json"]),
             ("rebuild-index", ["rebuild-index", s, "--compare", "--json"]),
             ("export", ["export", s, "--to", str(out / "x.parquet"), "--force", "--jobs", "1"]),
             ("hash", ["hash", s, "--json"]),
             ("diff", ["diff", str(pristine), s, "--json"])]
    return cmds


# ---- running ------------------------------------------------------------------------------------------------

def run(args: list[str], cwd: Path) -> tuple[int, bytes, str]:
    """One CLI run as an operator starts it, under the address-space limit and the timeout."""
    cmd = ["nice", "-n", "15", "prlimit", f"--as={LIMIT_AS}", "timeout", "-s", "KILL", str(TIMEOUT),
           sys.executable, "-m", "mqtool", *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="120")
    p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def judge(code: int, err: str, strict: bool, damaged: str | None) -> str | None:
    """None when the run kept the promise, else what broke."""
    if code == 137 or code == -9:
        return f"killed after {TIMEOUT} s (a hang) or by the kernel"
    if code not in (0, 1, 2):
        return f"exit {code}"
    if "Traceback" in err or "MemoryError" in err:
        return "traceback: " + err.strip().splitlines()[-1][:160]
    if code == 2:
        lines = err.strip("\n").split("\n")
        if len(lines) != 1 or not lines[0].startswith("mqtool: "):
            return f"exit 2 not one 'mqtool: ' line: {err[:200]!r}"
        if strict and damaged and Path(damaged).name not in lines[0] and "/" not in lines[0]:
            return f"exit 2 names no file: {lines[0][:160]!r}"
    return None


def campaign(families, classes, verbs, real: str | None, budget: float | None, strict: bool, verbose: bool,
             record=None):
    table: dict = defaultdict(lambda: [0, 0, 0, 0])          # (verb, family, class) -> [exit0, exit1, exit2, failures]
    failures: list[str] = []
    t0 = time.monotonic()
    runs = 0
    with tempfile.TemporaryDirectory(prefix="mqtool-campaign-") as tmp:
        tmp = Path(tmp)
        sources = [(f, STORES[f], "fixture") for f in families] if real != "only" else []
        if real:
            sources += [(f, REALDATA / r, r) for f in families for r in REAL_STORES[f] if (REALDATA / r).is_dir()]
        for family, src, origin in sources:
            for cls in classes:
                if cls == "path":
                    cases = [(label, None, p) for label, p in path_variants(family, tmp / "paths")] \
                        if origin == "fixture" else []
                else:
                    probe = tmp / "probe"
                    shutil.rmtree(probe, ignore_errors=True)
                    _copy(src, probe)
                    cases = [(label, fn, None) for label, fn in variants(cls, family, probe)]
                    shutil.rmtree(probe, ignore_errors=True)
                for label, fn, given in cases:
                    if budget is not None and time.monotonic() - t0 > budget:
                        return table, failures, runs, True
                    case = tmp / "case"
                    shutil.rmtree(case, ignore_errors=True)
                    case.mkdir()
                    if given is None:
                        store = case / "store"
                        _copy(src, store)
                        fn(store)
                    else:
                        store = given
                    for verb, args in commands(family, store, case / "out", src):
                        if verbs and verb not in verbs:
                            continue
                        t = time.monotonic()
                        code, out, err = run(args, case)
                        dt = time.monotonic() - t
                        runs += 1
                        bad = judge(code, err, strict, None)
                        if record is not None:
                            record.write(json.dumps({"family": family, "origin": origin, "class": cls,
                                                     "variant": label, "args": args[:2], "exit": code,
                                                     "seconds": round(dt, 2),
                                                     "stderr": err.strip()[-300:], "failure": bad}) + "\n")
                        row = table[(verb, family, cls)]
                        if bad:
                            row[3] += 1
                            failures.append(f"{family} {origin} [{cls}: {label}] mqtool {' '.join(args)}\n    {bad}")
                            if verbose:
                                print("FAIL", failures[-1], file=sys.stderr, flush=True)
                        else:
                            row[code] += 1
                    shutil.rmtree(case, ignore_errors=True)
    return table, failures, runs, False


def _copy(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)
    for p in dst.rglob("*"):
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", action="append", choices=sorted(STORES))
    ap.add_argument("--classes", default=",".join(CLASSES), help="comma-separated, of: " + ", ".join(CLASSES))
    ap.add_argument("--verbs", default="", help="comma-separated verbs to run (default: all)")
    ap.add_argument("--real", action="store_const", const="also", help="also mutate copies of real stores "
                    "(../shared/realdata, REAL_STORES)")
    ap.add_argument("--real-only", dest="real", action="store_const", const="only", help="only the real stores")
    ap.add_argument("--budget", type=float, default=None, help="stop starting new cases after this many seconds")
    ap.add_argument("--strict", action="store_true", help="an exit-2 line must name a path")
    ap.add_argument("--record", type=argparse.FileType("w"), help="write every run's result here (NDJSON)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each failure as it happens")
    a = ap.parse_args(argv)
    classes = [c for c in a.classes.split(",") if c]
    unknown = set(classes) - set(CLASSES)
    if unknown:
        ap.error(f"unknown class(es): {', '.join(sorted(unknown))}")
    t = time.monotonic()
    table, failures, runs, cut = campaign(tuple(a.family or ("rocketmq", "litemq", "kafka")), classes,
                                          set(filter(None, a.verbs.split(","))), a.real, a.budget, a.strict,
                                          a.verbose, a.record)
    print(f"{runs} runs in {time.monotonic() - t:.0f} s{' (budget reached)' if cut else ''}; "
          f"{len(failures)} failures")
    print("| verb | family | class | exit 0 | exit 1 | exit 2 | failures |\n|---|---|---|---|---|---|---|")
    for (verb, family, cls), (e0, e1, e2, nf) in sorted(table.items()):
        print(f"| {verb} | {family} | {cls} | {e0} | {e1} | {e2} | {nf or ''} |")
    print(matrix(table))
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


def matrix(table) -> str:
    """Per family, verb x class: runs and the exit codes seen ("12 012": 12 runs, exits 0, 1 and 2 all met),
    "F<n>" when n runs broke the promise, "-" when the class gave that verb nothing to run."""
    out = []
    for family in sorted({f for _, f, _ in table}):
        classes = [c for c in CLASSES if any(k[1] == family and k[2] == c for k in table)]
        verbs = sorted({v for v, f, _ in table if f == family})
        out.append(f"\n{family}\n| verb | " + " | ".join(classes) + " |\n|---|" + "---|" * len(classes))
        for v in verbs:
            cells = []
            for c in classes:
                e0, e1, e2, nf = table.get((v, family, c), (0, 0, 0, 0))
                n = e0 + e1 + e2 + nf
                cells.append("-" if not n else f"{n} " + "".join(str(i) for i, k in enumerate((e0, e1, e2)) if k)
                             + (f" F{nf}" if nf else ""))
            out.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
