"""The fast lane of the commitlog check: the compiled loop (``mqtool/_native/rmqverify.c``, configured here)
and the Python loop it is tested equal to. Both consume only units the full path would report nothing for."""
from __future__ import annotations

import os
import re
import struct

from formats import rocketmq as F
from mqtool import native
from mqtool.findings import BORN_AFTER_STORE_MS, BORN_BEFORE_STORE_MS, born_plausible
from mqtool.fastcrc import crc32
from mqtool.rocketmq import layout
from mqtool.rocketmq.records import CRC_TAG as _CRC_TAG     # (a unit whose properties end with it declines)
from mqtool.rocketmq.verify.context import _Ctx
from mqtool.schemacache import prefix_format


USE_FAST_LANE = True      # tests turn it off to compare the two paths
# The compiled lane reads a mapped local file through pread into a buffer of its own rather than through the map:
# the kernel's work of mapping and unmapping every page of the page cache in this process costs more than the
# copy (docs/performance.md). Tests turn it off to compare the two ways of reading.
READS_FD = True
# Fields the fast lane needs, unpacked from the schema-derived fixed part (the others are skipped as pad bytes).
_LANE_FIELDS = ["TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
                "BORNTIMESTAMP", "STORETIMESTAMP", "BODYLENGTH"]
_LANE = layout.narrow(_LANE_FIELDS)
# sysFlag bits whose messages take the full path: IPv6 hosts, PREPARED/ROLLBACK (0x4 bit), inner batch, and
# compressed bodies (the full path inflates them: a CRC over the stored bytes does not prove they inflate)
_LANE_DECLINE = (F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG | F.TRANSACTION_PREPARED_TYPE | F.INNER_BATCH_FLAG
                 | F.COMPRESSED_FLAG)
_MULTI_DISPATCH = F.PROPERTY_INNER_MULTI_DISPATCH.encode()


_native_state: dict[str, object] = {}


def _native_lane(crc=layout.CRC_KEEP):
    """The compiled lane (``rmqcore.verify``, ``mqtool/_native/rmqverify.c``) configured, or None (not built,
    switched off by ``MQTOOL_NATIVE``, or a layout the core refuses: :func:`layout.native_core`).

    The core walks units with the layout :mod:`mqtool.rocketmq.layout` gives it by field name (the fixed part,
    the TOPICLENGTH / PROPERTIESLENGTH widths; it refuses a layout of another fingerprint) and checks each
    body's CRC-32: "auto" (the default) calls ISA-L back per body when installed (faster than the C
    slicing-by-8 table loop, measured: see docs/performance.md), else the core's own slicing-by-8 (no call per
    body); tests pass ``crc`` None for the built-in one, and "auto" to go back. The lane's own options go by
    name.
    """
    if layout.native_core(crc) is None:
        return None
    mod = native.load("rmqverify")
    if mod is not None and _native_state.get("mod") is not mod:
        try:
            mod.configure(versions=(F.MESSAGE_MAGIC_CODE_V1,), decline_flags=_LANE_DECLINE,
                          crc_tail=F.CRC32_RESERVED_LEN, crc_tag=_CRC_TAG, multi_dispatch=_MULTI_DISPATCH,
                          born_before=BORN_BEFORE_STORE_MS, born_after=BORN_AFTER_STORE_MS)
        except (ValueError, TypeError, OverflowError):    # options the C lane refuses: use the Python lane
            return None
        _native_state["mod"] = mod
    return mod


# ---- the cross-reference (rmqverify.Xref): what the commitlog pass saw, for the consumequeue and index checks ----

_XREF_JOIN = b"#"          # IndexService#buildKey: topic + "#" + key (verify/index.py, dispatch.index_keys)
_xref_state: dict[str, object] = {}
# Memory the tables of a process keep before their arrays move to a temp file (``rmqverify.xref_spill``): the
# table grows with the message count (~75 bytes a message allocated), so past this it is written to a private
# unlinked file under the temp directory and its pages are unmapped behind the writer and the readers; what it
# holds and the findings do not change. ``MQTOOL_XREF_BUDGET_MB`` (MiB, a whole number >= 0) overrides it.
XREF_BUDGET_MB = 128


def _xref_budget() -> int:
    """The tables' memory budget in bytes (:data:`XREF_BUDGET_MB`, or ``MQTOOL_XREF_BUDGET_MB``)."""
    raw = os.environ.get("MQTOOL_XREF_BUDGET_MB")
    try:
        mb = int(raw) if raw else XREF_BUDGET_MB
    except ValueError:
        mb = -1
    if mb < 0:
        from mqtool.errors import InputError

        raise InputError("MQTOOL_XREF_BUDGET_MB must be a whole number of MiB (0 or more)", "environment")
    return mb << 20


def _xref_spill(mod, segments) -> None:
    """Give the compiled tables their budget and, when these segments could fill it (a table takes at most
    about twice the log's bytes: a message of one-byte keys), where to spill (the temp directory,
    :func:`mqtool.io.temp_dir`: decided only then). Once set, the directory stays for the process."""
    budget = _xref_budget()
    if _xref_state.get("spill") is None and budget < 2 * sum(s.size for s in segments or ()):
        from mqtool.io import temp_dir

        _xref_state["spill"] = os.fsencode(temp_dir())
        mod.xref_spill(budget, _xref_state["spill"])
    else:
        mod.xref_spill(budget)


def _xref_options() -> dict:
    """What ``rmqverify.configure_xref`` gets, by name: the consumequeue unit and index entry layouts (schema
    derived), the index header / slot sizes, the blank-fill unit and the property names of formats/rocketmq.py."""
    def fields(name):            # {field: (offset, size)} from the schema-derived struct (schema cache)
        st, names = prefix_format(F, name)
        order, codes = st.format[:1], re.findall(r"\d*[a-zA-Z?]", st.format[1:])
        if len(codes) != len(names):
            raise ValueError(f"{name}: {st.format} is not one code per field")
        at, out = 0, {}
        for n, c in zip(names, codes):
            size = struct.calcsize(order + c)
            out[n] = (at, size)
            at += size
        return out, st.size

    unit, unit_size = fields("CqUnit")
    entry, entry_size = fields("IndexEntry")
    strs = {k: v.encode("ascii") for k, v in (
        ("prop_sep", F.PROPERTY_SEPARATOR), ("nv_sep", F.NAME_VALUE_SEPARATOR), ("key_sep", F.KEY_SEPARATOR),
        ("tags", F.PROPERTY_TAGS), ("keys", F.PROPERTY_KEYS), ("uniq", F.PROPERTY_UNIQ_KEY),
        ("schedule_topic", F.SCHEDULE_TOPIC))}
    return dict(cq_unit=unit, cq_unit_size=unit_size, index_entry=entry, index_entry_size=entry_size,
                index_header_size=F.INDEX_HEADER_SIZE, index_slot_size=F.INDEX_SLOT_SIZE,
                cq_blank_size=F.CQ_BLANK_SIZE, key_join=_XREF_JOIN, **strs)


def new_xref(segments=None):
    """An empty cross-reference table (``rmqverify.Xref``), or None: the compiled lane is off, or the commitlog
    segments overlap (a unit found by the walk in one segment might not be the one ``message_at`` reads).

    The commitlog pass notes in it every message it decodes (the compiled lane as it consumes a unit,
    :func:`.units._check_message` the others); :mod:`.consumequeue` and :mod:`.index` then prove whole files clean with it
    (``cq_check`` / ``index_check``) and run their Python loops on any file it cannot prove clean.
    """
    if not USE_FAST_LANE:
        return None
    mod = _native_lane()
    if mod is None or not hasattr(mod, "Xref"):
        return None
    if segments:
        for a, b in zip(segments, segments[1:]):
            if a.base + a.size > b.base:
                return None
    if _xref_state.get("mod") is not mod:
        try:
            mod.configure_xref(**_xref_options())
        except (ValueError, TypeError, OverflowError):
            return None
        _xref_state.clear()
        _xref_state["mod"] = mod
    _xref_spill(mod, segments)
    return mod.Xref()


def _fast_lane(ctx: _Ctx, expected_next: dict, known_queues_only: bool = False, firsts: list | None = None):
    """The commitlog check for the common message, as one tight loop (see ``SegmentScanner``).

    It consumes a unit only when the full path (decode + :func:`_check_message` + the offset-shift check)
    would report nothing for it and would change the state the same way: v1 magic, IPv4 hosts, every length
    consistent, body CRC right, topic and properties UTF-8, no ``__CRC32#`` tail, not PREPARED/ROLLBACK, no
    inner batch or multi-dispatch, PHYSICALOFFSET off by the current shift, queue offset the expected one. It
    stops at anything else, and the scanner hands that unit to the full path. ``tests/test_rocketmq_fastpath.py``
    checks both give the same findings.

    ``known_queues_only`` (the range tasks of ``--jobs``): the first message of a queue in the range takes the
    full path, which records the ("qoff", ...) marker the merge needs; so does every unit while ``ctx.shift``
    is None (before the range's first message, which records the ("shift", ...) marker). With ``firsts`` (a
    list) the lane consumes such a first message too when it is clean, and appends (key, queue offset, global
    offset) to ``firsts``, in walk order, for the caller to turn into that marker.
    """
    min_size, max_size = F.MIN_MESSAGE_SIZE, ctx.opts.max_message_size
    summary = ctx.summary
    dispatched = ctx.dispatched_next
    queue_end = getattr(ctx, "queue_end", None)    # per queue: where its last message ends (units._check_message)
    nat = _native_lane()
    if nat is not None:
        scan = nat.scan
        xref = getattr(ctx, "xref", None)      # (tests drive the lane with a bare namespace)

        def native_lane(buf, view, pos, limit, end, base, fd=-1):
            if ctx.shift is None:
                return pos, 0
            npos, n, last_ts = scan(buf, pos, limit, end, ctx.shift + base, max_size, ctx.last_store_ts,
                                    expected_next, dispatched, known_queues_only, xref, base, queue_end, fd, firsts)
            if n:
                ctx.last_store_ts = last_ts
                summary.messages += n
            return npos, n

        # the scanner gives it the file's descriptor: it reads the file (pread) instead of the map (see scan())
        native_lane.reads_fd = READS_FD
        return native_lane
    unpack = _LANE.unpack_from
    fixed = _LANE.size
    v1 = F.MESSAGE_MAGIC_CODE_V1
    names: dict[bytes, str] = {}
    crc_tag, multi, crc_tail = _CRC_TAG, _MULTI_DISPATCH, F.CRC32_RESERVED_LEN
    frame, tl_size, failure = layout.frame_tail, layout.TOPIC_LENGTH_SIZE["v1"], layout.DecodeFailure

    def lane(buf, view, pos, limit, end, base):
        start = pos
        if ctx.shift is None:
            return start, 0
        shift = ctx.shift + base          # PHYSICALOFFSET - position of every clean unit here
        last_ts = ctx.last_store_ts
        queues: dict[tuple[bytes, int], list] = {}   # (topic bytes, queue) -> [(topic, queue), next offset, end]
        qget = queues.get
        crc = crc32
        n = 0
        limit = min(limit, end - fixed + 1)          # pos < limit: a whole fixed part is there
        while pos < limit:
            total, magic, body_crc, qid, qoff, phys, sys_flag, born_ts, store_ts, blen = unpack(buf, pos)
            if not born_plausible(born_ts, store_ts):
                break
            stop = pos + total
            p = pos + fixed + blen                   # TOPICLENGTH (v1 only: v2 takes the full path)
            if magic != v1 or total < min_size or stop > end or total > max_size or sys_flag & _LANE_DECLINE \
                    or phys - pos != shift or blen < 0:
                break
            try:
                tp, tl, pp = frame(buf, pos, p, stop, tl_size)
            except failure:
                break
            if crc(view[pos + fixed:p]) & 0x7FFFFFFF != body_crc:
                break
            props = buf[pp:stop]
            if multi in props or props.find(crc_tag, -crc_tail) >= 0:
                break
            if not props.isascii():
                try:
                    props.decode("utf-8")
                except UnicodeDecodeError:
                    break
            qk = (buf[tp:tp + tl], qid)
            q = qget(qk)
            if q is None:
                topic = names.get(qk[0])
                if topic is None:
                    try:
                        topic = names[qk[0]] = qk[0].decode("utf-8")
                    except UnicodeDecodeError:
                        break
                key = (topic, qid)
                if known_queues_only and key not in expected_next:
                    if firsts is None:
                        break
                    firsts.append((key, qoff, base + pos))     # (a new queue takes any offset: consumed)
                q = queues[qk] = [key, expected_next.get(key), None]
            exp = q[1]
            if exp != qoff and exp is not None:
                break
            q[1] = qoff + 1
            q[2] = stop
            if store_ts > last_ts:
                last_ts = store_ts
            n += 1
            pos = stop
        for key, nxt, q_end in queues.values():
            if nxt is not None:
                expected_next[key] = nxt
                if nxt > dispatched.get(key, 0):
                    dispatched[key] = nxt
            if q_end is not None and queue_end is not None:
                queue_end[key] = base + q_end
        if n:
            ctx.last_store_ts = last_ts
            summary.messages += n
        return (pos, n) if n else (start, 0)

    return lane
