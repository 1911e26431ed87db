"""Rows for ``mqtool dump kafka``: batches (and records with --deep), index entries, snapshots, checkpoints.

Every row has ``kind`` (batch | record | damage | index_entry | time_index_entry | aborted_txn |
producer_snapshot | producer_entry | checkpoint_entry | leader_epoch | properties) and ``file``. The field
names are documented in docs/kafka.md.
"""
from __future__ import annotations

import operator
import re
from pathlib import Path

from formats import kafka as K
from mqtool.common import ENCODING_SUFFIX, encode_body, put_body
from mqtool.errors import InputError
from mqtool.io import map_input, open_salvage_file
from mqtool.kafka import indexfiles as F
from mqtool.kafka import store as L
from mqtool.codecs import CodecError
from mqtool.kafka import records as R
from mqtool.kafka.records import Batch, Record, iter_records
from mqtool.kafka.scan import Damage, batch_offsets, scan, scan_range
from mqtool.kafka.rows import FILE_TABLES, LOG_COLUMNS, NATIVE_RECORD_KEYS
from mqtool import ndjson
from mqtool.columns import Column, iso_ms
from mqtool.ndjson import CleanLines, PreRendered, PreRenderedLines, dumps


def _flags(r: dict) -> str:
    out = []
    if r.get("is_transactional"):
        out.append("txn")
    if r.get("is_control"):
        out.append("control")
    if r.get("delete_horizon_ms") is not None:
        out.append("deleteHorizon")
    if r.get("control_type"):
        out.append(str(r["control_type"]))
    return ",".join(out)


_FILE_COLUMNS = {
    **{kind: schema.columns(order) for kind, (schema, order) in FILE_TABLES.items()},
    "snapshot": [Column("kind", "Kind"), Column("producer_id", "PID", justify="right"),
                 Column("producer_epoch", "Epoch", justify="right"),
                 Column("last_sequence", "LastSeq", justify="right"), Column("last_offset", "LastOffset", justify="right"),
                 Column("timestamp", "Timestamp", justify="right"),
                 Column("current_txn_first_offset", "TxnFirst", justify="right"), Column("crc_ok", "CRC ok"),
                 Column("count", "N", justify="right")],
}
_GENERIC = [Column("kind", "Kind"), Column("file", "File", fmt=lambda v: Path(v).name if v else ""),
            Column("topic", "Topic"), Column("partition", "Partition", justify="right"),
            Column("epoch", "Epoch", justify="right"), Column("offset", "Offset", justify="right"),
            Column("properties", "Properties", max_width=80)]


def columns_for(kind: str | None):
    if kind in ("log", "kraft-snapshot", None):
        return LOG_COLUMNS
    return _FILE_COLUMNS.get(kind, _GENERIC)


# ---- log rows -----------------------------------------------------------------------------------

def batch_row(b: Batch) -> dict:
    r = b.to_row()
    r["flags"] = _flags(r)
    return r


def header_pairs(headers, mode: str) -> list:
    """A record's headers as Kafka keeps them: an ordered list of ``[key, value]`` (a key may repeat; value
    None for a null header value, else rendered by ``mode`` like a record value). With text that is not
    UTF-8 anywhere in them, see :func:`put_headers`."""
    return [[bytes(k).decode("utf-8", "replace"), encode_body(v, mode)] for k, v in headers]


def _is_text(b) -> bool:
    try:
        bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def put_headers(r: dict, headers, mode: str) -> None:
    """``headers`` (and ``header_keys``) into a row without losing a byte: when a key, or a value rendered as
    text, is not UTF-8, every key and value of that record is base64 and ``headers_encoding`` says so."""
    if all(_is_text(k) and (mode != "text" or v is None or _is_text(v)) for k, v in headers):
        r["headers"] = header_pairs(headers, mode)
        return
    r["headers"] = [[encode_body(k, "base64"), encode_body(v, "base64")] for k, v in headers]
    r["headers" + ENCODING_SUFFIX] = "base64"


def put_header_keys(r: dict, headers) -> None:
    if all(_is_text(k) for k, _ in headers):
        r["header_keys"] = [bytes(k).decode("utf-8") for k, _ in headers]
    else:
        r["header_keys"] = [encode_body(k, "base64") for k, _ in headers]
        r["header_keys" + ENCODING_SUFFIX] = "base64"


def record_row(b: Batch, rec, opts, decoder=None) -> dict:
    """A record's dump row: the keys of :data:`mqtool.kafka.rows.RECORD`, in its order."""
    print_data = bool(getattr(opts, "print_data", False))
    mode = getattr(opts, "body", "none") or "none"
    if print_data and mode == "none":
        mode = "text"
    r = {
        "kind": "record",
        "file": b.file,
        "position": b.position,
        "batch_offset": b.base_offset,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "timestamp_type": K.TIMESTAMP_TYPES.get(b.timestamp_type, str(b.timestamp_type)),
        "size": rec.size,
        "key_size": -1 if rec.key is None else len(rec.key),
        "value_size": -1 if rec.value is None else len(rec.value),
        "sequence": rec.sequence,
        "header_keys": None,
        "producer_id": b.producer_id,
        "is_transactional": b.is_transactional,
        "is_control": b.is_control,
        "crc_ok": rec.crc_ok if rec.crc_ok is not None else b.crc_ok,
    }
    put_header_keys(r, rec.headers)
    if rec.control_type is not None:
        r["control_type"] = R.control_type_name(rec.control_type)
        if rec.coordinator_epoch is not None:
            r["coordinator_epoch"] = rec.coordinator_epoch
    if print_data:
        put_body(r, "key", rec.key, mode)
        put_body(r, "value", rec.value, mode)
        put_headers(r, rec.headers, mode)
        if decoder is not None and not b.is_control:
            r["decoded"] = decoder(rec.key, rec.value)
    r["flags"] = _flags(r)
    return r


# The record-row keys the compiled walker sets per record (mqtool/_native/kafka.c, configure()), declared in
# mqtool/kafka/rows.py.
_NATIVE_ROW_KEYS = NATIVE_RECORD_KEYS
_native_state: dict[str, object] = {}


def _native_walker():
    """The compiled records-area walker configured with the row keys, or None (``R._load_native``: not built,
    switched off by ``MQTOOL_NATIVE``, or written for another record layout)."""
    nat = R._load_native()
    if nat is not None and _native_state.get("mod") is not nat:
        nat.configure(_NATIVE_ROW_KEYS)
        _native_state["mod"] = nat
    return nat


def _native_mode(opts, decoder) -> int | None:
    """Which row the compiled walker builds for these options: 0 (--deep), 1 (--print-data, text bodies),
    or None (hex/base64 bodies, an internal topic's decoder: the Python rows)."""
    if not getattr(opts, "print_data", False):
        return 0
    mode = getattr(opts, "body", "none") or "none"
    if mode not in ("none", "text") or decoder is not None:
        return None
    return 1


def native_lines(opts, decoder=None) -> bool:
    """Does ``dump kafka`` with these options write record lines with the compiled walker (NDJSON, records,
    no record filter, no --limit)? Then one process is faster than a pool that hands every line to the
    parent (``--jobs 0`` picks one process; ``--jobs N`` and ``--split-size`` still use the pool). Batch rows
    alone (no --deep) are one process with ``--jobs 0`` too (:func:`mqtool.kafka.ranges.parallel_dump_rows`)."""
    deep = bool(getattr(opts, "deep", False) or getattr(opts, "print_data", False))
    return (deep and _native_walker() is not None and _native_mode(opts, decoder) is not None
            and bool(getattr(opts, "ndjson", False)) and getattr(opts, "limit", None) is None
            and getattr(opts, "key", None) is None and getattr(opts, "from_offset", None) is None
            and getattr(opts, "to_offset", None) is None)


def _ts_base(b: Batch) -> tuple[int, int]:
    """(ts0, ts_k) of the compiled walker: a record's timestamp is ts0 + ts_k * timestampDelta (LogAppendTime:
    the batch's maxTimestamp for every record, as iter_records)."""
    return (b.max_timestamp, 0) if b.timestamp_type == 1 else (b.base_timestamp, 1)


def _native_record_rows(nat, b: Batch, opts, text: int):
    """The record rows of a plain v2 batch from the compiled walker, or None when it declines (damaged or
    unusual records area: the Python path gives the rows or the precise error). Raises CodecError."""
    data = R.small_records_area(b)
    if data is None:
        return None
    template = record_row(b, Record(b, 0, 0, None, None, (), 0, -1), opts)
    ts0, tsk = _ts_base(b)
    return nat.record_rows(data, b.count, b.base_offset, ts0, tsk, b.base_sequence, template, text,
                           R.limits()[1])


_PLACEHOLDERS = ["\x01mqtool-native-{}\x01".format(code) for code in range(len(_NATIVE_ROW_KEYS))]
_PLACEHOLDERS_JSON = [dumps(ph).encode("utf-8") for ph in _PLACEHOLDERS]     # "\u0001mqtool-native-0\u0001"


# the batch's own numbers in a template line, as placeholders too: the cut of a line is then the same for every
# batch of a file and producer (cached by BatchLines), and the walker writes these two per batch
_BATCH_INTS = ("position", "batch_offset")
_BATCH_PLACEHOLDERS = ["\x01mqtool-batch-{}\x01".format(k) for k in _BATCH_INTS]
_BATCH_PLACEHOLDERS_JSON = [dumps(ph).encode("utf-8") for ph in _BATCH_PLACEHOLDERS]
_N_KEYS = len(_NATIVE_ROW_KEYS)


def _json_pieces(b: Batch, opts):
    """(segs, order) of the record-line template of batch ``b``: the template row rendered exactly as
    ``render.write_ndjson`` renders rows (orjson), cut at placeholders for the fields the walker fills per record
    and for the batch's position and base offset (codes after the row keys: the walker takes their values per
    batch, so one cut serves every batch of a file and producer); None when that writer would not use orjson
    for the row (no orjson, or a file name it refuses) or a placeholder's text occurs elsewhere in it."""
    if not ndjson.CAN_PRERENDER_LINES:
        return None
    row = record_row(b, Record(b, 0, 0, None, None, (), 0, -1), opts)
    marks = {}
    for code, key in enumerate(_NATIVE_ROW_KEYS):
        if key in row:
            row[key] = _PLACEHOLDERS[code]
            marks[code] = _PLACEHOLDERS_JSON[code]
    for j, key in enumerate(_BATCH_INTS):
        if key not in row:
            return None
        row[key] = _BATCH_PLACEHOLDERS[j]
        marks[_N_KEYS + j] = _BATCH_PLACEHOLDERS_JSON[j]
    line = ndjson.encode_row_fast(row)
    if line is None or any(line.count(m) != 1 for m in marks.values()):
        return None
    return _cut(line, marks)


def _cut(line: bytes, marks: dict):
    """(segs, order): the template ``line`` cut at the placeholders ``marks`` (field code -> its JSON)."""
    found = sorted((line.find(m), code) for code, m in marks.items())
    segs, order, at = [], [], 0
    for pos, code in found:
        if pos < at:
            return None
        segs.append(line[at:pos])
        order.append(code)
        at = pos + len(marks[code])
    segs.append(line[at:])
    return tuple(segs), tuple(order)


def _native_record_json(nat, b: Batch, opts):
    """The NDJSON lines (one str, joined by newlines) of a plain v2 batch's records, or None (declined)."""
    if type(b.position) is not int or type(b.base_offset) is not int:
        return None
    pieces = _json_pieces(b, opts)
    if pieces is None:
        return None
    data = R.small_records_area(b)
    if data is None:
        return None
    ts0, tsk = _ts_base(b)
    return nat.record_json(data, b.count, b.base_offset, ts0, tsk, b.base_sequence, *pieces, R.limits()[1],
                           (b.position, b.base_offset))


# ---- a v2 batch's line and its records' lines as one block of NDJSON bytes (compiled walker) -----------------

# the Batch fields a record row's template depends on, but for position and base_offset (which the walker writes
# into each batch's lines): batches equal in these share one cut line (tests/test_kafka_deep_lines.py checks that
# record_row reads no other Batch field)
TEMPLATE_FIELDS = ("file", "timestamp_type", "producer_id", "is_transactional", "is_control", "crc_ok")
_template_key = operator.attrgetter(*TEMPLATE_FIELDS)


# ---- a v2 batch's own line from a template (bytes % its numbers) ---------------------------------------------

# what the non-number values of a batch row depend on (names, flags): batches equal in these fields, and in which
# of NULLABLE_NUMBERS are None, share one template line, into which their numbers are written per batch
# (tests/test_kafka_deep_lines.py: batch_row depends on nothing else)
HEAD_FIELDS = ("file", "magic", "codec", "timestamp_type", "is_transactional", "is_control", "crc_ok", "error")
NULLABLE_NUMBERS = ("base_offset", "count", "delete_horizon_ms")
_head_fields = operator.attrgetter(*HEAD_FIELDS)
_nullable = operator.attrgetter(*NULLABLE_NUMBERS)


_HEAD_MARK = "\x01mqtool-head-{}\x01"
_heads: dict = {}                   # {"attrs": _row_attributes()}, once


def _head_shape(b: Batch) -> tuple:
    return _head_fields(b), _nullable(b).count(None) and tuple(v is None for v in _nullable(b))


def _row_attributes() -> dict:
    """{batch row key: the Batch field or property its number is}, found by giving a probe batch a different
    number in every field and reading its row (``to_row`` stays the one place a batch row is written): a key whose
    number is no single field's (computed) is left out, and a template with such a key is not made."""
    fields = Batch.__dataclass_fields__
    names = [f for f in fields if f != "_buf"] + ["end", "last_sequence"]
    probe = Batch("probe", 0, 0, 2, 0, 0, 0, True, 0, 0, 0, 0)
    for k, name in enumerate(names):        # a bit of its own each: no sum of two is a third
        if name in fields and "int" in str(fields[name].type) and name not in ("magic", "codec", "attributes",
                                                                               "timestamp_type"):
            setattr(probe, name, 1 << (k + 8))
    probe.base_sequence, probe.last_offset_delta = 7_000_001, 9_000_011     # (last_sequence: their sum)
    values: dict = {}
    for name in names:
        v = getattr(probe, name)
        if type(v) is int:
            values.setdefault(v, []).append(name)
    return {key: values[v][0] for key, v in batch_row(probe).items()
            if type(v) is int and len(values.get(v, ())) == 1}


def _head_template(b: Batch):
    """(bytes template, attrgetter of its numbers, unmarked) of ``b``'s batch line as ``render.write_ndjson`` writes
    it (``template % getter(batch)``), or None (no orjson, a name it refuses, a number no field holds)."""
    if "attrs" not in _heads:
        _heads["attrs"] = _row_attributes()
    attrs = _heads["attrs"]
    row = batch_row(b)
    marks, names = {}, {}
    for key, v in row.items():
        if type(v) is int:
            if key not in attrs:
                return None
            code = len(marks)
            row[key] = _HEAD_MARK.format(code)
            marks[code] = dumps(row[key]).encode("utf-8")
            names[code] = attrs[key]
    line = ndjson.encode_row_fast(row)
    if line is None or any(line.count(m) != 1 for m in marks.values()):
        return None
    cut = _cut(line, marks)
    if cut is None:
        return None
    segs, order = cut
    template = b"%d".join(seg.replace(b"%", b"%%") for seg in segs) + b"\n"
    getter = operator.attrgetter(*(names[c] for c in order)) if len(order) > 1 else (
        lambda x, g=operator.attrgetter(names[order[0]]): (g(x),))
    if template % getter(b) != ndjson.encode_row_fast(batch_row(b)) + b"\n":
        return None
    return template, getter, all(_unmarked(seg) for seg in segs)


_MARKS = re.compile(b"|".join(re.escape(m) for m in ndjson.DAMAGED_MARKS))


def _unmarked(text: bytes) -> bool:
    return _MARKS.search(text) is None


class BatchLines:
    """``dump kafka --deep/--print-data --json`` with the compiled walker, for one log: ``block(batch)`` is the
    NDJSON bytes the writer would write for the batch's row and then its record rows, in one piece (one write,
    no str between): :class:`~mqtool.ndjson.CleanLines` when no line can carry a damage mark (the batch's CRC
    is valid, and neither its line nor the record template holds one: the walker's fields are numbers and
    escaped strings), else :class:`~mqtool.ndjson.PreRenderedLines`; or None (declined: not a plain v2 batch,
    damaged, too big, a name orjson refuses; the row by row path gives the rows or the precise error). Raises
    CodecError like :func:`small_records_area`."""

    def __init__(self, nat, opts):
        self.nat, self.opts = nat, opts
        self.cuts: dict = {}
        self.heads: dict = {}       # batch line templates by HEAD_FIELDS
        self.max_records, self.max_headers = R.limits()
        self.kinds = _area_kinds(nat)

    def block(self, b: Batch) -> bytes | None:
        job = self.prepare(b)
        return None if job is None else self.run(b, job)

    def prepare(self, b: Batch):
        """The Python part (the scanning thread): ((segs, order), the batch's own line, clean) or None
        (declined)."""
        if b.magic != 2 or b.is_control or type(b.position) is not int or type(b.base_offset) is not int:
            return None
        key = _template_key(b)
        cut = self.cuts.get(key, self.cuts)
        if cut is self.cuts:
            if len(self.cuts) >= 4096:
                self.cuts.clear()
            cut = _json_pieces(b, self.opts)
            cut = self.cuts[key] = None if cut is None else (cut, all(_unmarked(s) for s in cut[0]))
        if cut is None:
            return None
        shape = _head_shape(b)
        head = self.heads.get(shape, self.heads)
        if head is self.heads:
            if len(self.heads) >= 4096:
                self.heads.clear()
            head = self.heads[shape] = _head_template(b)
        if head is None:
            line = ndjson.encode_row_fast(batch_row(b))
            if line is None:
                return None
            return cut[0], line + b"\n", cut[1] and b.crc_ok is True and _unmarked(line)
        try:
            line = head[0] % head[1](b)
        except TypeError:               # a number that is not one (not met: a shape fixes which are null)
            return None
        return cut[0], line, cut[1] and b.crc_ok is True and head[2]

    def run(self, b: Batch, job) -> bytes | None:
        """The heavy part of one batch (see :meth:`run_group`)."""
        return self.run_group([(b, job)])[0]

    def run_group(self, group: list) -> list:
        """The blocks of consecutive prepared batches ``[(batch, job), ...]``, by one call of the helper that
        inflates (snappy, lz4, zstd), walks and writes without the GIL (any thread): per batch its block, or
        True when its lines are in the block of the batch before it (a run of batches is one block: one write),
        or None (declined or not decodable: the row-by-row path then gives its rows or reports it precisely)."""
        out: list = [None] * len(group)
        run: list = []              # (index, job) of consecutive batches the helper is given together
        # (a batch whose lines may carry a damage mark is a call of its own: the CLI notes such lines as it writes
        # them, and the notes keep the order of the row-by-row path)

        def flush():
            for (i, _j), blk in zip(run, self.nat.group_lines(tuple(j for _i, j in run), R.NATIVE_AREA_MAX,
                                                              self.max_headers)):
                out[i] = blk
            run.clear()

        for i, (b, job) in enumerate(group):
            try:
                j = self._job(b, job)
            except (CodecError, ValueError, IndexError):
                j = None
            if j is not None and j[-1] is CleanLines:
                run.append((i, j))
                continue
            if run:
                flush()
            if j is not None:
                run.append((i, j))
                flush()
        if run:
            flush()
        return out

    def _job(self, b: Batch, job):
        """The ``group_lines`` job of a prepared batch, or None (declined); a codec the helper does not inflate
        is inflated here (raises CodecError)."""
        (segs, order), head, clean = job
        if b.count is None or b.count > self.max_records:
            return None
        kind = self.kinds.get(b.codec)
        if kind is None:
            data = R.small_records_area(b, self.max_records)
            if data is None:
                return None
            kind = 0
        else:
            data = memoryview(b._buf)[b.position + K.V2_HEADER_SIZE:b.end]     # (no copy; read in the call)
        ts0, tsk = _ts_base(b)
        return (data, kind, b.count, b.base_offset, ts0, tsk, b.base_sequence, segs, order,
                (b.position, b.base_offset), head, CleanLines if clean else PreRenderedLines)


def _area_kinds(nat) -> dict:
    """Kafka codec id -> area kind of ``group_lines`` (:func:`mqtool.codecs.kafka_native_codecs`)."""
    from mqtool.codecs import kafka_native_codecs

    return kafka_native_codecs(nat)


# (4 x 8: as many batches in flight per lane as 2 x 16 before (32), in smaller steps: the lane waits
# less for the scanning thread, which takes fewer groups itself; 1 GiB bench log 1.21-1.25 -> 1.14-1.17 s)
LANE_AHEAD = 4          # groups of batches decoded ahead per lane
GROUP_BATCHES = 8       # a lane's task: consecutive batches, up to this many,
GROUP_RECORDS = 8192    # ... this many records (bounds the lines a task holds),
GROUP_BYTES = 1 << 20   # ... and this many stored bytes (each area is at most NATIVE_AREA_MAX inflated)


def _lanes(opts) -> int:
    """Threads that decode batches for :class:`BatchLines` in one ``dump kafka`` process: ``--jobs`` (0: one per
    core), the scanning thread included (:func:`_ahead`); 1 means this thread does all."""
    from mqtool.ranges import effective_jobs

    return effective_jobs(getattr(opts, "jobs", 1))


def _ahead(events, blocks: BatchLines, lanes: int, m):
    """``(event, pending)`` for every event of ``events`` in order, ``pending`` = (its group's task ``[Future of
    :meth:`BatchLines.run_group`, its result once taken, the group]``, index, last of its group) for a batch
    :class:`BatchLines` takes, else None (the group's result is asked for once, not per batch): ``lanes`` - 1
    worker threads make the blocks of the next groups of batches while this thread scans on, and this thread,
    rather than wait idle for the oldest group, makes the oldest group no worker has started yet (its Future is
    cancelled first: one thread runs it) -- ``lanes`` threads decode, and no more threads than that compete for
    the cores and the GIL. At most ``LANE_AHEAD`` groups per lane are in flight (bounded memory). No new group is handed to a lane once the mapped file ``m`` has shrunk (the caller stops at that event;
    the size is asked once per group: each ask lets the GIL go, and waits for it while a lane holds it)."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    from mqtool.codecs import kafka_codec_name

    kafka_codec_name(0)                 # the codec libraries load here, not in two lanes at once
    ex = ThreadPoolExecutor(max(1, lanes - 1), thread_name_prefix="mqtool-kafka-lane")
    pending: deque = deque()            # (event, (task, index, last) or None)
    tasks: deque = deque()              # the groups in flight, oldest first
    window = LANE_AHEAD * lanes
    group: list = []
    records = stored = 0

    def submit():
        nonlocal group, records, stored
        if m.shrunk():
            pending.extend((b, None) for b, _job in group)
        else:
            task = [ex.submit(blocks.run_group, group), None, group]
            tasks.append(task)
            last = len(group) - 1
            for i, (b, _job) in enumerate(group):
                pending.append((b, (task, i, i == last)))
        group, records, stored = [], 0, 0

    def ready(task) -> bool:
        if task[1] is not None:
            return True
        if task[0].done():              # (taken once: asking a Future takes its lock)
            task[1] = task[0].result()
            return True
        return False

    def help_with(task) -> None:
        """Until ``task`` is done: make the oldest group still queued here, if there is one."""
        while not ready(task):
            for t in tasks:
                if t[1] is None and t[0].cancel():
                    t[1] = blocks.run_group(t[2])
                    break
            else:
                return                  # every group is with a lane: wait for it (in _block)

    def hand_on():
        item = pending.popleft()
        if item[1] is not None:
            help_with(item[1][0])
            if item[1][2]:
                tasks.popleft()         # the last batch of the oldest group
        return item

    try:
        for ev in events:
            job = None
            if type(ev) is Batch:
                job = blocks.prepare(ev)
            if job is not None:
                group.append((ev, job))
                records += ev.count
                stored += ev.size
                if len(group) >= GROUP_BATCHES or records >= GROUP_RECORDS or stored >= GROUP_BYTES:
                    submit()
            else:
                if group:
                    submit()
                pending.append((ev, None))
            # hand on what is ready, in order; wait for the oldest group only when the window is full
            while pending and (len(tasks) >= window or pending[0][1] is None or ready(pending[0][1][0])):
                yield hand_on()
        if group:
            submit()
        while pending:
            yield hand_on()
    finally:
        for t in tasks:
            t[0].cancel()
        ex.shutdown(wait=True, cancel_futures=True)


def _block(blocks: BatchLines, ev, pend):
    """The block of batch ``ev`` (from its lane's task when one made it), or None: declined, or an error the
    row-by-row path then reports precisely."""
    if pend is not None:
        task = pend[0]
        if task[1] is None:
            task[1] = task[0].result()
        return task[1][pend[1]]
    try:
        return blocks.block(ev)
    except (CodecError, ValueError, IndexError):
        return None


def damage_row(path, d: Damage) -> dict:
    """The keys of :data:`mqtool.kafka.rows.DAMAGE`."""
    return {"kind": "damage", "file": str(path), "position": d.position, "size": d.length, "damage": d.code,
            "message": d.message}


def log_rows(path: Path, opts, stats, topic: str | None = None, start: int = 0, stop: int | None = None):
    """Rows of one .log. Filters shared with ``dump commitlog``: --from-offset/--to-offset (batches overlapping
    the range), --key (records with exactly this key; implies --deep).

    Range mode (``start``/``stop``, see :func:`mqtool.kafka.scan.scan_range`): only the rows of the
    entries and damage that start in ``[start, stop)`` after the scanner's resync, reading the last entry
    past ``stop``; the ranges of a file together give exactly the rows of the whole file."""
    want_key = getattr(opts, "key", None)
    want_key = want_key.encode("utf-8") if want_key is not None else None
    lo = getattr(opts, "from_offset", None)
    hi = getattr(opts, "to_offset", None)
    deep = bool(getattr(opts, "deep", False) or getattr(opts, "print_data", False) or want_key is not None)
    decoder = None
    if getattr(opts, "print_data", False):
        from mqtool.kafka.internal import decoder_for      # (loads construct: --print-data only)

        decoder = decoder_for(topic)
    # the compiled walker builds the record rows of a whole batch when nothing filters records
    text = _native_mode(opts, decoder) if want_key is None and lo is None and hi is None else None
    native_walker = _native_walker() if deep else None
    # NDJSON output without --limit: the walker writes the lines of a whole batch as one pre-rendered chunk
    lines = text is not None and bool(getattr(opts, "ndjson", False)) and getattr(opts, "limit", None) is None
    blocks = BatchLines(native_walker, opts) if lines and native_walker is not None else None
    # threads decode batches ahead when this process reads a whole file (not a pool worker's byte range)
    lanes = _lanes(opts) if blocks is not None and start == 0 and stop is None else 1
    with map_input(path, ranged=True) as m:     # a remote file: scan() fetches what it reads
        if len(m) <= GROUP_BYTES:       # one group at most: a lane would only make this thread wait (and
            lanes = 1                   # starting one loads concurrent.futures, and logging with it)
        fd = m.fileno() if m.mapped else None
        if start > 0 or stop is not None:
            events = scan_range(m.buf, str(path), start, len(m.buf) if stop is None else stop, fd=fd)
        else:
            events = scan(m.buf, str(path), max_bytes=getattr(opts, "max_bytes", None), fd=fd)
        if lanes > 1:
            events = _ahead(events, blocks, lanes, m)
        try:
            for ev in events:
                fut = None
                if lanes > 1:
                    ev, fut = ev
                # truncated under us: reading on would touch lost pages (SIGBUS). A block a lane made reads nothing
                # here: it is dropped only when a lane read lost pages (as zeros, the SIGBUS guard: mqtool.io), a
                # check without a system call (each lets the GIL go, and waits while a lane holds it)
                if m.faulted() if fut is not None else m.shrunk():
                    stats.damage(f"{path}: file-changed: the file shrank to {m.current_size()} bytes while being read")
                    return
                if isinstance(ev, Damage):
                    if ev.code == "skipped" or ev.code == "partial-tail":
                        stats.damage(f"{path}@{ev.position}: {ev.code}: {ev.message}")
                    if ev.code != "max-bytes":
                        yield damage_row(path, ev)
                    continue
                if lo is not None and ev.last_offset < lo:
                    continue
                if hi is not None and ev.base_offset is not None and ev.base_offset >= hi:
                    break
                stats.messages += 1
                if not ev.crc_ok:
                    stats.damage(f"{path}@{ev.position}: batch CRC mismatch", at=(str(path), ev.position))
                if blocks is not None and (fut is not None or lanes <= 1):
                    blk = _block(blocks, ev, fut)
                    if blk is True:         # written with the block of the batch before
                        continue
                    if blk is not None:
                        yield blk
                        continue
                if want_key is None:
                    yield batch_row(ev)
                if deep:
                    try:
                        nat = native_walker
                        if nat is not None and text is not None and ev.magic == 2 and not ev.is_control:
                            if lines:
                                chunk = _native_record_json(nat, ev, opts)
                                if chunk is not None:
                                    if chunk:
                                        yield PreRendered(chunk)
                                    continue
                            rows = _native_record_rows(nat, ev, opts, text)
                            if rows is not None:
                                yield from rows
                                continue
                        for rec in iter_records(ev):
                            if want_key is not None and rec.key != want_key:
                                continue
                            if (lo is not None and rec.offset < lo) or (hi is not None and rec.offset >= hi):
                                continue
                            yield record_row(ev, rec, opts, decoder)
                    except (CodecError, ValueError, IndexError) as e:
                        code = getattr(e, "code", "records-undecodable")
                        stats.damage(f"{path}@{ev.position}: records unreadable: {e}")
                        yield {"kind": "damage", "file": str(path), "position": ev.position, "size": ev.size,
                               "damage": code, "message": str(e)}
        finally:
            if lanes > 1:
                events.close()          # (stops the lanes before the file is closed)


# ---- other files --------------------------------------------------------------------------------

def index_rows(path: Path):
    base = L.segment_base(path)
    idx = F.read_offset_index(path)
    for i, (rel, pos) in enumerate(idx.entries):
        yield {"kind": "index_entry", "file": str(path), "position": i * 8, "offset": base + rel,
               "relative_offset": rel, "log_position": pos}


def timeindex_rows(path: Path):
    base = L.segment_base(path)
    t = F.read_time_index(path)
    for i, (ts, rel) in enumerate(t.entries):
        yield {"kind": "time_index_entry", "file": str(path), "position": i * 12, "timestamp": ts,
               "time": iso_ms(ts), "offset": base + rel, "relative_offset": rel}


def txnindex_rows(path: Path):
    t = F.read_txn_index(path)
    for i, (ver, pid, first, last, lso) in enumerate(t.entries):
        yield {"kind": "aborted_txn", "file": str(path), "position": i * 34, "version": ver, "producer_id": pid,
               "first_offset": first, "last_offset": last, "last_stable_offset": lso}


def snapshot_rows(path: Path):
    s = F.read_snapshot(path)
    yield {"kind": "producer_snapshot", "file": str(path), "version": s.version, "crc": s.crc, "crc_ok": s.crc_ok,
           "count": len(s.entries), "offset": L.segment_base(path), "problem": s.problem}
    for e in s.entries:
        (pid, epoch, last_seq, last_off, delta, ts, coord, txn_first) = e
        yield {"kind": "producer_entry", "file": str(path), "producer_id": pid, "producer_epoch": epoch,
               "last_sequence": last_seq, "last_offset": last_off, "offset_delta": delta, "timestamp": ts,
               "coordinator_epoch": coord, "current_txn_first_offset": txn_first}


def text_rows(path: Path, kind: str):
    if kind == "offset-checkpoint":
        c = F.read_offset_checkpoint(path)
        for topic, part, off in c.entries:
            yield {"kind": "checkpoint_entry", "file": str(path), "checkpoint": path.name, "topic": topic,
                   "partition": part, "offset": off}
        if c.problem:
            yield {"kind": "damage", "file": str(path), "damage": "malformed", "message": c.problem}
    elif kind == "leader-epoch-checkpoint":
        c = F.read_leader_epoch_checkpoint(path)
        for e, o in c.entries:
            yield {"kind": "leader_epoch", "file": str(path), "epoch": e, "offset": o}
        if c.problem:
            yield {"kind": "damage", "file": str(path), "damage": "malformed", "message": c.problem}
    elif kind in ("partition-metadata", "meta-properties"):
        yield {"kind": "properties", "file": str(path), "properties": F.read_properties(path)}
    elif kind == "quorum-state":
        yield {"kind": "properties", "file": str(path), "properties": F.read_quorum_state(path)}


def _topic_of(path: Path) -> str | None:
    m = L.PARTITION_DIR.match(path.parent.name)
    return m.group("topic") if m else None


def file_rows(path: Path, opts, stats):
    kind = L.file_kind(path)
    if kind in ("log", "kraft-snapshot"):
        topic = _topic_of(path) if kind == "log" else "__cluster_metadata"
        yield from log_rows(path, opts, stats, topic)
    elif kind == "index":
        yield from index_rows(path)
    elif kind == "timeindex":
        yield from timeindex_rows(path)
    elif kind == "txnindex":
        yield from txnindex_rows(path)
    elif kind == "snapshot":
        yield from snapshot_rows(path)
    elif kind is not None:
        yield from text_rows(path, kind)


def dump_path(p: Path, opts, stats):
    """A file by its kind; a directory: every .log segment (and KRaft snapshot) of every partition, in order."""
    if p.is_file():
        yield from file_rows(p, opts, stats)
        return
    for ld in L.discover(p):
        if ld.bootstrap_checkpoint is not None:
            yield from _guarded(log_rows(ld.bootstrap_checkpoint, opts, stats, "__cluster_metadata"), stats)
        for part in ld.partitions:
            if getattr(opts, "topic", None) and part.topic != opts.topic:
                continue
            for seg in part.segments:
                if seg.log is not None:
                    yield from _guarded(log_rows(seg.log, opts, stats, part.topic), stats)
            for _end, _epoch, f in part.kraft_snapshots:
                yield from _guarded(log_rows(f, opts, stats, "__cluster_metadata"), stats)


def lost_segment_notes(path: Path, topic: str | None = None) -> list[str]:
    """Damage notes for offsets that no segment of a partition under ``path`` holds: index files whose .log is
    gone between other segments, and a segment whose base offset lies past the next offset of the one before
    (unless the partition looks compacted, see :func:`mqtool.kafka.store.looks_compacted`). The previous
    segments are walked batch header by batch header (no CRC, no records: :func:`~mqtool.kafka.scan.batch_offsets`)."""
    notes = []
    for ld in L.discover(path):
        for part in ld.partitions:
            if topic and part.topic != topic:
                continue
            for seg, where in L.orphan_segments(part):
                if where == "inside":
                    f = seg.index or seg.timeindex or seg.txnindex
                    notes.append(f"{f}: segment-log-missing: no {seg.name}.log; the segment starting at offset "
                                 f"{seg.base_offset} is missing")
            logs = [s for s in part.segments if s.log is not None]
            interior, gaps = 0, []
            for a, b in zip(logs, logs[1:]):
                last = None
                try:
                    with map_input(a.log, ranged=True) as m:    # a remote file: scan() fetches what it reads
                        for base, end in batch_offsets(m.buf, str(a.log), fd=m.fileno() if m.mapped else None):
                            if last is not None and base > last + 1:
                                interior += 1
                            last = end if last is None else max(last, end)
                except InputError:
                    continue            # the rows of that file say it is unreadable
                if last is not None and b.base_offset > last + 1:
                    gaps.append((b, last + 1))
            if not L.looks_compacted(part.topic, interior):
                notes += [f"{b.log}: segment-gap: offsets {nxt}..{b.base_offset - 1} are in no segment (a deleted "
                          f"or lost segment)" for b, nxt in gaps]
    return notes


def _guarded(rows, stats):
    """One unreadable file inside a directory (FIFO, device, symlink loop, permissions) is a note, not the end."""
    try:
        yield from rows
    except InputError as e:
        stats.damage(f"{e.file}: file-unreadable: {e.message}")


class SalvageWriter:
    """verify --salvage-out: every readable record as NDJSON (keys/values base64), written atomically."""

    def __init__(self, out: str, force: bool, inputs):
        self._w = open_salvage_file(out, inputs, force)
        self._f = self._w.__enter__()

    def write(self, b: Batch, rec) -> None:
        row = {"file": b.file, "position": b.position, "offset": rec.offset, "timestamp": rec.timestamp,
               "key": encode_body(rec.key, "base64"), "value": encode_body(rec.value, "base64"),
               "headers": None, "crc_ok": b.crc_ok}
        put_headers(row, rec.headers, "base64")         # keys too, when one is not text
        self._f.write(dumps(row).encode("utf-8") + b"\n")

    def close(self) -> None:
        self._w.__exit__(None, None, None)
