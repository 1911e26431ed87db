#!/usr/bin/env python3
"""mqtool benchmark: build realistic inputs once, then measure each operation against the raw read of the same files.

Not a test (nothing here asserts a time). Usage, from the repository root::

    .venv/bin/python bench/run.py                 # ~1 GiB RocketMQ store (built once, cached)
    .venv/bin/python bench/run.py --quick         # ~64 MiB, a minute end to end
    .venv/bin/python bench/run.py --size-mb 4096  # 4 GiB: peak RSS must not grow with the input

Every measurement runs in its own process (``os.wait4`` gives its peak RSS and CPU time); the figure is the
median of ``--repeat`` runs. In-process operations time themselves (wall and CPU, start-up excluded). Rates are decimal (1 MB/s = 10^6 bytes/s) over the commitlog data bytes. Two
rates are printed: over wall time, and over the process's own CPU time (user+sys), which is what a one-process
operation costs whatever else the machine is doing; targets for one-process operations are judged on CPU
time, ``--jobs`` ones on wall time. CLI operations are timed as a user sees them, interpreter start-up
included (shown on its own line).

Adding an input family: write ``bench/build_<family>.py`` with ``build_store(root, total_bytes, log) -> dict``
(``messages``, ``data_bytes``, ...), register it in :data:`FAMILIES` with its operations (:class:`Op`) and in
:func:`build_main`; an operation whose engine is missing on this checkout reports ``n/a``. Kafka rows rate
over the ``.log`` bytes and records of the Kafka input (``--families kafka`` measures only those).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

PY = sys.executable
BUILD_VERSION = 1          # bump when a builder changes what it writes


# ---- child side: operations measured in-process (the child times itself; start-up excluded) ------------------

def _segments(store: str) -> list[str]:
    d = Path(store) / "commitlog"
    return sorted(str(p) for p in d.iterdir() if p.name.isdigit())


def _read_all(store: str, each=None) -> dict:
    """Read every commitlog file in 4 MiB ``readinto`` chunks, calling ``each(chunk)`` on each when given."""
    buf = bytearray(4 << 20)
    mv = memoryview(buf)
    total = 0
    t = time.perf_counter()
    for p in _segments(store):
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(mv):
                if each is not None:
                    each(mv[:n])
                total += n
    return {"seconds": time.perf_counter() - t, "bytes": total}


def child_raw_read(store: str, info: dict) -> dict:
    return _read_all(store)


def child_crc_floor(store: str, info: dict) -> dict:
    """Raw read + CRC-32 of every byte with the CRC function mqtool uses (a floor for verify)."""
    from mqtool.fastcrc import crc32

    return _read_all(store, crc32)


def child_header_walk(store: str, info: dict) -> dict:
    """Frame every unit (TOTALSIZE + MAGICCODE, the schema's UnitPrefix) and jump to the next."""
    from formats import rocketmq as F
    from mqtool.io import map_input
    from mqtool.schema_struct import fixed_prefix_format

    from mqtool.pages import PageWindow

    prefix, _ = fixed_prefix_format(F.UnitPrefix)
    unpack = prefix.unpack_from
    msgs = (F.MESSAGE_MAGIC_CODE_V1, F.MESSAGE_MAGIC_CODE_V2)
    n = 0
    t = time.perf_counter()
    for p in _segments(store):
        with map_input(p) as mi:
            buf = mi.buf
            end = len(buf) - 8
            pos = 0
            win = PageWindow(buf)                   # same page handling as the scanners (bounded RSS)
            while pos <= end:
                if pos >= win.next_at:
                    win.advance(pos)
                size, magic = unpack(buf, pos)
                if magic not in msgs or size <= 0:
                    break
                n += 1
                pos += size
    return {"seconds": time.perf_counter() - t, "count": n}


def child_decode(store: str, info: dict) -> dict:
    """Decode every unit to a record (body CRC checked, as ``dump`` does)."""
    from mqtool.rocketmq.store import open_store
    from mqtool.rocketmq.scan import iter_messages

    s = open_store(store)
    n = 0
    t = time.perf_counter()
    for _m in iter_messages(s.segments, check_crc=True):
        n += 1
    return {"seconds": time.perf_counter() - t, "count": n}


def child_query(store: str, info: dict) -> dict:
    """Warm key lookups through the index via the family's query engine; median latency."""
    from mqtool.options import QueryOptions, ScanStats
    from mqtool.rocketmq import ops

    samples = info.get("samples") or []
    if not samples:
        return {"error": "no sample keys recorded for this store"}
    lat = []
    found = 0
    cold = None
    for rnd in range(5):
        for topic, key in samples:
            t = time.perf_counter()
            _cols, rows = ops.query(store, QueryOptions(key=key, topic=topic), ScanStats())
            got = list(rows)
            dt_ = time.perf_counter() - t
            if cold is None:
                cold = dt_
            else:
                lat.append(dt_)
            found += bool(got)
    return {"seconds": statistics.median(lat), "cold_seconds": cold, "found": found,
            "lookups": len(samples) * 5}


def child_calibrate(store: str, info: dict) -> dict:
    """Machine calibration: plain construct ``MessageV1.parse`` per unit over the first 20,000 units. The issue's
    reference machine did ~35k msg/s (parse_stream) here; a much lower figure means a slower or busier machine."""
    from formats import rocketmq as F
    from mqtool.io import map_input

    n = 0
    t = time.perf_counter()
    with map_input(_segments(store)[0]) as mi:
        buf = mi.buf
        pos = 0
        while n < 20_000 and pos + 8 <= len(buf):
            size = int.from_bytes(buf[pos:pos + 4], "big")
            F.MessageV1.parse(buf[pos:pos + size])
            pos += size
            n += 1
    return {"seconds": time.perf_counter() - t, "count": n, "bytes": pos}


def child_carve_random(store: str, info: dict) -> dict:
    """``mqtool carve --json`` over seeded random bytes (as many as the commitlog data, at most 256 MiB): the
    search alone, which must find nothing. Times the CLI process (wall, and its CPU from wait4)."""
    import random

    size = min(info["data_bytes"], 256 << 20)
    img = Path(store).parent / f"carve-random-{size}.img"
    if not img.exists() or img.stat().st_size != size:
        rng = random.Random(20261124)
        with open(img.with_suffix(".tmp"), "wb") as f:
            for a in range(0, size, 16 << 20):
                f.write(rng.randbytes(min(16 << 20, size - a)))
        os.replace(img.with_suffix(".tmp"), img)
    with open(img, "rb", buffering=0) as f:                  # into the page cache, as warm() does
        while f.read(8 << 20):
            pass
    wall, cpu, _rss, rc, out = run_measured(_mqtool_argv(["carve", str(img), "--json"]), stdout=subprocess.PIPE)
    rows = out.decode().splitlines()
    if rc != 1 or len(rows) != 1:
        raise RuntimeError(f"carve of random bytes: exit {rc}, {len(rows) - 1} rows (expected exit 1, none)")
    return {"seconds": wall, "cpu_seconds": cpu, "bytes": size, "count": 0}
# The seed parser: the Python walker mqtool started with (commit 51dce79, "RocketMQ: schemas, store layout,
# commitlog scanner ..."), run as it was. Issue #20 judges dump and rebuild-index against its walk.
SEED_COMMIT = "51dce796d75417ef6599b3af9c2a42de02bce820"


def seed_tree(base: Path) -> Path:
    """The seed's mqtool/ and formats/ (from this checkout's git history), extracted once under ``base``."""
    d = base / f"seed-{SEED_COMMIT[:12]}"
    if not (d / "mqtool" / "rocketmq" / "scan.py").exists():
        tmp = Path(tempfile.mkdtemp(prefix="seed-", dir=base))
        arc = subprocess.run(["git", "-C", str(REPO), "archive", SEED_COMMIT, "mqtool", "formats"],
                             capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=arc, check=True)
        if d.exists():
            shutil.rmtree(d)
        tmp.rename(d)
    return d


def seed_child_main(seed_dir: str, store: str) -> None:
    """The seed's ``iter_messages`` over the store's segments (body CRC on, its default): every unit decoded."""
    sys.path.insert(0, seed_dir)
    for m in [m for m in sys.modules if m == "mqtool" or m.startswith(("mqtool.", "formats"))]:
        del sys.modules[m]
    c0 = time.process_time()
    t = time.perf_counter()
    from mqtool.rocketmq.layout import open_store
    from mqtool.rocketmq.scan import iter_messages

    assert Path(sys.modules["mqtool.rocketmq.scan"].__file__).is_relative_to(seed_dir)
    n = 0
    for _m in iter_messages(open_store(store).segments):
        n += 1
    sys.stdout.write(json.dumps({"seconds": time.perf_counter() - t, "count": n,
                                 "cpu_seconds": time.process_time() - c0}) + "\n")


def child_table(store: str, info: dict) -> dict:
    """``--as table`` drawing alone: the first 50,000 dump rows (decoded before the clock starts) drawn as the
    table ``dump commitlog --as table`` prints into a file (every column, batches of 2,000 rows)."""
    import io
    from itertools import islice

    from rich.console import Console

    from mqtool import render
    from mqtool.options import DumpOptions, ScanStats
    from mqtool.rocketmq import ops

    columns, rows, _ = ops.dump("commitlog", store, DumpOptions(jobs=1), ScanStats())
    rows = list(islice(render.as_dicts(rows), 50_000))
    render.configure_output("table")
    con = Console(file=io.StringIO(), width=80, color_system=None, force_terminal=False)
    t = time.perf_counter()
    n = render.render_table(iter(rows), columns, console=con)
    return {"seconds": time.perf_counter() - t, "count": n, "bytes": len(con.file.getvalue())}


CHILD_OPS = {"table": child_table,
             "calibrate": child_calibrate, "raw-read": child_raw_read, "crc-floor": child_crc_floor, "header-walk": child_header_walk,
             "decode": child_decode, "query-key": child_query, "carve-random": child_carve_random}


def child_main(op: str, store: str, info_path: str) -> None:
    info = json.loads(Path(info_path).read_text())
    try:
        c0 = time.process_time()
        res = CHILD_OPS[op](store, info)
        res.setdefault("cpu_seconds", time.process_time() - c0)
    except Exception as e:  # an engine missing on this checkout, for instance
        res = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(res) + "\n")


# ---- parent side ---------------------------------------------------------------------------------------------

@dataclass
class Op:
    name: str
    what: str
    kind: str                      # "child" (in-process op) | "cli" (mqtool argv) | "na"
    argv: list = field(default_factory=list)   # cli: args after "mqtool"; {store} {out} {jobs} substituted
    unit: str = "bytes"            # what the rate counts: bytes+msgs, or latency
    target: str = ""
    check: object = None           # fn(result) -> bool | None
    note: str = ""
    default: bool = True           # False: only measured when named in --only


@dataclass
class Result:
    op: Op
    wall: float | None = None
    cpu: float | None = None
    rss_mb: float | None = None
    bytes: int | None = None
    count: int | None = None
    extra: dict = field(default_factory=dict)
    na: str | None = None


def run_measured(argv: list[str], stdout=subprocess.DEVNULL, env=None, cwd=None) -> tuple[float, float, float, int, bytes]:
    """(wall s, cpu s, peak RSS MB, exit code, stdout bytes when piped) of one child process."""
    if env is None:   # this checkout's mqtool, installed or not
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        # compiled bytecode cached as an installed package has it (not recompiled by every run), outside the tree
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("PYTHONPYCACHEPREFIX", str(run_measured.pycache))
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=cwd)
    out = p.stdout.read() if stdout == subprocess.PIPE else b""
    err = p.stderr.read()
    _pid, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stdout and p.stdout.close()
    p.stderr.close()
    run_measured.last_stderr = err.decode("utf-8", "replace")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, p.returncode, out


run_measured.pycache = Path(tempfile.gettempdir()) / "mqtool-bench" / "pycache"


def _mqtool_argv(args: list[str]) -> list[str]:
    return [PY, "-m", "mqtool", *args]


def small_verify(runs: int = 15) -> str:
    """The start-up row: ``mqtool verify store`` on the bundled RocketMQ fixture against ``python -c pass`` with
    the same interpreter (issue #20 asks for at most 3x), medians of ``runs`` alternating runs. What is imported
    on the way: ``python -X importtime -m mqtool verify store fixtures/rocketmq/store``."""
    fixture = str(REPO / "fixtures" / "rocketmq" / "store")
    bare, small = [], []
    for _ in range(runs):
        bare.append(run_measured([PY, "-c", "pass"])[0])
        small.append(run_measured(_mqtool_argv(["verify", "store", fixture]))[0])
    b, m = statistics.median(bare), statistics.median(small)
    line = (f"  small-verify   verify store on fixtures/rocketmq/store {m * 1000:6.1f} ms; python -c pass "
            f"{b * 1000:5.1f} ms; ratio {m / b:4.1f}x (target <= 3x)")
    installed = _installed_script()
    if installed is not None:       # as an operator types it: the console script, from another directory
        script, env, cwd = installed
        typed = statistics.median(run_measured([script, "verify", "store", fixture], env=env, cwd=cwd)[0]
                                  for _ in range(runs))
        line += f"\n                 the installed `mqtool` from {cwd}: {typed * 1000:6.1f} ms; ratio {typed / b:4.1f}x"
    return line


def _installed_script():
    """(console script, environment, working directory) when this interpreter has ``mqtool`` installed from this
    checkout (``pip install -e``, the README's quick start), else None. Run from a directory outside the tree with
    no PYTHONPATH, it starts as an operator's does: the project reached through the install, not ``sys.path``."""
    script = Path(PY).parent / "mqtool"
    if not script.is_file():
        return None
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    cwd = tempfile.gettempdir()
    r = subprocess.run([PY, "-c", "import mqtool; print(mqtool.__file__)"], capture_output=True, text=True,
                       env=env, cwd=cwd)
    if r.returncode or Path(r.stdout.strip()).resolve().parent != (REPO / "mqtool").resolve():
        return None
    return str(script), env, cwd


def measure(op: Op, store: str, info: dict, info_path: str, repeat: int, jobs: int, workdir: Path) -> Result:
    r = Result(op)
    if op.kind == "na":
        r.na = op.note
        return r
    walls, cpus, rsss, extras = [], [], [], []
    for i in range(repeat):
        if op.kind in ("child", "seed"):
            if op.kind == "seed":
                try:
                    argv = [PY, str(HERE / "run.py"), "--seed-child", str(seed_tree(workdir.parent)), store]
                except (OSError, subprocess.CalledProcessError) as e:
                    r.na = f"no seed tree (needs this checkout's git history): {e}"
                    return r
            else:
                argv = [PY, str(HERE / "run.py"), "--child", op.name, store, info_path]
            wall, cpu, rss, rc, out = run_measured(argv, stdout=subprocess.PIPE)
            try:
                res = json.loads(out.decode().strip().splitlines()[-1])
            except (ValueError, IndexError):
                res = {"error": f"exit {rc}: {run_measured.last_stderr.strip()[-300:]}"}
            if "error" in res:
                r.na = res["error"]
                return r
            walls.append(res["seconds"])
            extras.append(res)
            cpu = res["cpu_seconds"]
        else:
            out_dir = workdir / f"out-{op.name}-{i}"
            if out_dir.exists():
                shutil.rmtree(out_dir)
            argv = [a.format(store=store, out=out_dir, jobs=jobs, copy=_copy_of(store) if "{copy}" in a else "")
                    for a in op.argv]
            wall, cpu, rss, rc, _ = run_measured(_mqtool_argv(argv))
            if out_dir.exists():
                shutil.rmtree(out_dir)
            if rc not in (0, 1) or "Traceback (most recent call last)" in run_measured.last_stderr:
                err = run_measured.last_stderr.strip().splitlines()
                r.na = f"exit {rc}: {err[-1] if err else ''}"[:160]
                return r
            walls.append(wall)
            extras.append({})
        cpus.append(cpu)
        rsss.append(rss)
    r.wall = statistics.median(walls)
    r.cpu = statistics.median(cpus)
    r.rss_mb = max(rsss)
    r.extra = extras[len(extras) // 2]
    r.bytes = r.extra.get("bytes", info["data_bytes"])
    r.count = r.extra.get("count", info["messages"])
    if op.name == "verify-all" and r.cpu and r.wall:
        # did it use more than one core? cpu/wall against the one-job run's (a busy machine lowers both)
        one = measure.one_job_ratio or 1.0
        if r.cpu / r.wall < 1.25 * min(one, 1.0):
            r.na = (f"--jobs {jobs} accepted but ran on one core (cpu/wall {r.cpu / r.wall:.2f}, one job "
                    f"{one:.2f}); {r.bytes / r.wall / 1e6:,.0f} MB/s wall")
    if op.name == "verify-1" and r.cpu and r.wall:
        measure.one_job_ratio = r.cpu / r.wall
    measure.walls[op.name] = r.wall
    return r


measure.one_job_ratio = None
measure.walls = {}          # op name -> median wall of this run (rows judged against another row)


def _copy_of(store: str) -> str:
    """A second copy of the input next to it (made once, kept with the cached input): the other side of the
    ``diff`` row, so the compare reads two files as it does between a master and its slave."""
    copy = Path(store).parent / (Path(store).name + "-copy")
    if not copy.exists():
        tmp = copy.with_name(copy.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(store, tmp)
        tmp.rename(copy)
    return str(copy)


def _within(r, base: str, factor: float):
    """r's wall at most ``factor`` x the wall of row ``base`` measured in this run (None: ``base`` was not)."""
    return r.wall <= factor * measure.walls[base] if base in measure.walls else None


def rocketmq_ops(ncpu: int) -> list[Op]:
    return [
        Op("calibrate", "machine calibration: construct MessageV1.parse, 20k units (ref. machine ~35k/s)",
           "child", unit="msgs"),
        Op("raw-read", "raw read of the commitlog files (4 MiB readinto)", "child"),
        Op("crc-floor", "raw read + CRC-32 of every byte (mqtool.fastcrc)", "child"),
        Op("header-walk", "header walk (TOTALSIZE+MAGIC per unit, mmap)", "child"),
        Op("decode", "decode to records, body CRC on (iter_messages)", "child", unit="msgs",
           target=">= 350k msg/s", check=lambda r: r.count / r.cpu_op >= 350_000),
        Op("dump-json", "mqtool dump commitlog --json > /dev/null", "cli",
           ["dump", "commitlog", "{store}", "--json"], unit="msgs", target=">= 150k msg/s",
           check=lambda r: r.count / r.cpu >= 150_000),
        Op("export", "mqtool export --to DIR --jobs N (Parquet, local engine; needs pyarrow)", "cli",
           ["export", "{store}", "--to", "{out}", "--jobs", "{jobs}"], unit="msgs",
           target="wall <= 2x dump-json", check=lambda r: _within(r, "dump-json", 2.0)),
        Op("export-spark", "mqtool export --engine spark --master local[2] (session start included)", "cli",
           ["export", "{store}", "--to", "{out}", "--engine", "spark", "--master", "local[2]"], unit="msgs",
           default=False, target="per GiB >= 0.8x export (fixed cost apart: bench/spark_bench.py --export)"),
        Op("verify-1", "mqtool verify commitlog --jobs 1 (CRC)", "cli",
           ["verify", "commitlog", "{store}", "--json", "--jobs", "1"], target=">= 1.0 GB/s",
           check=lambda r: r.bytes / r.cpu >= 1.0e9),
        Op("verify-all", f"mqtool verify commitlog --jobs {ncpu} (CRC)", "cli",
           ["verify", "commitlog", "{store}", "--json", "--jobs", "{jobs}"], target=">= 1.5 GB/s wall",
           check=lambda r: r.bytes / r.wall >= 1.5e9),
        Op("verify-store", "mqtool verify store (commitlog + consumequeue + index cross-checks)", "cli",
           ["verify", "store", "{store}", "--json"], unit="msgs", default=False),
        Op("rebuild", "mqtool rebuild-index --out DIR (consumequeue + index)", "cli",
           ["rebuild-index", "{store}", "--out", "{out}", "--force"], unit="msgs", target=">= 500k msg/s",
           check=lambda r: r.count / r.cpu >= 500_000),
        Op("carve", "mqtool carve SEGMENT --json (all families; an image full of RocketMQ units)", "cli",
           ["carve", "{store}/commitlog/00000000000000000000", "--json"], target=">= 500 MB/s",
           check=lambda r: r.bytes / r.cpu >= 500e6),
        Op("carve-random", "mqtool carve --json over random bytes (<= 256 MiB; nothing may be found)", "child",
           target=">= 500 MB/s", check=lambda r: r.bytes / r.cpu >= 500e6),
        Op("diff", "mqtool diff STORE COPY --log-only --json (identical commitlogs: block compare, nothing decoded)",
           "cli", ["diff", "{store}", "{copy}", "--log-only", "--json"], target=">= 1.0 GB/s",
           check=lambda r: r.bytes / r.cpu >= 1.0e9),
        Op("diff-store", "mqtool diff STORE COPY --json (also consume queues and index files)", "cli",
           ["diff", "{store}", "{copy}", "--json"], default=False),
        Op("query-key", "key query through the index, warm (median)", "child", unit="latency",
           target="< 50 ms", check=lambda r: r.wall < 0.050),
        Op("table", "--as table drawing of 50,000 dump rows into a file (rows decoded before the clock)", "child",
           unit="msgs", default=False),
    ]


def issue20_ops(ncpu: int) -> list[Op]:
    """The side-by-side set of issue #20 on one input (``--issue20``): the seed parser's walk and a single-core
    CRC over every byte as the yardsticks, then verify store, dump --json (one process and --jobs N) and
    rebuild-index, each judged against them (:func:`issue20_report`)."""
    return [
        Op("seed-walk", f"the seed parser's walk (commit {SEED_COMMIT[:7]}: iter_messages, body CRC on)", "seed",
           unit="msgs"),
        Op("crc-floor", "one core: read + CRC-32 of every byte (mqtool.fastcrc: ISA-L when installed)", "child"),
        Op("verify-store", "mqtool verify store --json", "cli", ["verify", "store", "{store}", "--json"],
           unit="msgs", target="<= 1.5x crc-floor", check=lambda r: _within(r, "crc-floor", 1.5)),
        Op("dump-json", "mqtool dump commitlog --json > /dev/null (automatic --jobs)", "cli",
           ["dump", "commitlog", "{store}", "--json"], unit="msgs", target="seed / 6",
           check=lambda r: _within(r, "seed-walk", 1 / 6)),
        Op("dump-json-jobs", "mqtool dump commitlog --json --jobs N (workers write straight to the output, in order)", "cli",
           ["dump", "commitlog", "{store}", "--json", "--jobs", "{jobs}"], unit="msgs", target="seed / 6",
           check=lambda r: _within(r, "seed-walk", 1 / 6)),
        Op("rebuild", "mqtool rebuild-index --out DIR (consumequeue + index)", "cli",
           ["rebuild-index", "{store}", "--out", "{out}", "--force"], unit="msgs", target="seed / 8",
           check=lambda r: _within(r, "seed-walk", 1 / 8)),
    ]


#: the rows of other families in the ``--issue20`` set (their own targets): Kafka's records per second
ISSUE20_ROWS = {"kafka": ("kafka-deep-jobs",)}


def issue20_report(results: list[Result]) -> list[str]:
    """Each row's wall time against the yardstick the issue names (all rows of this run, medians)."""
    w = {r.op.name: r.wall for r in results if r.wall and not r.na}
    c = {r.op.name: r.cpu for r in results if r.cpu and not r.na}
    lines = ["issue #20 targets (wall times of this run, CPU times (user+sys, all processes) in brackets; CLI rows "
             "include interpreter start-up):"]
    for name, base, want, how in (("verify-store", "crc-floor", 1.5, "x the CRC floor (target <= 1.5x)"),
                                  ("dump-json", "seed-walk", 6, "x faster than the seed walk (target >= 6x)"),
                                  ("dump-json-jobs", "seed-walk", 6, "x faster than the seed walk (target >= 6x)"),
                                  ("rebuild", "seed-walk", 8, "x faster than the seed walk (target >= 8x)")):
        if name not in w or base not in w:
            lines.append(f"  {name:<15} n/a")
            continue
        ratio = w[name] / w[base] if name == "verify-store" else w[base] / w[name]
        cr = (c[name] / c[base] if name == "verify-store" else c[base] / c[name]) if name in c and base in c else 0
        ok = ratio <= want if name == "verify-store" else ratio >= want
        lines.append(f"  {name:<15} {w[name]:7.3f} s ({c.get(name, 0):.3f}) vs {base} {w[base]:7.3f} s "
                     f"({c.get(base, 0):.3f}): {ratio:5.2f} ({cr:.2f}){how} {'met' if ok else 'NOT met'}")
    for r in results:
        if r.op.name == "kafka-deep-jobs" and r.wall and not r.na:
            rate = r.count / r.wall
            lines.append(f"  {r.op.name:<15} {r.wall:7.3f} s ({r.cpu or 0:.3f}): {rate / 1e6:.2f} M records/s wall "
                         f"({r.count:,} records; target >= 1.5 M) {'met' if rate >= 1.5e6 else 'NOT met'}")
    return lines


def kafka_ops(ncpu: int) -> list[Op]:
    # the shallow/deep/print-data modes of DumpLogSegments; rates over the .log bytes and records
    return [Op("kafka-verify", "mqtool verify commitlog KAFKA-DIR (batch level: CRC-32C; compressed payloads "
               "inflated)", "cli",
               ["verify", "commitlog", "{store}", "--json"], target=">= 1.5 GB/s",
               check=lambda r: r.bytes / r.cpu >= 1.5e9),
            Op("kafka-deep", "mqtool dump kafka --deep --json (every record, decompressed; default --jobs: a "
               "decoding thread per core)", "cli",
               ["dump", "kafka", "{store}", "--deep", "--json"], unit="msgs", target=">= 440k rec/s",
               check=lambda r: r.count / r.cpu >= 440_000),
            Op("kafka-deep-jobs", f"mqtool dump kafka --deep --json --jobs {ncpu} (threads decode batches ahead in "
               "one process)", "cli", ["dump", "kafka", "{store}", "--deep", "--json", "--jobs", "{jobs}"],
               unit="msgs", target=">= 1.5M rec/s wall", check=lambda r: r.count / r.wall >= 1.5e6),
            Op("kafka-deep-1", "mqtool dump kafka --deep --json --jobs 1 (one thread: the CPU cost of a record)",
               "cli", ["dump", "kafka", "{store}", "--deep", "--json", "--jobs", "1"], unit="msgs",
               target=">= 440k rec/s", check=lambda r: r.count / r.cpu >= 440_000),
            Op("kafka-print", "mqtool dump kafka --print-data --json (keys, values, headers)", "cli",
               ["dump", "kafka", "{store}", "--print-data", "--json"], target=">= 100 MB/s",
               check=lambda r: r.bytes / r.cpu >= 100e6),
            Op("kafka-carve", "mqtool carve SEGMENT.log --json (all families; an image full of Kafka batches)",
               "cli", ["carve", "{store}/bench-0/00000000000000000000.log", "--json"], target=">= 500 MB/s",
               check=lambda r: r.bytes / r.cpu >= 500e6),
            Op("kafka-json", "mqtool dump kafka --json (batch rows; the base of kafka-export)", "cli",
               ["dump", "kafka", "{store}", "--json"]),
            Op("kafka-export", "mqtool export --to DIR --jobs N (batch rows, Parquet, local engine)", "cli",
               ["export", "{store}", "--to", "{out}", "--jobs", "{jobs}"],
               target="wall <= 2x kafka-json", check=lambda r: _within(r, "kafka-json", 2.0))]


FAMILIES = {"rocketmq": rocketmq_ops, "kafka": kafka_ops}


def ensure_store(family: str, base: Path, size_mb: int, rebuild: bool) -> tuple[str, dict, str]:
    """Build (once; cached under ``base``) the family's bench input; returns (store path, info, info path)."""
    d = base / f"{family}-{size_mb}mb-v{BUILD_VERSION}"
    info_path = d / "bench.json"
    if rebuild and d.exists():
        shutil.rmtree(d)
    if not info_path.exists():
        if d.exists():
            shutil.rmtree(d)
        print(f"building a {size_mb} MiB {family} store in {d} (once; cached) ...", file=sys.stderr)
        # in a child process, so this (measuring) process stays small: a forked child starts with its parent's RSS
        subprocess.run([PY, str(HERE / "run.py"), "--build", family, str(d), str(size_mb)], check=True,
                       cwd=str(REPO))
    info = json.loads(info_path.read_text())
    return str(d / "store"), info, str(info_path)


def build_main(family: str, d: str, size_mb: str) -> None:
    d = Path(d)
    t = time.perf_counter()
    size = int(size_mb) << 20
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    if family == "rocketmq":
        from bench.build_rocketmq import build_store
        from formats import rocketmq as F

        info = build_store(d / "store", size, segment_bytes=min(F.DEFAULT_COMMITLOG_FILE_SIZE, size), log=log)
    else:
        from bench.build_kafka import build_store

        info = build_store(d / "store", size, log=log)
    info["build_seconds"] = round(time.perf_counter() - t, 1)
    (d / "bench.json").write_text(json.dumps(info))


def _data_files(store: str) -> list[Path]:
    root = Path(store)
    if (root / "commitlog").is_dir():
        return [Path(p) for p in _segments(store)]
    return sorted(root.glob("*/*.log"))


def warm(store: str) -> None:
    """Bring the data files into the page cache, so every operation reads the same warm bytes."""
    buf = bytearray(8 << 20)
    for p in _data_files(store):
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def page_cache_state(store: str) -> str:
    """How the page cache holds the data files now: of 8 probes of 2 MiB spread over each file, how many come
    into a map as huge pages (:func:`mqtool.pages.huge_backed`). It decides what reading costs: a file in large
    folios is read (and mapped) at about twice the speed of one in 4 KiB pages, the CRC floor included."""
    import mmap

    from mqtool.pages import PROBE, huge_backed

    hits = tries = 0
    for p in _data_files(store):
        with open(p, "rb") as f:
            n = os.fstat(f.fileno()).st_size
            if n < 2 * PROBE:
                continue
            with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
                for i in range(8):
                    tries += 1
                    hits += huge_backed(m, (n - 2 * PROBE) * i // 8, n)
    return (f"page cache: {hits} of {tries} probes of 2 MiB in huge pages "
            f"({'large folios' if tries and hits * 2 >= tries else 'small pages' if tries else 'n/a'})")


#: ``--page-cache``: the block size each data file is written again in (a new file renamed over the old)
PAGE_CACHE_BLOCKS = {"small": 4 << 10, "large": 4 << 20}


def rewrite_in_blocks(store: str, block: int) -> None:
    """``--page-cache small|large``: write each data file of the bench's own input again in blocks of ``block``
    bytes (a new file renamed over the old). 4 KiB writes leave it in the page cache in 4 KiB pages; 4 MiB
    writes in large folios where the kernel and the file system allow (ext4 from Linux 6.16, xfs) -- the state
    of a file just written or copied in big blocks. A file the kernel evicted and read back again may come in
    either (read-ahead allocates large folios), which is why the bench prints what it measured."""
    buf = bytearray(block)
    for p in _data_files(store):
        tmp = p.with_name(p.name + ".rewrite")
        with open(p, "rb", buffering=0) as src, open(tmp, "wb", buffering=0) as dst:
            while n := src.readinto(buf):
                dst.write(memoryview(buf)[:n])
            os.fsync(dst.fileno())
        os.replace(tmp, p)


def _fmt_rate(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "B":
        return f"{v / 1e6:,.0f} MB/s"
    return f"{v / 1e3:,.0f}k/s"


def report(results: list[Result], raw: Result | None, startup: float | None) -> list[str]:
    lines = []
    hdr = (f"{'operation':<13} {'wall s':>8} {'MB/s wall':>11} {'MB/s cpu':>11} {'msg/s wall':>11} "
           f"{'msg/s cpu':>11} {'x raw':>6} {'RSS MB':>7}  {'target':<17} {'met':<4} what")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    raw_rate = raw.bytes / raw.cpu if raw and raw.cpu else None
    for r in results:
        op = r.op
        if r.na:
            lines.append(f"{op.name:<13} {'n/a':>8} {'':>11} {'':>11} {'':>11} {'':>11} {'':>6} {'':>7}  "
                         f"{op.target:<17} {'':<4} {op.what} -- n/a: {r.na}")
            continue
        if op.unit == "latency":
            cold = r.extra.get("cold_seconds")
            lines.append(f"{op.name:<13} {r.wall * 1000:>7.2f}ms {'':>11} {'':>11} {'':>11} {'':>11} {'':>6} "
                         f"{r.rss_mb:>7.0f}  {op.target:<17} {_met(op, r):<4} {op.what}; cold (first) "
                         f"{cold * 1000:.1f} ms; {r.extra.get('found')}/{r.extra.get('lookups')} found")
            continue
        cpu_op = r.cpu_op = r.cpu
        bw = r.bytes / r.wall if r.bytes else None
        bc = r.bytes / cpu_op if r.bytes else None
        mw = r.count / r.wall if r.count else None
        mc = r.count / cpu_op if r.count else None
        base_rate = bw if op.name.endswith("-all") else bc     # --jobs rows: wall; one process: CPU
        ratio = f"{base_rate / raw_rate:.2f}" if base_rate and raw_rate and op.name != "calibrate" else "-"
        lines.append(f"{op.name:<13} {r.wall:>8.3f} {_fmt_rate(bw, 'B'):>11} {_fmt_rate(bc, 'B'):>11} "
                     f"{_fmt_rate(mw, 'm'):>11} {_fmt_rate(mc, 'm'):>11} {ratio:>6} {r.rss_mb:>7.0f}  "
                     f"{op.target:<17} {_met(op, r):<4} {op.what}")
    if startup is not None:
        lines.append(f"(CLI rows include interpreter start-up: `mqtool --version` takes {startup:.3f} s wall here; "
                     f"'x raw' = MB/s (CPU; wall for --jobs rows) / raw-read MB/s (CPU))")
    return lines


def _met(op: Op, r: Result) -> str:
    if op.check is None:
        return ""
    r.cpu_op = r.cpu
    try:
        ok = op.check(r)
    except (TypeError, ZeroDivisionError):
        return "?"
    if ok is None:
        return "?"
    rss_ok = r.rss_mb is None or r.rss_mb < 300
    return "yes" if ok and rss_ok else "NO"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="commitlog size to build (MiB, default 1024)")
    ap.add_argument("--quick", action="store_true", help="64 MiB input, 3 repeats")
    ap.add_argument("--dir", default=os.environ.get("MQTOOL_BENCH_DIR",
                                                    str(Path(tempfile.gettempdir()) / "mqtool-bench")),
                    help="where inputs are built and cached (env MQTOOL_BENCH_DIR)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per operation (median; default 3)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="N for the all-cores verify")
    ap.add_argument("--only", help="comma-separated operation names")
    ap.add_argument("--rebuild-inputs", action="store_true", help="rebuild the cached inputs")
    ap.add_argument("--child", nargs=3, metavar=("OP", "STORE", "INFO"), help=argparse.SUPPRESS)
    ap.add_argument("--build", nargs=3, metavar=("FAMILY", "DIR", "SIZE_MB"), help=argparse.SUPPRESS)
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated input families")
    ap.add_argument("--issue20", action="store_true",
                    help="the side-by-side set of issue #20 (RocketMQ: seed walk, CRC floor, verify store, dump "
                         "--json, rebuild-index; Kafka: dump --deep --json --jobs N) with its ratios; e.g. "
                         "--issue20 --size-mb 2048 --repeat 1")
    ap.add_argument("--kafka-size-mb", type=int, default=1024,
                    help="with --issue20: the size of the Kafka log its records-per-second row reads (MiB, default "
                         "1024: one full segment and a small one)")
    ap.add_argument("--page-cache", choices=("as-is", *PAGE_CACHE_BLOCKS), default="as-is",
                    help="as-is: measure the inputs as the page cache holds them now; small: first write the data "
                         "files again in 4 KiB blocks (4 KiB page-cache pages); large: in 4 MiB blocks (large "
                         "folios where the kernel allows). The state measured is printed either way: it moves "
                         "every reading row, the CRC floor included")
    ap.add_argument("--seed-child", nargs=2, metavar=("SEED_DIR", "STORE"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.seed_child:
        seed_child_main(*a.seed_child)
        return 0
    if a.child:
        child_main(*a.child)
        return 0
    if a.build:
        build_main(*a.build)
        return 0
    size = 64 if a.quick else a.size_mb
    repeat = a.repeat or 3
    base = Path(a.dir)
    base.mkdir(parents=True, exist_ok=True)
    only = set(a.only.split(",")) if a.only else None
    ncpu = os.cpu_count() or 1
    workdir = Path(tempfile.mkdtemp(prefix="mqtool-bench-out-", dir=base))
    startup = statistics.median(run_measured(_mqtool_argv(["--version"]))[0] for _ in range(3))
    from mqtool import native
    print(f"mqtool bench: {native.summary()}")
    if only is None or "small-verify" in only:
        print(small_verify())
    results = []
    raw = None
    try:
        for fam in a.families.split(","):
            if a.issue20:
                ops = issue20_ops(ncpu) if fam == "rocketmq" else [
                    op for op in FAMILIES[fam](ncpu) if op.name in ISSUE20_ROWS.get(fam, ())]
                if not ops:
                    continue
            elif only:
                ops = [op for op in FAMILIES[fam](ncpu) if op.name in only or op.name in ("raw-read", "calibrate")]
                if not any(op.name in only for op in ops) and fam != "rocketmq":
                    continue
            else:
                ops = [op for op in FAMILIES[fam](ncpu) if op.default]
            fam_size = a.kafka_size_mb if a.issue20 and fam == "kafka" else size
            store, info, info_path = ensure_store(fam, base, fam_size, a.rebuild_inputs)
            if fam == "rocketmq":
                print(f"mqtool bench: RocketMQ store {store}: {info['messages']:,} messages, "
                      f"{info['data_bytes'] / 1e6:,.0f} MB of data in {info['segments']} segment(s) "
                      f"({info['data_bytes'] / max(1, info['messages']):,.0f} B/msg), {info['index_entries']:,} "
                      f"index entries; {ncpu} CPUs; load average "
                      f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; median of {repeat}")
            else:
                print(f"mqtool bench: Kafka log dir {store}: {info['messages']:,} records in {info['batches']:,} "
                      f"batches, {info['data_bytes'] / 1e6:,.0f} MB in {info['segments']} segment(s) "
                      f"({info['data_bytes'] / max(1, info['messages']):,.0f} B/record stored; batches by codec "
                      f"{info['records_by_codec']})")
            if a.page_cache in PAGE_CACHE_BLOCKS:
                rewrite_in_blocks(store, PAGE_CACHE_BLOCKS[a.page_cache])
            warm(store)
            print(f"mqtool bench: {page_cache_state(store)}")
            for op in ops:
                print(f"  measuring {op.name} ...", file=sys.stderr)
                r = measure(op, store, info, info_path, repeat, a.jobs, workdir)
                if op.name == "raw-read":
                    raw = r
                results.append(r)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n".join(report(results, raw, startup)))
    if a.issue20:
        print("\n".join(issue20_report(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
