#!/usr/bin/env python3
"""Fuzz the CLI, not only the decoders: mutate a store file of a family's fixture store (bit flips, cuts,
inserted or deleted bytes, hostile length fields, zeroed pages), then run every verb on it (dump, verify,
query, info, rebuild-index into a scratch dir, report, hash), with the compiled helpers on and off.

Checked for every run: no uncaught exception (a traceback), exit code in {0, 1, 2}, wall time under
``--case-timeout`` and peak RSS under ``--max-rss-mb``; an exit 2 is one line ``mqtool: ...`` on stderr;
no raw control character (C0/C1, DEL, bidi controls) on stderr; and the helpers and the pure-Python paths
print the same thing (stdout and exit code) for dump, verify, query and hash. A failure prints the case
number and seed: ``--seed S --cases N..`` replays it (cases are deterministic).

``--hostile`` cases (:func:`hostile_case`) change the store's *shape* instead: a file replaced by a
directory, a FIFO, a symlink loop or a link to ``/dev/zero``; a file truncated at a boundary of its fields;
a hostile 4- or 8-byte field (2^31-1, 2^31, 2^63-1, 2^63, -1, 0) at a field boundary; a Kafka batch
header field set to an extreme, or its records area overwritten, with the CRC made valid again (so the
decoders behind the CRC check see the values); a zero-filled tail; garbage; a directory or topic renamed to a name holding terminal escapes and bytes that are not UTF-8 —
and run more verbs (every ``dump`` kind, ``carve``, ``inspect``, ``diff`` against the pristine copy) with
the helpers on, some as tables: a table must carry no raw control character either.

    python fuzz/cli.py --seconds 600                 # the long run (docs/hardening.md)
    python fuzz/cli.py --cases 50 --seed 7           # a fixed number of cases
    python fuzz/cli.py --hostile --seconds 300       # store-shape mutations, more verbs, tables

tests/test_common_fuzz_cli.py runs a short smoke of it.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import resource
import shutil
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "fixtures"
STORES = {"rocketmq": FIXTURES / "rocketmq" / "store", "litemq": FIXTURES / "litemq" / "store",
          "kafka": FIXTURES / "kafka" / "logdir"}
HOSTILE_LENGTHS = (0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0, 1, 0x00FFFFFF, 0x40000000)
# verbs whose stdout must not depend on the helpers (info/report carry timings or rendering details)
COMPARED = ("dump", "verify", "query", "hash")
HOSTILE_INTS = ((4, 0x7FFFFFFF), (4, 0x80000000), (4, 0xFFFFFFFF), (4, 0), (8, (1 << 63) - 1), (8, 1 << 63),
                (8, (1 << 64) - 1), (8, 0))
# a name chosen by whoever wrote the store: a screen clear, a CSI as C1, a bidi override, a byte not UTF-8
HOSTILE_NAME = os.fsdecode(b"x\x1b[2J\xc2\x9b1m\xe2\x80\xaey\xff")
# what must never reach a terminal raw (mqtool.sanitize.visible escapes all of these)
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                         "\ud800-\udfff]")


@dataclass
class Stats:
    cases: int = 0
    runs: int = 0
    exits: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)



def replace_file(path: Path, how: str) -> None:
    """Put something that is not a regular file where ``path`` was: "dir" (a directory holding its first 64
    bytes), "fifo", "dangling" (a link to nothing), "loop" (a link to itself) or "devzero" (a link to /dev/zero)."""
    data = path.read_bytes()
    path.unlink()
    if how == "dir":
        path.mkdir()
        (path / "x").write_bytes(data[:64])
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "dangling":
        path.symlink_to(path.name + ".gone")
    elif how == "loop":
        path.symlink_to(path.name)
    elif how == "devzero":
        path.symlink_to("/dev/zero")
    else:
        raise ValueError(how)

def _files(store: Path) -> list[Path]:
    """Store files, log segments first and listed twice (they are where the decoders work)."""
    files = sorted(p for p in store.rglob("*") if p.is_file())
    logs = [p for p in files if p.parent.name in ("commitlog",) or p.suffix == ".log"]
    return logs * 2 + files


def mutate(rng: random.Random, store: Path) -> str:
    """Change one file of ``store`` in place; returns what was done (for the failure report)."""
    victim = rng.choice(_files(store))
    data = bytearray(victim.read_bytes())
    n = len(data)
    op = rng.choice(["flip", "cut", "insert", "delete", "length", "zero-page", "flip"])
    i = rng.randrange(n + 1) if n else 0
    if op == "flip" and n:
        for _ in range(rng.randint(1, 8)):
            j = rng.randrange(n)
            data[j] ^= 1 << rng.randrange(8)
    elif op == "cut":
        del data[i:]
    elif op == "insert":
        data[i:i] = rng.randbytes(rng.randint(1, 64))
    elif op == "delete":
        del data[i:i + rng.randint(1, 64)]
    elif op == "length" and n >= 4:
        # a length field: at a record start when the file has a 4-byte-aligned one near i, else anywhere
        j = min(i - i % 4, n - 4)
        struct.pack_into(">I", data, j, rng.choice(HOSTILE_LENGTHS))
    elif op == "zero-page":
        data[i:i + 4096] = bytes(len(data[i:i + 4096]))
    victim.write_bytes(bytes(data))
    return f"{op}@{i} in {victim.relative_to(store)} ({n} -> {len(data)} bytes)"


def _boundary(rng: random.Random, n: int) -> int:
    """A position where a field may start: a small multiple of 4 near the start, else any 4-aligned one."""
    if n <= 0:
        return 0
    if rng.random() < 0.5:
        return min(n - 1, 4 * rng.randrange(0, 24))
    return min(n - 1, 4 * rng.randrange(0, max(1, n // 4)))


def mutate_hostile(rng: random.Random, store: Path) -> str:
    """Change the shape of ``store`` (see the module doc); returns what was done."""
    files = _files(store)
    victim = rng.choice(files)
    rel = victim.relative_to(store)
    op = rng.choice(["dir", "fifo", "loop", "devzero", "truncate", "int", "int", "zero-tail", "garbage",
                     "name", "empty", "batch-field", "batch-field", "records"])
    if op in ("batch-field", "records"):
        logs = [p for p in files if p.suffix == ".log"]
        if logs:
            victim = rng.choice(logs)
            data = bytearray(victim.read_bytes())
            what = _kafka_valid_crc(rng, data, op)
            if what is not None:
                victim.write_bytes(bytes(data))
                return f"{what} in {victim.relative_to(store)}"
        op = "int"
    if op == "name":
        # a directory (a topic's, a partition's: the name keeps its suffix) or the file itself
        dirs = sorted({p.parent for p in files if p.parent != store})
        target = rng.choice(dirs) if dirs and rng.random() < 0.7 else victim
        os.rename(target, target.with_name(HOSTILE_NAME + target.name))
        return f"renamed {target.relative_to(store)} to a hostile name"
    data = victim.read_bytes()
    n = len(data)
    if op in ("dir", "fifo", "loop", "devzero"):
        replace_file(victim, op)
        return f"{op} in place of {rel}"
    b = bytearray(data)
    i = _boundary(rng, n)
    if op == "truncate":
        del b[i:]
    elif op == "int" and n >= 8:
        size, v = rng.choice(HOSTILE_INTS)
        i = min(i, n - size)
        b[i:i + size] = v.to_bytes(size, "big")
    elif op == "zero-tail":
        b[i:] = bytes(n - i)
    elif op == "garbage":
        b[i:] = rng.randbytes(rng.randint(1, max(1, n - i)))
    elif op == "empty":
        b = bytearray()
    victim.write_bytes(bytes(b))
    return f"{op}@{i} in {rel} ({n} -> {len(b)} bytes)"


def _kafka_valid_crc(rng: random.Random, data: bytearray, op: str) -> str | None:
    """A v2 batch of ``data`` changed so that only its contents are hostile, its CRC-32C made valid again (else
    the walker stops at the CRC and the decoders behind it never see the values): ``batch-field`` writes an
    extreme value into a header field (offsets, timestamps, counts, producer fields; places from the schema),
    ``records`` writes random bytes into the records area (varint lengths, deltas, header counts)."""
    from formats import kafka as K
    from mqtool.schema_struct import field_positions

    starts = kafka_v2_batches(data)
    if not starts:
        return None
    p, end = rng.choice(starts)
    if op == "batch-field":
        fields = field_positions(K.RecordBatchHeader)
        name = rng.choice(sorted(set(fields) - {"batchLength", "magic", "crc"}))
        at, size = fields[name]
        bits = 8 * size
        v = rng.choice([(1 << (bits - 1)) - 1, -(1 << (bits - 1)), -1, 0, 1 << (bits - 2)])
        data[p + at:p + at + size] = v.to_bytes(size, "big", signed=True)
        what = f"batch-field {name}={v}"
    else:
        lo = p + K.V2_HEADER_SIZE
        if lo >= end:
            return None
        i = rng.randrange(lo, end)
        n = min(end - i, rng.randint(1, 10))
        data[i:i + n] = rng.choice([rng.randbytes(n), b"\xff" * (n - 1) + b"\x7f", b"\x00" * n])
        what = f"records@{i} ({n} bytes)"
    kafka_fix_crc(data, p, end)
    return what + f" (CRC made valid) in the batch at {p}"


def kafka_v2_batches(data) -> list[tuple[int, int]]:
    """(start, end) of every v2 batch of a Kafka log segment's bytes, walking the entries from the start
    (legacy entries skipped) up to the first that does not fit."""
    from formats import kafka as K

    starts, p = [], 0
    while p + K.HEADER_SIZE_UP_TO_MAGIC <= len(data):
        size = int.from_bytes(data[p + 8:p + 12], "big", signed=True)
        if size < K.MIN_RECORD_OVERHEAD or p + 12 + size > len(data):
            break
        if data[p + K.MAGIC_OFFSET] == 2 and size >= K.V2_HEADER_SIZE - K.LOG_OVERHEAD:
            starts.append((p, p + 12 + size))
        p += 12 + size
    return starts


def kafka_fix_crc(data: bytearray, p: int, end: int) -> None:
    """Make the CRC-32C of the v2 batch at ``data[p:end]`` valid again (in place)."""
    from formats import kafka as K
    from mqtool.fastcrc import crc32c

    crc = crc32c(bytes(data[p + K.V2_ATTRIBUTES_OFFSET:end]))
    data[p + K.V2_CRC_OFFSET:p + K.V2_CRC_OFFSET + 4] = crc.to_bytes(4, "big")


def hostile_commands(family: str, store: Path, scratch: Path, pristine: Path) -> list[tuple[str, list[str]]]:
    """:func:`commands` and more: every dump kind of the family, carve, inspect, diff; some as tables."""
    s = str(store)
    out = [(v, [x if x != "--json" or v not in ("dump", "query") else "--as=table" for x in a])
           for v, a in commands(family, store, scratch)]
    out.append(("verify", ["verify", "store", s, "--as", "table"]))
    if family == "kafka":
        out += [("dump", ["dump", "kafka", s, "--as", "table", "--print-data", "--body", "text"]),
                ("inspect", ["inspect", str(store / "fixture-0"), "--offset", "1", "--as", "table"])]
    else:
        out += [("dump", ["dump", kind, s, "--as", "table"]) for kind in ("consumequeue", "index", "checkpoint")]
        out += [("dump", ["dump", "config", s, "--json"]), ("dump", ["dump", "abort", s, "--as", "table"]),
                ("dump", ["dump", "commitlog", s, "--as", "table", "--body", "text"]),
                ("inspect", ["inspect", s, "--offset", "0", "--as", "table"])]
    out += [("carve", ["carve", *(str(p) for p in _files(store)[:3]), "--as", "table", "--deep"]),
            ("diff", ["diff", str(pristine), s, "--as", "table"])]
    return out


def check_run(where: str, args: list[str], code: int, out: bytes, err: str, exc, stats: "Stats") -> None:
    """The checks of every run (see the module doc); failures go to ``stats``."""
    stats.runs += 1
    stats.exits[code] = stats.exits.get(code, 0) + 1
    if exc is not None:
        import traceback

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        stats.failures.append(f"{where}: uncaught {type(exc).__name__}: {exc}\n{tb[-1500:]}")
        return
    if code not in (0, 1, 2):
        stats.failures.append(f"{where}: exit code {code}")
    if "Traceback" in err:
        stats.failures.append(f"{where}: a traceback on stderr: {err[-500:]}")
    if code == 2 and (err.count("\n") != 1 or not err.startswith("mqtool: ")):
        stats.failures.append(f"{where}: exit 2 but stderr is not one 'mqtool: ' line: {err[-500:]!r}")
    bad = RAW_CONTROL.search(err.replace("\n", ""))
    if bad:
        stats.failures.append(f"{where}: raw control {bad.group()!r} on stderr: {err[-300:]!r}")
    if any("table" in a for a in args):
        text = out.decode("utf-8", "surrogateescape").replace("\n", "")
        bad = RAW_CONTROL.search(text)
        if bad:
            stats.failures.append(f"{where}: raw control {bad.group()!r} in a table: "
                                  f"{text[max(0, bad.start() - 80):bad.start() + 80]!r}")


def commands(family: str, store: Path, scratch: Path) -> list[tuple[str, list[str]]]:
    s = str(store)
    log = str(store / "fixture-0") if family == "kafka" else s
    dump = ["dump", "kafka", log, "--deep", "--json"] if family == "kafka" else ["dump", "commitlog", s, "--json",
                                                                                 "--body", "base64"]
    query = ["query", s, "--offset", "0", "--json"] if family == "kafka" else ["query", s, "--key", "k1", "--json"]
    return [("dump", dump), ("verify", ["verify", "store", s, "--json"]), ("query", query),
            ("info", ["info", s, "--json"]), ("rebuild-index", ["rebuild-index", s, "--out", str(scratch / "rb"),
                                                                "--force", "--json"]),
            ("report", ["report", s, "-o", str(scratch / "r.html"), "--force"]), ("hash", ["hash", s, "--json"])]


def run_cli(args: list[str], native: bool) -> tuple[int, bytes, str, BaseException | None, float]:
    """One in-process CLI run: (exit code, stdout, stderr, uncaught exception, seconds)."""
    from click.testing import CliRunner

    from mqtool.cli import cli

    saved = os.environ.get("MQTOOL_NATIVE")
    os.environ["MQTOOL_NATIVE"] = "1" if native else "0"
    t = time.monotonic()
    try:
        r = CliRunner().invoke(cli, args, catch_exceptions=True)
    finally:
        if saved is None:
            os.environ.pop("MQTOOL_NATIVE", None)
        else:
            os.environ["MQTOOL_NATIVE"] = saved
    dt = time.monotonic() - t
    exc = r.exception if r.exception is not None and not isinstance(r.exception, SystemExit) else None
    return r.exit_code, r.stdout_bytes, r.stderr, exc, dt


def one_case(k: int, seed: int, stats: Stats, families=tuple(STORES), case_timeout: float = 30.0,
             max_rss_mb: int = 2048) -> None:
    rng = random.Random(f"{seed}:{k}")
    family = families[k % len(families)]
    with _mutated_store(rng, family, "mqtool-cli-fuzz-", mutate) as (d, store, what):
        for verb, args in commands(family, store, Path(d) / "out"):
            got = {}
            for native in (True, False):
                code, out, err, exc, dt = run_cli(args, native)
                got[native] = (code, out)
                where = f"case {k} seed {seed} {family} [{what}] {' '.join(args[:2])} helpers={'on' if native else 'off'}"
                check_run(where, args, code, out, err, exc, stats)
                if dt > case_timeout:
                    stats.failures.append(f"{where}: took {dt:.1f} s")
            if verb in COMPARED and got[True] != got[False]:
                stats.failures.append(f"case {k} seed {seed} {family} [{what}] {verb}: helpers on/off differ "
                                      f"(exit {got[True][0]} vs {got[False][0]}, stdout "
                                      f"{len(got[True][1])} vs {len(got[False][1])} bytes)")
    _case_done(stats, f"case {k} seed {seed}", max_rss_mb)


def hostile_case(k: int, seed: int, stats: Stats, families=tuple(STORES), case_timeout: float = 30.0,
                 max_rss_mb: int = 2048) -> None:
    """One ``--hostile`` case: a store-shape change (sometimes with a byte mutation too), then
    :func:`hostile_commands` with the helpers on."""
    rng = random.Random(f"hostile:{seed}:{k}")
    family = families[k % len(families)]
    with _mutated_store(rng, family, "mqtool-cli-hostile-", mutate_hostile) as (d, store, what):
        for verb, args in hostile_commands(family, store, Path(d) / "out", STORES[family]):
            code, out, err, exc, dt = run_cli(args, True)
            where = f"hostile case {k} seed {seed} {family} [{what}] {' '.join(args[:2])}"
            check_run(where, args, code, out, err, exc, stats)
            if dt > case_timeout:
                stats.failures.append(f"{where}: took {dt:.1f} s")
    _case_done(stats, f"hostile case {k} seed {seed}", max_rss_mb)


@contextlib.contextmanager
def _mutated_store(rng: random.Random, family: str, prefix: str, first):
    """A temp dir holding a copy of the family's store changed by ``first(rng, store)`` (and sometimes by a
    byte mutation too): yields (dir, store, what was done)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        store = Path(d) / "store"
        shutil.copytree(STORES[family], store)
        what = first(rng, store)
        if rng.random() < 0.3:      # sometimes a second change
            what += "; " + mutate(rng, store)
        yield d, store, what


def _case_done(stats: Stats, label: str, max_rss_mb: int) -> None:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    if rss > max_rss_mb:
        stats.failures.append(f"{label}: peak RSS {rss} MB")
    stats.cases += 1


def fuzz(seconds: float | None = None, cases: int | None = None, seed: int = 1, first: int = 0,
         families=tuple(STORES), stop_on_failure: bool = False, hostile: bool = False, **kw) -> Stats:
    stats = Stats()
    deadline = None if seconds is None else time.monotonic() + seconds
    k = first
    case = hostile_case if hostile else one_case
    while (cases is None or k < first + cases) and (deadline is None or time.monotonic() < deadline):
        case(k, seed, stats, families, **kw)
        k += 1
        if stop_on_failure and stats.failures:
            break
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Fuzz every mqtool verb over mutated fixture stores.")
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--cases", type=int, default=None)
    ap.add_argument("--first", type=int, default=0, help="first case number (replay)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--family", action="append", choices=sorted(STORES))
    ap.add_argument("--case-timeout", type=float, default=30.0)
    ap.add_argument("--max-rss-mb", type=int, default=2048)
    ap.add_argument("--hostile", action="store_true", help="store-shape mutations, more verbs, tables")
    a = ap.parse_args(argv)
    if a.seconds is None and a.cases is None:
        a.seconds = 60
    t = time.monotonic()
    st = fuzz(a.seconds, a.cases, a.seed, a.first, tuple(a.family or STORES), hostile=a.hostile,
              case_timeout=a.case_timeout, max_rss_mb=a.max_rss_mb)
    for f in st.failures:
        print("FAIL", f, file=sys.stderr)
    kinds = {}
    for f in st.failures:
        key = f.split(": ", 1)[1].split("\n")[0][:80] if ": " in f else f[:80]
        kinds[key] = kinds.get(key, 0) + 1
    print(f"{st.cases} cases, {st.runs} CLI runs in {time.monotonic() - t:.0f} s; exit codes "
          f"{dict(sorted(st.exits.items()))}; {len(st.failures)} failures; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")
    for key, n in sorted(kinds.items(), key=lambda x: -x[1]):
        print(f"  {n:5}  {key}")
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
