"""LiteMQ part of ``mqtool info``: one commitlog walk plus the small files, fed into an InfoBuilder.

What it reports and where it comes from (docs/litemq.md, ../shared/reference/litemq.md):

* messages per topic/queue (the record's QueueID), first/last StoreTimestamp, record bytes incl. the 4-byte
  prefix — the same :func:`mqtool.litemq.scan.walk` verify uses. Records carved *after* a damaged end of
  data that are newer than the live data (``after-gap``) are data LiteMQ cannot reach: they are counted as
  messages (and the damage before them is placed in time between its neighbours). ``stale`` records (an
  older run, overwritten from offset 0 after a restart) are only counted in the overview;
* damaged ranges — what verify reports damaged, from the same findings: the walk's damage events made
  findings by :func:`~mqtool.litemq.scan.damage_finding` and the record checks, each by its span (the live
  chain ends at a bad length/magic, zeroed bytes, missing files, records whose fields contradict themselves),
  counted as verify counts them (non-zero leftovers after the end, ``unaccounted-bytes``, are no damage there
  either: a restart's remnants);
* queue ends — the number of live entries in each consumequeue (entry index = logical queue offset);
* consumer offsets — the checkpoint's consumer section (``checkpoint/checkpoint``, written only by a clean
  shutdown's forced flush);
* crash marker — ``abort/abort`` present = the last run did not reach ``Broker.Shutdown``;
* "version" hints — LiteMQ has no format versions: the record/checkpoint/index magics, file naming
  (``%020d`` file index, or the ``.log`` names LiteMQ's document describes), preallocated file sizes.
"""
from __future__ import annotations

from collections import Counter

from formats import litemq as F
from mqtool.common import plural
from mqtool.damage import Damage
from mqtool.findings import Finding
from mqtool.info import InfoBuilder, total_size
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.history import LiveLog
from mqtool.litemq.store import Store, commitlog_segments, nominal_file_size, resolve
from mqtool.litemq.records import LiteRecord
from mqtool.litemq.scan import WalkResult, damage_finding, walk
from mqtool.options import InfoOptions
from mqtool.progress import progress

_KINDS = {
    "root": "LiteMQ data directory", "commitlog": "LiteMQ commitlog directory", "segment": "LiteMQ commitlog file",
    "consumequeue": "LiteMQ consumequeue directory", "cq_topic": "LiteMQ consumequeue topic directory",
    "cq_queue": "LiteMQ consumequeue queue directory", "cq_file": "LiteMQ consumequeue file",
    "checkpoint": "LiteMQ checkpoint file", "abort": "LiteMQ abort file", "index_dir": "LiteMQ index directory",
    "index_file": "LiteMQ index file",
}
# walk() findings that are summaries or facts about whole files, not a damaged byte range
_NOT_RANGES = {"data-after-gap", "segment-missing"}


def collect(path, b: InfoBuilder, opts: InfoOptions) -> None:
    store = resolve(path)
    b.store_kind = _KINDS.get(store.kind, "LiteMQ store part")
    b.hint("LiteMQ (no format versions): record magic 4C4D5101, checkpoint 4C4D5103, index 4C4D5104 "
           "(the format of toby-yogurt/litemq as of commit 535b5f77)")
    if store.kind in ("root", "commitlog", "segment"):
        _commitlog(store, b, opts)
    else:
        b.note(f"the commitlog was not read (only a {b.store_kind[7:]} was named): run `mqtool info` on "
               f"{store.root or 'the data directory'} for messages and times")
    q_ends = _consumequeue(store, b, opts)
    if store.root is not None or store.kind == "checkpoint":
        _checkpoint(store, b, q_ends)
    _crash(store, b)
    _index(store, b)


def _commitlog(store: Store, b: InfoBuilder, opts: InfoOptions) -> None:
    segs, fs = commitlog_segments(store)
    if not segs:
        b.note("no commitlog files found")
        return
    named_log = sum(1 for s in segs if s.path.name.endswith(".log"))
    if named_log:
        b.hint(f"commitlog files named '<20 digits>.log' ({named_log}): the naming of LiteMQ's document, not of "
               "its code (which writes no extension)")
    else:
        b.hint("commitlog files named by file index (%020d, no extension), as LiteMQ's code writes them")
    if fs == F.DEFAULT_COMMITLOG_FILE_SIZE:
        b.hint(f"commitlog files preallocated to {fs} bytes: LiteMQ's default CommitLog.FileSize (1 GiB)")
    else:
        b.hint(f"commitlog files preallocated to {fs} bytes (configured CommitLog.FileSize; the default is 1 GiB)")
    for s in segs:
        b.add_log_file(store.display(s.path), s.base, s.size)
    res = WalkResult()
    types: Counter = Counter()
    stale = 0
    after_gap = 0
    total = sum(s.size for s in segs)
    done_files = set()
    from mqtool.litemq.verify import record_findings

    # walk() yields the records carved after the end of the live data *before* the finding that ends it;
    # the builder wants log order, so what follows the end of live data is sorted by position per file.
    pending: list = []
    pending_file = None

    def take(rec: LiteRecord):
        nonlocal stale, after_gap
        if rec.state == "stale":
            stale += 1
            return
        m = rec.m
        if rec.state == "after-gap":
            after_gap += 1
        b.add_message(m["Topic"], m["QueueID"], m["StoreTimestamp"], rec.size)
        types[F.MESSAGE_TYPES.get(m["MessageType"], f"unknown({m['MessageType']})")] += 1
        for f in record_findings(rec, opts.max_message_size):
            if f.span is not None:
                b.add_damage(f.file, f.position, f.span[0], f.span[1] - f.span[0], f.code, f.message,
                             at_time=m["StoreTimestamp"])

    def handle(item):
        if isinstance(item, Finding):
            _finding(b, item)
        else:
            take(item)

    def flush():
        pending.sort(key=lambda it: (it[0], it[1]))
        for _, _, it in pending:
            handle(it)
        pending.clear()

    with progress(total, "info: scanning commitlog", enabled=opts.progress) as bar:
        gaps: dict = {}        # file after missing ones -> finding; placed in time when that file is reached
        for item in walk(store, carve_stale=True, result=res):
            if isinstance(item, Damage):
                item = damage_finding(item)
            if isinstance(item, Finding) and item.code == "segment-missing" and item.file is not None:
                gaps[item.file] = item
                continue
            live = not isinstance(item, Finding) and item.state == "live"
            file = item.file
            if pending and (file != pending_file or live):
                flush()
            if file in gaps:
                _gap(b, gaps.pop(file))
            if live:
                take(item)
                if file not in done_files:
                    done_files.add(file)
                    bar.update_to(min(total, item.offset))
            elif file is None or item.position is None:
                handle(item)
            else:
                pending_file = file
                pending.append((item.position, 0 if isinstance(item, Finding) else 1, item))
        flush()
        for f in gaps.values():
            _gap(b, f)
        bar.update_to(total)
    detail = f"file size {fs}"
    if res.end_offset is not None:
        detail += f"; data ends at offset {res.end_offset} ({res.end_file}@{res.end_position})"
    sizes = {s.size for s in segs}
    if len(sizes) > 1:
        detail += f"; sizes {'/'.join(str(z) for z in sorted(sizes))}"
    b.add_files("commitlog", len(segs), total, detail)
    b.fact("commitlog", {"file_size": fs, "files": len(segs), "data_end": res.end_offset})
    if types:
        b.fact("message types", dict(sorted(types.items())))
    if stale or after_gap:
        b.fact("carved records", {"stale": stale, "after_gap": after_gap})
    if stale:
        b.note(f"{stale} stale record(s) of an older run survive after the end of data (LiteMQ rewrote the "
               "commitlog from offset 0 after a restart); they are not counted as messages — "
               "`mqtool dump commitlog --include-stale` shows them")
    if after_gap:
        b.note(f"{after_gap} record(s) newer than the live data lie after damage; LiteMQ cannot reach them, "
               "they are counted above")


def _finding(b: InfoBuilder, f: Finding) -> None:
    """A walk finding → a damaged range when it names damaged bytes."""
    if f.code == "store-time-regression":
        b.note(f"{f.file}@{f.position}: {f.message}")
        return
    if f.code == "file-unreadable" and f.span is None:     # a file named like a segment, never opened: no
        b.add_damage(f.file, None, None, 0, f.code, f.message)   # range to place, damage all the same
        return
    if f.code in _NOT_RANGES or f.span is None:
        return
    b.add_damage(f.file, f.position, f.span[0], f.span[1] - f.span[0], f.code, f.message)


def _gap(b: InfoBuilder, f: Finding) -> None:
    """Missing commitlog files (a gap in the file indexes): damage of their whole size (the finding's span),
    just before ``f.file`` (no position: the bytes are in no file there is)."""
    b.add_damage(f.file, None, f.span[0], f.span[1] - f.span[0], f.code, f.message)


def _consumequeue(store: Store, b: InfoBuilder, opts: InfoOptions) -> dict:
    """Queue ends {(topic, queue): live entries}; files row."""
    qs = CQ.queues(store)
    ends: dict = {}
    if not qs:
        return ends
    nfiles = 0
    nbytes = 0
    fsizes = set()
    live = LiveLog(store)
    stale = 0
    cq = CQ.cq_file_size(opts, store)
    for q in qs:
        nfiles += len(q.files)
        nbytes += sum(f.size for f in q.files)
        if q.files:
            fsizes.add(nominal_file_size(q.files))
        n = 0
        for item in CQ.read_queue(store, q, file_size=cq.value):
            if isinstance(item, Finding):
                continue
            if live.usable and live.judge(item)[0] is not None:
                stale += 1                  # an older run's entry: not part of the queue's live end
                continue
            n = max(n, item.index + 1)
        ends[(q.topic, q.queue_id)] = n
        b.set_queue_end(q.topic, q.queue_id, n)
    topics = {q.topic for q in qs}
    detail = f"{plural(len(topics), 'topic')}, {plural(len(qs), 'queue')}, {plural(sum(ends.values()), 'entry')}"
    if fsizes:
        detail += f"; file size {'/'.join(str(z) for z in sorted(fsizes))}"
    b.add_files("consumequeue", nfiles, nbytes, detail)
    b.size("consumequeue file size", cq.to_dict("bytes"), f"{cq.value} bytes (from {cq.source}: {cq.evidence})",
           cq.warning)
    if stale:
        b.note(f"{stale} consumequeue entr{'y is' if stale == 1 else 'ies are'} an older run's (LiteMQ rewrote the "
               "queues from entry 0 after a restart; they match no live record and are not counted above): "
               "`mqtool dump consumequeue` marks them stale")
    if fsizes:
        fs = cq.value
        default = " (LiteMQ's code default)" if fs == F.DEFAULT_CQ_FILE_SIZE else \
            " (configs/broker.toml's value)" if fs == 600_000_000 else ""
        b.hint(f"consumequeue files preallocated to {fs} bytes{default}")
    return ends


def _checkpoint(store: Store, b: InfoBuilder, q_ends: dict) -> None:
    p = store.checkpoint_file
    if p is None or not p.is_file():
        if store.root is not None:
            abort = store.abort_file is not None and store.abort_file.is_file()
            b.note("no checkpoint file: LiteMQ writes it only in a clean shutdown's forced flush"
                   + (" (none after this crash)" if abort else "")
                   + ", so consumer offsets are unknown")
        return
    row, findings = CQ.read_checkpoint(p)
    name = store.display(p)
    b.add_files("checkpoint", 1, total_size([p]), f"version {row['version']}" if row else "unreadable")
    if row is None:
        for f in findings:
            b.note(f"{name}: {f.message}")
        return
    if row["version"] == 1:
        b.hint("checkpoint version 1")
    else:
        b.hint(f"checkpoint version {row['version']} (LiteMQ writes 1)")
    b.fact("checkpoint", {"lastFlushTimestamp": row["last_flush_time"], "lastUpdateTimestamp": row["last_update_time"],
                          "consumer_groups": row["consumer_groups"], "consumer_offsets": row["consumer_offset_triples"]})
    for group, topics in sorted(row["consumer_offsets"].items()):
        for topic, queues in sorted(topics.items()):
            for qid, off in sorted(queues.items()):
                b.add_consumer_offset(group, topic, qid, off, name)
    if row["trailing_bytes"]:
        b.note(f"{name}: {row['trailing_bytes']} byte(s) after the last parsable record")


def _crash(store: Store, b: InfoBuilder) -> None:
    ab = store.abort_file
    if store.root is None and store.kind != "abort":
        b.set_crash(None, "not a data directory: the abort marker cannot be checked")
        return
    if ab is not None and ab.is_file():
        row, _ = CQ.read_abort(ab)
        b.add_files("markers", 1, total_size([ab]), "abort/abort")
        started = row.get("start_time")
        if started:
            b.fact("abort", {"brokerStartTimestamp": started})
        b.set_crash(True, "abort file present: the last run did not reach Broker.Shutdown (crash, kill or still "
                    "running)", [store.display(ab)])
    else:
        b.set_crash(False, "no abort file: the last run reached Broker.Shutdown (which then hangs in "
                    "CommitLog.Close in the LiteMQ code read; data files are intact)", [])


def _index(store: Store, b: InfoBuilder) -> None:
    d = store.index_dir
    if store.kind == "index_file":
        files = [store.target]
    elif d is not None and d.is_dir():
        files = sorted(p for p in d.iterdir() if p.is_file())
    else:
        return
    if files:
        b.add_files("index", len(files), total_size(files), ", ".join(p.name for p in files[:4]))
    elif store.root is not None:
        b.add_files("index", 0, 0, "empty: LiteMQ builds its key index in memory and never flushes it")

