"""The fast lane of the commitlog check: the compiled loop (``mqtool/_native/rmqverify.c``, configured here)
and the Python loop it is tested equal to. Both consume only units the full path would report nothing for."""
from __future__ import annotations

from formats import rocketmq as F
from mqtool import fastcrc, native
from mqtool.findings import BORN_AFTER_STORE_MS, BORN_BEFORE_STORE_MS, born_plausible
from mqtool.fastcrc import crc32
from mqtool.rocketmq import layout
from mqtool.rocketmq.verify.context import _Ctx
from mqtool.rocketmq.verify.units import _CRC_TAG


USE_FAST_LANE = True      # tests turn it off to compare the two paths
# Fields the fast lane needs, unpacked from the schema-derived fixed part (the others are skipped as pad bytes).
_LANE_FIELDS = ["TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
                "BORNTIMESTAMP", "STORETIMESTAMP", "BODYLENGTH"]
_LANE = layout.narrow(_LANE_FIELDS)
# sysFlag bits whose messages take the full path: IPv6 hosts, PREPARED/ROLLBACK (0x4 bit), inner batch, and
# compressed bodies (the full path inflates them: a CRC over the stored bytes does not prove they inflate)
_LANE_DECLINE = (F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG | F.TRANSACTION_PREPARED_TYPE | F.INNER_BATCH_FLAG
                 | F.COMPRESSED_FLAG)
_MULTI_DISPATCH = F.PROPERTY_INNER_MULTI_DISPATCH.encode()


def _native_lane(crc="auto"):
    """The compiled lane (``mqtool/_native/rmqverify.c``) configured from the schema, or None (not built,
    ``MQTOOL_NATIVE=0``, or a schema this C loop was not written for).

    Everything the C loop needs about the layout comes from :mod:`mqtool.rocketmq.layout`: the offset and size
    of each of the ``_LANE_FIELDS`` in the fixed part, the fixed-part size, and the sizes of TOPICLENGTH and
    PROPERTIESLENGTH (the layout module checks the variable part is BODY, TOPICLENGTH, TOPIC,
    PROPERTIESLENGTH, PROPERTIES and the lengths are signed, as the C loop reads them).
    """
    mod = native.load("rmqverify")
    if mod is None:
        return None
    lay = layout.current()          # the schema as it is now: a shape the C loop was not written for turns it off
    if lay is None or not layout.native_ok() or lay.fixed.size != _LANE.size:
        return None
    tl_size, pl_size = lay.topic_length_size["v1"], lay.properties_length_size
    # CRC-32: ISA-L called back per body (faster than the C slicing-by-8 table loop, measured: see
    # docs/performance.md); without ISA-L the C loop's own slicing-by-8 (no call per body). ``crc`` (tests):
    # a callable equal to zlib.crc32, or None for the built-in one.
    if crc == "auto":
        crc = fastcrc.crc32 if fastcrc.IMPLEMENTATION == "isal" else None
    try:
        mod.configure(lay.at(_LANE_FIELDS), _LANE.size, tl_size, pl_size,
                      F.MESSAGE_MAGIC_CODE_V1, F.MIN_MESSAGE_SIZE, _LANE_DECLINE, F.CRC32_RESERVED_LEN, _CRC_TAG,
                      _MULTI_DISPATCH, crc, BORN_BEFORE_STORE_MS, BORN_AFTER_STORE_MS)
    except (ValueError, TypeError, OverflowError):    # a layout the C loop refuses: use the Python lane
        return None
    return mod


_NATIVE = _native_lane()     # tests set it to None to run the Python lane


def _fast_lane(ctx: _Ctx, expected_next: dict, known_queues_only: bool = False):
    """The commitlog check for the common message, as one tight loop (see ``SegmentScanner``).

    It consumes a unit only when the full path (decode + :func:`_check_message` + the offset-shift check)
    would report nothing for it and would change the state the same way: v1 magic, IPv4 hosts, every length
    consistent, body CRC right, topic and properties UTF-8, no ``__CRC32#`` tail, not PREPARED/ROLLBACK, no
    inner batch or multi-dispatch, PHYSICALOFFSET off by the current shift, queue offset the expected one. It
    stops at anything else, and the scanner hands that unit to the full path. ``tests/test_rocketmq_fastpath.py``
    checks both give the same findings.

    ``known_queues_only`` (the range tasks of ``--jobs``): the first message of a queue in the range takes the
    full path, which records the ("qoff", ...) marker the merge needs; so does every unit while ``ctx.shift``
    is None (before the range's first message, which records the ("shift", ...) marker).
    """
    min_size, max_size = F.MIN_MESSAGE_SIZE, ctx.opts.max_message_size
    summary = ctx.summary
    dispatched = ctx.dispatched_next
    if _NATIVE is not None:
        scan = _NATIVE.scan

        def native_lane(buf, view, pos, limit, end, base):
            if ctx.shift is None:
                return pos, 0
            npos, n, last_ts = scan(buf, pos, limit, end, ctx.shift + base, max_size, ctx.last_store_ts,
                                    expected_next, dispatched, known_queues_only)
            if n:
                ctx.last_store_ts = last_ts
                summary.messages += n
            return npos, n

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
        queues: dict[tuple[bytes, int], list] = {}   # (topic bytes, queue) -> [(topic, queue), next offset]
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
                    break
                q = queues[qk] = [key, expected_next.get(key)]
            exp = q[1]
            if exp != qoff and exp is not None:
                break
            q[1] = qoff + 1
            if store_ts > last_ts:
                last_ts = store_ts
            n += 1
            pos = stop
        for key, nxt in queues.values():
            if nxt is not None:
                expected_next[key] = nxt
                if nxt > dispatched.get(key, 0):
                    dispatched[key] = nxt
        if n:
            ctx.last_store_ts = last_ts
            summary.messages += n
        return (pos, n) if n else (start, 0)

    return lane
