"""Benchmark (not a test): Spark ``local[N]`` vs the embedded runner on one RocketMQ commitlog, and the fixed
cost of a query on a warm Spark session.

Prints, for the same input in one run: raw read bandwidth; embedded dump to NDJSON lines (1 job and all
jobs, over byte ranges); embedded verify of the commitlog (1 job / all jobs); Spark ``count()`` and a full decode
to Arrow through the ``mqtool`` data source; the fixed cost per query (median of small queries on a warm
session); each as MB/s and messages/s with its ratio to the embedded single-process figure.

    python bench/spark_bench.py                    # builds a ~1 GiB commitlog in a temp dir
    python bench/spark_bench.py --size-mib 256 --master 'local[2]'
    python bench/spark_bench.py --store /data/rocketmq/store     # an existing store

The input is built from the construct schema (fixtures/build_rocketmq.py's ``unit``): a few hundred distinct
messages of ~1.5 KB with KEYS/TAGS/UNIQ_KEY, copied with their QUEUEOFFSET/PHYSICALOFFSET set right, in
1 GiB segments closed by BLANK units as a broker writes them. ``bench/run.py`` may call :func:`main` or
:func:`run` (it returns the figures as a dict).
"""
from __future__ import annotations

import argparse
import os
import shutil
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))     # bench/run.py (its cached inputs)

from bench.build_rocketmq import fixture_builder  # noqa: E402
from formats import rocketmq as F  # noqa: E402
from mqtool.schema_struct import fixed_prefix_format  # noqa: E402

SEGMENT = 1 << 30
T0 = 1795338600000


def _templates(n: int = 256, seed: int = 7) -> list[bytes]:
    unit = fixture_builder().unit
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(900, 1500)))
        props = F.properties_to_string([("UNIQ_KEY", f"0A0000050000{i:044X}"), ("TAGS", f"Tag{i % 7}"),
                                        ("KEYS", f"order-{i} user-{i % 13}"), ("WAIT", "true")]).encode()
        topic = f"Topic{i % 8}".encode()
        out.append(unit(topic, body, props, queue_id=i % 4, born="192.168.1.23:51234", store="10.0.0.5:10911",
                        born_ts=T0, store_ts=T0 + 3))
    return out


def build_commitlog(store: Path, size: int, segment: int = SEGMENT) -> int:
    """Write ``store/commitlog/`` with about ``size`` bytes of messages; returns the message count."""
    import struct

    qo_at = fixed_prefix_format(F.MessageV1, stop_before="QUEUEOFFSET")[0].size
    po_at = fixed_prefix_format(F.MessageV1, stop_before="PHYSICALOFFSET")[0].size
    q = struct.Struct(">q")
    tmpl = _templates()
    d = store / "commitlog"
    d.mkdir(parents=True, exist_ok=True)
    queue_next: dict[tuple, int] = {}
    n = 0
    base = 0
    written = 0
    segment = min(segment, max(1 << 20, (size + (1 << 20) - 1) & ~((1 << 20) - 1)) + (1 << 20))
    while written < size:
        seg_size = segment
        buf = bytearray()
        pos = 0
        while written + pos < size:
            t = tmpl[n % len(tmpl)]
            if pos + len(t) + F.END_FILE_MIN_BLANK_LENGTH > seg_size:
                break
            m = bytearray(t)
            k = (n % len(tmpl) % 8, n % len(tmpl) % 4)     # (topic, queue) of the template
            qo = queue_next.get(k, 0)
            queue_next[k] = qo + 1
            q.pack_into(m, qo_at, qo)
            q.pack_into(m, po_at, base + pos)
            buf += m
            pos += len(m)
            n += 1
        # BLANK to the end of the segment (the broker's end-of-file unit), zeros after it
        left = seg_size - pos
        buf += fixture_builder().blank(left)
        buf += bytes(left - 8)
        (d / f"{base:020d}").write_bytes(buf)
        written += pos
        base += seg_size
        if written + 2048 >= size:
            break
    return n


def _timed(fn, repeat: int = 1):
    best = None
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, out


def _raw_read(files) -> int:
    n = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while True:
                b = fh.read(8 << 20)
                if not b:
                    break
                n += len(b)
    return n


def run(store: str, master: str = "local[2]", jobs: int | None = None, queries: int = 7,
        split_size: int | None = None) -> dict:
    from mqtool.options import DumpOptions, ScanStats, VerifyOptions
    from mqtool.ranges import effective_jobs
    from mqtool.rocketmq.store import open_store
    from mqtool.rocketmq.ops import dump
    from mqtool.rocketmq.verify import verify_store

    jobs = effective_jobs(jobs or 0)
    segs = open_store(store).segments
    total = sum(s.size for s in segs)
    res: dict = {"bytes": total, "jobs": jobs, "master": master}
    res["raw_read_s"], _ = _timed(lambda: _raw_read([s.path for s in segs]), 2)

    from mqtool.render import PreRendered, PreRenderedLines, dumps

    def dump_count(j):
        # `dump commitlog --json` without the terminal: every row becomes its NDJSON line (one job: decoded
        # and serialised in this process; N jobs: the workers hand back rendered lines)
        stats = ScanStats()
        _, rows, _ = dump("commitlog", store, DumpOptions(jobs=j, split_size=split_size, ndjson=True), stats)
        n = 0
        for r in rows:
            if type(r) is PreRenderedLines:      # a block of lines (the compiled helper's JSON lane)
                n += r.count(b"\n")
                continue
            if type(r) is not PreRendered:
                dumps(r)
            n += 1
        return n

    res["embedded_rows_1_s"], msgs = _timed(lambda: dump_count(1))
    res["messages"] = msgs
    res["embedded_rows_all_s"], _ = _timed(lambda: dump_count(jobs))

    def verify(j):
        fs, sf = verify_store(open_store(store), "commitlog", VerifyOptions(jobs=j, split_size=split_size,
                                                                            progress=False))
        for _ in fs:
            pass
        return sf().messages

    res["embedded_verify_1_s"], _ = _timed(lambda: verify(1))
    res["embedded_verify_all_s"], _ = _timed(lambda: verify(jobs))

    from mqtool.spark.session import get_session

    t = time.perf_counter()
    spark = get_session(master)
    res["spark_start_s"] = time.perf_counter() - t
    reader = spark.read.format("mqtool").option("format", "rocketmq")
    if split_size:
        reader = reader.option("splitSize", str(split_size))
    # warm up the Python workers once (the first query pays their start)
    t = time.perf_counter()
    reader.load(store).limit(1).collect()
    res["spark_first_query_s"] = time.perf_counter() - t
    res["spark_count_s"], n = _timed(lambda: reader.load(store).count(), 2)
    assert n == msgs, (n, msgs)

    def spark_full():
        # every column decoded to Arrow and handed to the JVM; aggregated there (no collect of rows)
        from pyspark.sql import functions as fn

        return reader.load(store).agg(fn.sum("body_size"), fn.count("msg_id"), fn.max("properties.KEYS")).collect()

    res["spark_full_s"], _ = _timed(spark_full, 2)
    small = str(Path(tempfile.mkdtemp(prefix="mqtool-bench-q-")) / "store")
    build_commitlog(Path(small), 64 * 1024, segment=1 << 20)
    times = []
    for _ in range(queries):
        t = time.perf_counter()
        spark.read.format("mqtool").load(small).filter("array_contains(keys, 'order-3')").collect()
        times.append(time.perf_counter() - t)
    res["spark_query_fixed_s"] = statistics.median(times)
    return res


def _cli_seconds(args: list[str]) -> float:
    """Wall seconds of one ``python -m mqtool ARGS`` run as a user starts it (interpreter and, for
    ``--engine spark``, the Spark session included); a failed run stops the benchmark."""
    import subprocess

    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True, text=True,
                       cwd=str(Path(__file__).resolve().parent.parent))
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"mqtool {' '.join(args)}: exit {p.returncode}: {p.stderr[-2000:]}")
    return dt


def export_rows(small: str, big: str, master: str = "local[2]", jobs: int = 0) -> dict:
    """``mqtool export`` of two stores (a small one and a big one) on the embedded engine (``--jobs``) and on
    ``--engine spark --master MASTER``, each run once as a user runs it; per engine a line through the two
    points gives the fixed cost (seconds at 0 bytes) and the cost per GiB."""
    import shutil

    from mqtool.rocketmq.store import open_store

    res: dict = {"master": master, "jobs": jobs, "sizes": {}}
    out = Path(tempfile.mkdtemp(prefix="mqtool-bench-export-"))
    try:
        for name, store in (("small", small), ("big", big)):
            res["sizes"][name] = sum(s.size for s in open_store(store).segments)
            for engine, extra in (("embedded", ["--jobs", str(jobs)]), ("spark", ["--engine", "spark", "--master", master])):
                dst = out / f"{name}-{engine}"
                res[f"{engine}_{name}_s"] = _cli_seconds(["export", store, "--to", str(dst), *extra])
                shutil.rmtree(dst, ignore_errors=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    gib = {k: v / (1 << 30) for k, v in res["sizes"].items()}
    for engine in ("embedded", "spark"):
        ts, tb = res[f"{engine}_small_s"], res[f"{engine}_big_s"]
        per = (tb - ts) / (gib["big"] - gib["small"])
        res[f"{engine}_per_gib_s"] = per
        res[f"{engine}_fixed_s"] = ts - per * gib["small"]
    return res


def proc_table(ncpu: int) -> tuple[dict[int, int], dict[int, float]]:
    """({pid: parent pid}, {pid: CPU seconds}) of every process in /proc; CPU is the sum of the first ``ncpu``
    of utime, stime, cutime, cstime."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                f = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(f[1])
        cpu[int(d)] = sum(int(x) for x in f[11:11 + ncpu]) / tick
    return parent, cpu


def tree_run(args: list[str], interval: float = 0.1, ok=(0,)) -> tuple[float, float]:
    """(wall s, CPU s) of one ``python -m mqtool ARGS`` run: CPU = user+sys of the process and every process
    under it (the Spark JVM, its Python workers), sampled from /proc every ``interval`` s (a process living
    less than that may be missed); the last sample of each process counts. Fails the benchmark on a failed run."""
    import subprocess

    def sample(root: int, seen: dict) -> None:
        parent, cpu = proc_table(2)             # utime + stime
        for pid, c in cpu.items():
            q = pid
            while q not in (0, 1, root) and q in parent:
                q = parent[q]
            if q == root:
                seen[pid] = max(seen.get(pid, 0.0), c)

    seen: dict = {}
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "mqtool", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         cwd=str(Path(__file__).resolve().parent.parent))
    while p.poll() is None:
        sample(p.pid, seen)
        time.sleep(interval)
    wall = time.perf_counter() - t
    err = p.stderr.read().decode("utf-8", "replace")
    if p.returncode not in ok:
        raise RuntimeError(f"mqtool {' '.join(args)}: exit {p.returncode}: {err[-2000:]}")
    return wall, sum(seen.values())


SIZES = {"rocketmq": (64, 256), "kafka": (128, 256), "litemq": (64, 256)}
LARGE_SIZES = {"rocketmq": (256, 1024), "kafka": (256, 1024), "litemq": (64, 256)}


def family_stores(base: Path, sizes: dict | None = None) -> dict[str, tuple[tuple[str, int], tuple[str, int]]]:
    """The inputs of :func:`export_families`: per family (small, big) as (store, data bytes) of the sizes
    ``sizes`` (MiB; default :data:`SIZES`), from bench/run.py's cache for RocketMQ and Kafka (built there when
    missing) and LiteMQ stores built here (bench/build_litemq.py, cached next to them)."""
    import json
    import subprocess

    import run as R

    sizes = sizes or SIZES
    out = {}
    for fam in ("rocketmq", "kafka"):
        pair = []
        for mib in sizes[fam]:
            store, info, _ = R.ensure_store(fam, base, mib, False)
            pair.append((store, info["data_bytes"]))
        out[fam] = tuple(pair)
    pair = []
    for mib in sizes["litemq"]:
        d = base / f"litemq-{mib}mb-v1"
        info = d / "bench.json"
        if not info.exists():
            shutil.rmtree(d, ignore_errors=True)
            n = subprocess.run([sys.executable, str(Path(__file__).parent / "build_litemq.py"), str(d), str(mib)],
                               check=True, capture_output=True, text=True).stdout.strip()
            info.write_text(json.dumps({"messages": int(n), "data_bytes": mib << 20}))
        pair.append((str(d / "store"), json.loads(info.read_text())["data_bytes"]))
    out["litemq"] = tuple(pair)
    return out


def export_families(base: Path, master: str = "local[2]", jobs: int = 2, families=None, sizes=None) -> dict:
    """``mqtool export`` of a small and a big store of each family, embedded (``--jobs``) and ``--engine spark
    --master MASTER``, once each as a user runs it: wall and CPU (all processes) per run; per family and engine
    a line through the two points gives the fixed cost and the cost per GiB (wall and CPU)."""
    res: dict = {"master": master, "jobs": jobs, "families": {}}
    out = Path(tempfile.mkdtemp(prefix="mqtool-bench-export-", dir=str(base)))
    try:
        for fam, pair in family_stores(base, sizes).items():
            if families and fam not in families:
                continue
            r = res["families"][fam] = {"sizes": {}}
            for name, (store, nbytes) in zip(("small", "big"), pair):
                r["sizes"][name] = nbytes
                for engine, extra in (("embedded", ["--jobs", str(jobs)]),
                                      ("spark", ["--engine", "spark", "--master", master])):
                    dst = out / f"{fam}-{name}-{engine}"
                    print(f"  export {fam} {name} {engine} ...", file=sys.stderr)
                    r[f"{engine}_{name}"] = tree_run(["export", store, "--to", str(dst), *extra])
                    shutil.rmtree(dst, ignore_errors=True)
            _two_point_line(r)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return res


def _two_point_line(r: dict) -> None:
    """Per GiB and fixed cost, wall and CPU, of each engine from its small and big (wall, cpu) points: the
    line through the two."""
    gib = {k: v / (1 << 30) for k, v in r["sizes"].items()}
    for engine in ("embedded", "spark"):
        for i, what in enumerate(("wall", "cpu")):
            ts, tb = r[f"{engine}_small"][i], r[f"{engine}_big"][i]
            per = (tb - ts) / (gib["big"] - gib["small"])
            r[f"{engine}_{what}_per_gib"] = per
            r[f"{engine}_{what}_fixed"] = ts - per * gib["small"]


def cpu_now() -> float:
    """CPU seconds (user+sys) used so far by this process and everything under it: itself and the children it
    reaped (``getrusage``), plus each live descendant with the children it reaped (/proc: utime, stime, cutime,
    cstime). A difference of two readings counts every process that ran in between (a Spark JVM and its
    Python workers, a process pool and its forkserver), provided whoever reaps a process is one of them."""
    import resource

    parent, cpu = proc_table(4)                 # utime, stime, cutime, cstime
    me = os.getpid()
    total = 0.0
    for pid, c in cpu.items():
        q = parent.get(pid)
        while q not in (None, 0, 1, me):
            q = parent.get(q)
        if q == me:
            total += c
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def export_warm(base: Path, master: str = "local[2]", jobs: int = 2, families=None, sizes=None,
                repeat: int = 2) -> dict:
    """The export of :func:`export_families` without the CLI's and the JVM's start: in this process,
    ``mqtool.export.export_local(jobs=JOBS)`` and ``export_spark`` on one started ``MASTER`` session, the
    engines alternated, ``repeat`` runs each (median); wall and CPU (:func:`cpu_now`) per run."""
    from mqtool.export import export_local, export_spark
    from mqtool.spark.session import get_session

    spark = get_session(master)
    res: dict = {"master": master, "jobs": jobs, "families": {}, "repeat": repeat}
    out = Path(tempfile.mkdtemp(prefix="mqtool-bench-export-", dir=str(base)))
    stores = family_stores(base, sizes)
    try:
        small = str(Path(__file__).resolve().parent.parent / "fixtures" / "rocketmq" / "store")
        export_spark([small], out / "warm", spark=spark, force=True)        # Python workers started
        shutil.rmtree(out / "warm", ignore_errors=True)
        for fam, pair in stores.items():
            if families and fam not in families:
                continue
            r = res["families"][fam] = {"sizes": {}}
            for name, (store, nbytes) in zip(("small", "big"), pair):
                r["sizes"][name] = nbytes
                runs: dict = {"embedded": [], "spark": []}
                for i in range(repeat):
                    for engine in (("embedded", "spark") if i % 2 == 0 else ("spark", "embedded")):
                        dst = out / f"{fam}-{name}-{engine}"
                        print(f"  export {fam} {name} {engine} (warm) ...", file=sys.stderr)
                        c, t = cpu_now(), time.perf_counter()
                        if engine == "embedded":
                            export_local([store], dst, jobs=jobs)
                        else:
                            export_spark([store], dst, spark=spark)
                        runs[engine].append((time.perf_counter() - t, cpu_now() - c))
                        shutil.rmtree(dst, ignore_errors=True)
                for engine, rs in runs.items():
                    r[f"{engine}_{name}"] = (statistics.median(x[0] for x in rs), statistics.median(x[1] for x in rs))
            _two_point_line(r)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return res


TINY = {"rocketmq": "fixtures/rocketmq/store", "kafka": "fixtures/kafka/logdir", "litemq": "fixtures/litemq/store"}


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line through ``(GiB, seconds)`` points: (seconds at 0 bytes, seconds per GiB)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


def cli_families(base: Path, verb: str = "export", master: str = "local[2]", jobs: int = 2, families=None,
                 sizes=None, repeat: int = 3) -> dict:
    """``mqtool export`` (or ``verify store``) as a user runs it, one process per run (the interpreter and,
    for Spark, the JVM, the SparkContext and the Python workers), embedded ``--jobs JOBS`` vs ``--engine spark
    --master MASTER``, at three sizes per family: the tiny fixture store (the fixed cost, measured rather than
    extrapolated), a small and a big store; each point ``repeat`` times with the engines alternated, the
    median kept (wall, and CPU of every process of the run). Per GiB is the slope of the least-squares line
    through the three medians; the one-minute load average is recorded at every run."""
    root = Path(__file__).resolve().parent.parent
    res: dict = {"verb": verb, "master": master, "jobs": jobs, "repeat": repeat, "families": {}}
    out = Path(tempfile.mkdtemp(prefix="mqtool-bench-cli-", dir=str(base)))
    stores = family_stores(base, sizes) if sizes is None or all(f in sizes for f in ("rocketmq", "kafka", "litemq")) \
        else _some_family_stores(base, sizes)
    try:
        for fam, pair in stores.items():
            if families and fam not in families:
                continue
            tiny = str(root / TINY[fam])
            points = [("tiny", tiny, _tree_bytes(Path(tiny)))] + [(n, st, b) for n, (st, b) in zip(("small", "big"), pair)]
            r = res["families"][fam] = {"sizes": {}, "load": []}
            for name, store, nbytes in points:
                r["sizes"][name] = nbytes
                runs: dict = {"embedded": [], "spark": []}
                for i in range(repeat):
                    for engine in (("embedded", "spark") if i % 2 == 0 else ("spark", "embedded")):
                        extra = ["--jobs", str(jobs)] if engine == "embedded" else ["--engine", "spark", "--master", master]
                        dst = out / f"{fam}-{name}-{engine}"
                        args = (["export", store, "--to", str(dst)] if verb == "export"
                                else ["verify", "store", store, "--json"])
                        r["load"].append(os.getloadavg()[0])
                        print(f"  {verb} {fam} {name} {engine} #{i + 1} (load {r['load'][-1]:.1f}) ...", file=sys.stderr)
                        runs[engine].append(tree_run(args + extra, ok=(0, 1) if verb == "verify" else (0,)))
                        shutil.rmtree(dst, ignore_errors=True)
                for engine, rs in runs.items():
                    r[f"{engine}_{name}"] = (statistics.median(x[0] for x in rs), statistics.median(x[1] for x in rs))
                    r[f"{engine}_{name}_runs"] = rs
            for engine in ("embedded", "spark"):
                for i, what in enumerate(("wall", "cpu")):
                    pts = [(r["sizes"][n] / (1 << 30), r[f"{engine}_{n}"][i]) for n, _, _ in points]
                    icept, slope = _fit(pts)
                    r[f"{engine}_{what}_per_gib"] = slope
                    r[f"{engine}_{what}_fixed"] = r[f"{engine}_tiny"][i]
                    r[f"{engine}_{what}_intercept"] = icept
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return res


def _some_family_stores(base: Path, sizes: dict) -> dict:
    """:func:`family_stores` for the families named in ``sizes`` only (no input built for the others)."""
    import run as R

    out = {}
    for fam, mibs in sizes.items():
        if fam == "litemq":
            out.update({k: v for k, v in family_stores(base, dict(SIZES, litemq=mibs)).items() if k == "litemq"})
            continue
        pair = []
        for mib in mibs:
            store, info, _ = R.ensure_store(fam, base, mib, False)
            pair.append((store, info["data_bytes"]))
        out[fam] = tuple(pair)
    return out


def cli_report(res: dict) -> str:
    lines = [f"{res['verb']}: embedded --jobs {res['jobs']} vs --engine spark --master {res['master']}, one CLI "
             f"process per run, median of {res['repeat']} (engines alternated); CPU = user+sys of every process "
             "(sampled from /proc every 0.1 s); fixed = the tiny fixture store, per GiB = slope of the "
             "least-squares line through tiny, small and big",
             f"{'family':9s} {'engine':9s} {'tiny s (cpu)':>15s} {'small s (cpu)':>15s} {'big s (cpu)':>15s} "
             f"{'s/GiB (cpu)':>15s} {'intercept s':>11s}"]
    cell = lambda a, b: f"{a:7.2f} ({b:5.2f})"  # noqa: E731
    for fam, r in res["families"].items():
        for engine in ("embedded", "spark"):
            lines.append(f"{fam:9s} {engine:9s} {cell(*r[engine + '_tiny']):>15s} {cell(*r[engine + '_small']):>15s} "
                         f"{cell(*r[engine + '_big']):>15s} "
                         f"{cell(r[engine + '_wall_per_gib'], r[engine + '_cpu_per_gib']):>15s} "
                         f"{r[engine + '_wall_intercept']:11.2f}")
        w = r["embedded_wall_per_gib"] / r["spark_wall_per_gib"] if r["spark_wall_per_gib"] > 0 else float("inf")
        c = r["embedded_cpu_per_gib"] / r["spark_cpu_per_gib"] if r["spark_cpu_per_gib"] > 0 else float("inf")
        spread = max(max(x[0] for x in r[f"spark_{n}_runs"]) - min(x[0] for x in r[f"spark_{n}_runs"])
                     for n in ("tiny", "small", "big"))
        lines.append(f"{fam:9s} spark vs embedded per GiB once the fixed cost is paid: wall {w:.2f}x, CPU {c:.2f}x "
                     f"(goal >= 0.8x); sizes {r['sizes']['small'] / 2**20:.0f} and {r['sizes']['big'] / 2**20:.0f} MiB; "
                     f"load average {min(r['load']):.1f}-{max(r['load']):.1f}; widest spread of one spark point "
                     f"{spread:.1f} s")
    return "\n".join(lines)


STARTUP = r"""
import sys, time
t0 = time.perf_counter()
def mark(what, t=[t0]):
    now = time.perf_counter(); print(f"PHASE {what} {now - t[0]:.3f}", flush=True); t[0] = now
from mqtool.spark import session as S
S.require_java(); S._quiet_driver_log()
if sys.argv[2] == "c1":
    S._quick_jit()
from pyspark import SparkContext
SparkContext._ensure_initialized(); mark("jvm")
sc = S.get_context(sys.argv[1]); mark("context")
sc.parallelize(range(4), 2).count(); mark("first_job")
sc.parallelize(range(4), 2).count(); mark("second_job")
spark = S.get_session(); mark("session_and_source")
sc.stop()
"""


def startup_phases(master: str = "local[2]", repeat: int = 3) -> dict:
    """Where a cold ``--engine spark`` run's fixed cost goes, median of ``repeat`` fresh processes: the JVM
    (pyspark's gateway: spark-submit, the launcher, the driver JVM), the SparkContext, the first job (Python
    workers started), a second job, and what a SparkSession with the data source registered would add (the
    CLI's export and verify no longer create them); each with the driver JVM on C1 only (``c1``, what
    export and verify start) and with HotSpot's default tiered JIT (``c2``), alternated."""
    import subprocess

    runs: dict = {}
    loads = []
    for i in range(repeat):
        for jit in (("c1", "c2") if i % 2 == 0 else ("c2", "c1")):
            loads.append(os.getloadavg()[0])
            p = subprocess.run([sys.executable, "-c", STARTUP, master, jit], capture_output=True, text=True,
                               cwd=str(Path(__file__).resolve().parent.parent))
            for line in p.stdout.splitlines():
                if line.startswith("PHASE "):
                    _, what, secs = line.split()
                    runs.setdefault(f"{what} ({jit})", []).append(float(secs))
            if p.returncode:
                raise RuntimeError(p.stderr[-2000:])
    return {"master": master, "repeat": repeat, "load": loads,
            "phases": {k: statistics.median(v) for k, v in runs.items()}, "runs": runs}


def startup_report(res: dict) -> str:
    lines = [f"cold start of --engine spark --master {res['master']}: median of {res['repeat']} fresh processes "
             f"per JIT setting, load average {min(res['load']):.1f}-{max(res['load']):.1f}"]
    for jit in ("c1", "c2"):
        total = 0.0
        for k, v in res["phases"].items():
            if k.endswith(f"({jit})"):
                total += v if not k.startswith(("second_job", "session")) else 0
                lines.append(f"  {k:25s} {v:6.2f} s   (runs: {', '.join(f'{x:.2f}' for x in res['runs'][k])})")
        lines.append(f"  {'jvm+context+first job':25s} {total:6.2f} s  ({jit})")
    return "\n".join(lines)


def export_families_report(res: dict) -> str:
    how = (f"in-process on a started session, median of {res['repeat']}" if "repeat" in res else
           "one CLI run each, CPU sampled from /proc every 0.1 s")
    lines = [f"export: embedded --jobs {res['jobs']} vs --engine spark --master {res['master']} "
             f"({how}; CPU = user+sys of every process of the run; load average "
             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})",
             f"{'family':9s} {'engine':9s} {'small s (cpu)':>15s} {'big s (cpu)':>15s} {'fixed s (cpu)':>15s} "
             f"{'s/GiB (cpu)':>15s}"]
    for fam, r in res["families"].items():
        for engine in ("embedded", "spark"):
            cell = lambda a, b: f"{a:7.1f} ({b:5.1f})"  # noqa: E731
            lines.append(f"{fam:9s} {engine:9s} {cell(*r[engine + '_small']):>15s} {cell(*r[engine + '_big']):>15s} "
                         f"{cell(r[engine + '_wall_fixed'], r[engine + '_cpu_fixed']):>15s} "
                         f"{cell(r[engine + '_wall_per_gib'], r[engine + '_cpu_per_gib']):>15s}")
        w = r["embedded_wall_per_gib"] / r["spark_wall_per_gib"] if r["spark_wall_per_gib"] > 0 else float("inf")
        c = r["embedded_cpu_per_gib"] / r["spark_cpu_per_gib"] if r["spark_cpu_per_gib"] > 0 else float("inf")
        lines.append(f"{fam:9s} spark vs embedded per GiB once the fixed cost is paid: wall {w:.2f}x, CPU {c:.2f}x "
                     f"(goal >= 0.8x); sizes {r['sizes']['small'] / 2**20:.0f} and {r['sizes']['big'] / 2**20:.0f} MiB")
    return "\n".join(lines)


def pruning_rows(store: str, master: str = "local[2]", repeat: int = 3) -> dict:
    """One topic's rows on a warm session, four ways: the SQL filter (``.select("topic").where(...)``, pushed
    down), the reader option (``.option("topic", ...)``, every column converted), and each with the pruned
    schema (``.schema("topic string")``); the best of ``repeat`` runs each."""
    from mqtool.spark.session import get_session

    spark = get_session(master)
    topic = "Topic3"
    rd = lambda: spark.read.format("mqtool").option("format", "rocketmq")  # noqa: E731
    ways = {
        "sql filter: .select(topic).where(topic = x)": lambda: rd().load(store).select("topic")
        .where(f"topic = '{topic}'").collect(),
        "reader option: .option(topic, x).select(topic)": lambda: rd().option("topic", topic).load(store)
        .select("topic").collect(),
        "pruned schema + sql filter": lambda: rd().schema("topic string").load(store)
        .where(f"topic = '{topic}'").collect(),
        "pruned schema + reader option": lambda: rd().schema("topic string").option("topic", topic).load(store)
        .collect(),
    }
    rd().load(store).limit(1).collect()         # Python workers warm
    res = {"bytes": sum(os.path.getsize(p) for p in Path(store, "commitlog").iterdir()), "ways": {}}
    n = None
    for name, fn in ways.items():
        secs, rows = _timed(fn, repeat)
        assert n is None or len(rows) == n, (name, len(rows), n)
        n = len(rows)
        res["ways"][name] = secs
    res["rows"] = n
    return res


def pruning_report(res: dict) -> str:
    ways = res["ways"]
    opt = ways["reader option: .option(topic, x).select(topic)"]
    lines = [f"one topic of {res['bytes'] / 1e6:.0f} MB ({res['rows']} rows), warm session, best of 3",
             f"{'way':48s} {'seconds':>8s} {'vs reader option':>17s}"]
    for name, secs in ways.items():
        lines.append(f"{name:48s} {secs:8.2f} {secs / opt:16.2f}x")
    return "\n".join(lines)


def export_report(res: dict) -> str:
    gib = {k: v / (1 << 30) for k, v in res["sizes"].items()}
    lines = [f"export: embedded --jobs {res['jobs'] or 'all cores'} vs --engine spark --master {res['master']}",
             f"{'engine':10s} {'small s':>9s} {'big s':>9s} {'fixed s':>9s} {'s per GiB':>10s} {'MB/s big':>9s}",
             f"(small {gib['small']:.2f} GiB, big {gib['big']:.2f} GiB; one run each, CLI wall time)"]
    for engine in ("embedded", "spark"):
        lines.insert(-1, f"{engine:10s} {res[engine + '_small_s']:9.1f} {res[engine + '_big_s']:9.1f} "
                         f"{res[engine + '_fixed_s']:9.1f} {res[engine + '_per_gib_s']:10.1f} "
                         f"{res['sizes']['big'] / 1e6 / res[engine + '_big_s']:9.0f}")
    lines.append(f"spark vs embedded, per GiB once the fixed cost is paid: "
                 f"{res['embedded_per_gib_s'] / res['spark_per_gib_s']:.2f}x (goal >= 0.8x); "
                 f"whole big run: {res['embedded_big_s'] / res['spark_big_s']:.2f}x")
    return "\n".join(lines)


def report(res: dict) -> str:
    mb = res["bytes"] / 1e6
    msgs = res["messages"]
    base = res["embedded_rows_1_s"]
    lines = [f"input: {mb:.0f} MB, {msgs} messages; jobs={res['jobs']}; spark master {res['master']}",
             f"{'operation':42s} {'seconds':>8s} {'MB/s':>9s} {'msgs/s':>11s} {'vs embedded 1 job':>18s}"]

    def row(name, secs, count=True):
        lines.append(f"{name:42s} {secs:8.2f} {mb / secs:9.0f} {(msgs / secs if count else 0):11.0f} "
                     f"{base / secs:17.2f}x")

    row("raw read (page cache)", res["raw_read_s"], count=False)
    row("embedded: dump to NDJSON lines, 1 job", res["embedded_rows_1_s"])
    row(f"embedded: dump to NDJSON lines, {res['jobs']} jobs", res["embedded_rows_all_s"])
    row("embedded: verify commitlog (CRC), 1 job", res["embedded_verify_1_s"])
    row(f"embedded: verify commitlog (CRC), {res['jobs']} jobs", res["embedded_verify_all_s"])
    row(f"spark {res['master']}: count()", res["spark_count_s"])
    row(f"spark {res['master']}: decode every column", res["spark_full_s"])
    lines.append(f"spark: session start {res['spark_start_s']:.1f} s, first query {res['spark_first_query_s']:.1f} s, "
                 f"fixed cost per small query on a warm session {res['spark_query_fixed_s']:.2f} s (target <= 0.3 s)")
    lines.append(f"spark decode vs embedded 1 job: {res['embedded_rows_1_s'] / res['spark_full_s']:.2f}x "
                 "(target >= 0.9x)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="an existing RocketMQ store (default: build one)")
    ap.add_argument("--size-mib", type=int, default=1024, help="size of the built commitlog (MiB)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--jobs", type=int, default=0, help="embedded jobs for the 'all jobs' rows (0 = cores)")
    ap.add_argument("--split-size", type=int, default=None, help="byte-range size (default automatic)")
    ap.add_argument("--keep", action="store_true", help="keep the built store")
    ap.add_argument("--export", action="store_true",
                    help="instead: export rows (embedded vs spark) at --small-mib and --size-mib, fixed cost and per GiB")
    ap.add_argument("--small-mib", type=int, default=128, help="size of the small store of --export (MiB)")
    ap.add_argument("--pruning", action="store_true",
                    help="instead: one topic by SQL filter vs reader option vs pruned schema (--size-mib store)")
    ap.add_argument("--export-families", action="store_true",
                    help="instead: export of RocketMQ, Kafka and LiteMQ stores (small and 256 MiB, cached in "
                         "--bench-dir), embedded --jobs 2 vs spark: fixed cost and per GiB, wall and CPU")
    ap.add_argument("--large", action="store_true",
                    help="with --export-families: RocketMQ and Kafka at 256 MiB and 1 GiB (LiteMQ 64/256 MiB)")
    ap.add_argument("--warm", action="store_true",
                    help="with --export-families: in this process on a started session (no CLI/JVM start)")
    ap.add_argument("--bench-dir", default=os.environ.get("MQTOOL_BENCH_DIR",
                                                          str(Path(tempfile.gettempdir()) / "mqtool-bench")))
    ap.add_argument("--families", default=None, help="with --export-families / --cli: a comma-separated subset")
    ap.add_argument("--cli", choices=["export", "verify"],
                    help="instead: cold CLI runs of this verb, embedded --jobs 2 vs spark, at the tiny fixture "
                         "store and two sizes per family (--sizes), --repeat runs each: fixed cost and per GiB")
    ap.add_argument("--sizes", default=None,
                    help="with --cli: SMALL,BIG in MiB for every chosen family (default: --large's or the small set)")
    ap.add_argument("--repeat", type=int, default=3, help="with --cli / --startup: runs per point (median)")
    ap.add_argument("--startup", action="store_true",
                    help="instead: the phases of a cold Spark start (JVM, context, first job, session)")
    a = ap.parse_args(argv)
    if a.startup:
        print(startup_report(startup_phases(a.master, a.repeat)))
        return 0
    if a.cli:
        fams = a.families.split(",") if a.families else None
        if a.sizes:
            mibs = tuple(int(x) for x in a.sizes.split(","))
            sizes = {f: mibs for f in (fams or ("rocketmq", "kafka", "litemq"))}
        else:
            sizes = LARGE_SIZES if a.large else None
        print(cli_report(cli_families(Path(a.bench_dir), a.cli, a.master, a.jobs or 2, fams, sizes, a.repeat)))
        return 0
    if a.export_families:
        run_fn = export_warm if a.warm else export_families
        print(export_families_report(run_fn(Path(a.bench_dir), a.master, a.jobs or 2,
                                            a.families.split(",") if a.families else None,
                                            LARGE_SIZES if a.large else None)))
        return 0
    if a.pruning:
        tmp = tempfile.mkdtemp(prefix="mqtool-spark-bench-")
        try:
            st = a.store or str(Path(tmp) / "store")
            if not a.store:
                build_commitlog(Path(st), a.size_mib << 20)
            print(pruning_report(pruning_rows(st, a.master)))
        finally:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    if a.export:
        tmp = tempfile.mkdtemp(prefix="mqtool-spark-bench-")
        try:
            stores = []
            for mib in (a.small_mib, a.size_mib):
                st = Path(tmp) / f"s{mib}" / "store"
                t = time.perf_counter()
                n = build_commitlog(st, mib << 20)
                print(f"built {st}: {n} messages in {time.perf_counter() - t:.1f} s", file=sys.stderr)
                stores.append(str(st))
            print(export_report(export_rows(stores[0], stores[1], a.master, a.jobs)))
        finally:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    tmp = None
    store = a.store
    if store is None:
        tmp = tempfile.mkdtemp(prefix="mqtool-spark-bench-")
        store = str(Path(tmp) / "store")
        t = time.perf_counter()
        n = build_commitlog(Path(store), a.size_mib << 20)
        print(f"built {store}: {n} messages in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    try:
        print(report(run(store, a.master, a.jobs, split_size=a.split_size)))
    finally:
        if tmp and not a.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
