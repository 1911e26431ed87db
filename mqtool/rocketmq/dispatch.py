"""The broker's dispatch rules: which message gets which consumequeue units and index keys.

Everything here mirrors what the broker's ``ReputMessageService`` does with each ``DispatchRequest`` built by
``CommitLog#checkMessageAndReturnSize`` (``shared/reference/rocketmq.md`` §4.3, §5, §6.2–§6.3):

* consumequeue (``DefaultMessageStore.CommitLogDispatcherBuildConsumeQueue``): transaction type NOT or COMMIT
  only; tagsCode = ``(long) TAGS.hashCode()``, or for ``SCHEDULE_TOPIC_XXXX`` with ``DELAY`` > 0 the delivery
  time ``storeTimestamp + delayLevelTable[min(level, maxLevel)]`` (unknown level: +1000 ms);
* LMQ multi-dispatch (``ConsumeQueue#multiDispatchLmqQueue``): when ``INNER_MULTI_DISPATCH`` and
  ``INNER_MULTI_QUEUE_OFFSET`` are both non-blank, one extra unit per named queue (queueId 0 for ``%LMQ%``
  names, else the message's queueId) at the listed offset; 5.x skips ``%RETRY%`` topics, the timer and schedule
  topics and names containing ``/``; lists of different lengths dispatch nothing extra;
* index (``IndexService#buildIndex``): every type except ROLLBACK; ``topic#UNIQ_KEY`` first, then ``topic#k`` for
  each non-empty token of KEYS split on a space.

Pure functions, no I/O. The Java ``String.hashCode`` here is a fast equivalent of
:func:`formats.common.java_string_hash` (checked by a property test).
"""
from __future__ import annotations

import sys
from array import array
from functools import lru_cache
from operator import mul

from formats import rocketmq as F
from formats import common as FC      # its functions load the real module when called
from mqtool.plainclass import dataclass, field
from mqtool.rocketmq.layout import property_dict

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"        # MixAll.RETRY_GROUP_TOPIC_PREFIX
TIMER_TOPIC = "rmq_sys_wheel_timer"          # TimerMessageStore.TIMER_TOPIC (5.x)
_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}   # parseDelayLevel

# ---- Java String.hashCode, fast -------------------------------------------------------------------

_MASK = 0xFFFFFFFF
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"   # native order for array('H')
_POW_LEN = 4096
_POW = [0] * _POW_LEN          # _POW[-1] = 1, _POW[-2] = 31, ... (mod 2^32)
_p = 1
for _i in range(_POW_LEN - 1, -1, -1):
    _POW[_i] = _p
    _p = (_p * 31) & _MASK
del _i, _p


def _poly(units) -> int:
    """Σ u_i·31^(n−1−i) mod 2^32 (unsigned), evaluated with C-level ``map``/``sum``."""
    n = len(units)
    return sum(map(mul, units, _POW[_POW_LEN - n:])) & _MASK


_HEAD_CACHE: dict[str, int] = {"": 0}
_HEAD_CACHE_MAX = 1 << 16


def java_hash(s: str) -> int:
    """``String.hashCode`` as a signed int32; same result as :func:`formats.common.java_string_hash`.

    h(a + b) = h(a)·31^len(b) + h(b) (mod 2^32): for ASCII strings the hash of all but the last 6 characters
    is cached (index keys share long prefixes: ``topic#`` and the producer part of a UNIQ_KEY) and the last 6
    are folded in with an unrolled Horner step.
    """
    if len(s) >= 6 and s.isascii():
        head = s[:-6]
        hh = _HEAD_CACHE.get(head)
        if hh is None:
            if len(_HEAD_CACHE) >= _HEAD_CACHE_MAX:
                _HEAD_CACHE.clear()
                _HEAD_CACHE[""] = 0
            hh = _HEAD_CACHE[head] = (_poly(head.encode("ascii")) if len(head) <= _POW_LEN
                                      else FC.java_string_hash(head) & _MASK)
        a, b, c, d, e, f = s[-6:].encode("ascii")
        h = ((((((hh * 31 + a) * 31 + b) * 31 + c) * 31 + d) * 31 + e) * 31 + f) & _MASK
    elif s.isascii():
        h = 0
        for c in s.encode("ascii"):
            h = h * 31 + c
        h &= _MASK
    else:
        units = array("H", s.encode(_UTF16, errors="surrogatepass"))
        if len(units) > _POW_LEN:
            return FC.java_string_hash(s)
        h = _poly(units)
    return h - 0x100000000 if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def tags_code(tags: str) -> int:
    """``MessageExtBrokerInner#tagsString2tagsCode``: hashCode widened to long, 0 for empty."""
    return java_hash(tags) if tags else 0


def index_key_hash(key: str) -> int:
    """``IndexFile#indexKeyHashMethod``: abs(hashCode), Integer.MIN_VALUE → 0."""
    h = java_hash(key)
    if h < 0:
        h = -h
        if h > 0x7FFFFFFF:
            return 0
    return h


def index_key_hashes(keys: list[str]) -> list[int]:
    """:func:`index_key_hash` of each key; the common case (ASCII, ≥ 6 chars, cached head) inlined."""
    out = []
    cache = _HEAD_CACHE
    for s in keys:
        hh = cache.get(s[:-6]) if len(s) >= 6 and s.isascii() else None
        if hh is None:
            out.append(index_key_hash(s))
            continue
        a, b, c, d, e, f = s[-6:].encode("ascii")
        h = ((((((hh * 31 + a) * 31 + b) * 31 + c) * 31 + d) * 31 + e) * 31 + f) & _MASK
        if h & 0x80000000:
            h = 0x100000000 - h
            if h > 0x7FFFFFFF:
                h = 0
        out.append(h)
    return out


# ---- delay levels ----------------------------------------------------------------------------------

def parse_delay_levels(text: str | None) -> dict[int, int]:
    """``DefaultMessageStore#parseDelayLevel`` / ``ScheduleMessageService#parseDelayLevel``: level → ms.

    Tokens split on single spaces; the last character is the unit (s/m/h/d). The broker stops at the first
    bad token and keeps the levels parsed so far; so do we.
    """
    if text is None:
        text = F.DEFAULT_DELAY_LEVELS
    out: dict[int, int] = {}
    for i, tok in enumerate(text.split(" ")):
        unit = _TIME_UNITS.get(tok[-1:]) if tok else None
        try:
            num = int(tok[:-1])
        except ValueError:
            break
        if unit is None:
            break
        out[i + 1] = num * unit
    return out


@dataclass
class DispatchRules:
    """What the broker's configuration decides about dispatch."""

    delay_levels: dict[int, int] = field(default_factory=lambda: parse_delay_levels(None))
    multi_dispatch: bool = True      # enableMultiDispatch (the properties only exist when it was on)
    lmq: bool = True                 # enableLmq: %LMQ% queues go to queueId 0
    index_enable: bool = True        # messageIndexEnable

    @property
    def max_delay_level(self) -> int:
        return max(self.delay_levels) if self.delay_levels else 0

    def deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """``computeDeliverTimestamp``: table value + store time, or store time + 1000 for an unknown level."""
        t = self.delay_levels.get(level)
        return store_timestamp + (t if t is not None else 1000)


def props_dict(props: str) -> dict[str, str]:
    """``MessageDecoder#string2messageProperties`` (last value wins for a repeated name): the one splitter,
    :func:`mqtool.rocketmq.layout.property_dict`."""
    return property_dict(props)[0]


_MULTI_MARK = F.PROPERTY_SEPARATOR + F.PROPERTY_INNER_MULTI_DISPATCH + F.NAME_VALUE_SEPARATOR


def quick_props(props: str) -> tuple[str | None, str | None, str | None] | None:
    """(TAGS, KEYS, UNIQ_KEY) as :func:`props_dict` gives them; None when the message carries multi-dispatch
    properties (the caller then needs the whole dict)."""
    if _MULTI_MARK in F.PROPERTY_SEPARATOR + props:
        return None
    d = property_dict(props)[0]
    return d.get(F.PROPERTY_TAGS), d.get(F.PROPERTY_KEYS), d.get(F.PROPERTY_UNIQ_KEY)


def cq_tags_code(rules: DispatchRules, topic: str, props: dict[str, str], store_timestamp: int) -> int:
    """tagsCode the broker puts in the consumequeue unit (``CommitLog#checkMessageAndReturnSize``)."""
    tags = props.get(F.PROPERTY_TAGS)
    code = tags_code(tags) if tags else 0
    if topic == F.SCHEDULE_TOPIC:
        t = props.get(F.PROPERTY_DELAY_TIME_LEVEL)
        if t is not None:
            level = java_parse_int(t)
            if level is not None:
                mx = rules.max_delay_level
                if level > mx:
                    level = mx
                if level > 0:
                    code = rules.deliver_timestamp(level, store_timestamp)
    return code


def java_parse_int(t: str, bits: int = 32) -> int | None:
    """``Integer.parseInt`` / ``Long.parseLong`` (``bits=64``); None where Java would throw."""
    s = t[1:] if t[:1] in ("+", "-") else t
    if not s or not s.isascii() or not s.isdigit():
        return None
    v = int(t)
    return v if -2 ** (bits - 1) <= v < 2 ** (bits - 1) else None


def gets_cq_unit(sys_flag: int) -> bool:
    tt = sys_flag & F.TRANSACTION_MASK
    return tt == F.TRANSACTION_NOT_TYPE or tt == F.TRANSACTION_COMMIT_TYPE


def gets_index(sys_flag: int) -> bool:
    return sys_flag & F.TRANSACTION_MASK != F.TRANSACTION_ROLLBACK_TYPE


class MultiDispatchError(ValueError):
    """The multi-dispatch properties cannot be used the way the broker would (message is reported)."""


def multi_dispatch_targets(rules: DispatchRules, topic: str, queue_id: int,
                           props: dict[str, str]) -> list[tuple[str, int, int]]:
    """Extra (queue name, queueId, queue offset) units for LMQ multi-dispatch; [] when none apply.

    Raises :class:`MultiDispatchError` for an offset the broker could not parse (it would stop dispatching
    the rest of that message's queues).
    """
    if not rules.multi_dispatch:
        return []
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic == TIMER_TOPIC or topic == F.SCHEDULE_TOPIC:
        return []
    queues = props.get(F.PROPERTY_INNER_MULTI_DISPATCH)
    offsets = props.get(F.PROPERTY_INNER_MULTI_QUEUE_OFFSET)
    if not queues or not queues.strip() or not offsets or not offsets.strip():
        return []
    qs = _java_split(queues, F.LMQ_DISPATCH_SEPARATOR)
    os_ = _java_split(offsets, F.LMQ_DISPATCH_SEPARATOR)
    if len(qs) != len(os_):
        return []
    out = []
    for name, off in zip(qs, os_):
        if "/" in name:
            continue
        v = java_parse_int(off, 64)
        if v is None:
            raise MultiDispatchError(f"INNER_MULTI_QUEUE_OFFSET value {off!r} is not a number")
        qid = 0 if rules.lmq and name.startswith(F.LMQ_PREFIX) else queue_id
        out.append((name, qid, v))
    return out


def _java_split(s: str, sep: str) -> list[str]:
    """``String#split`` with a literal one-char separator: trailing empty strings removed."""
    parts = s.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def index_keys(topic: str, props: dict[str, str]) -> list[str]:
    """Index keys of one message in the order the broker puts them."""
    out = []
    uniq = props.get(F.PROPERTY_UNIQ_KEY)
    if uniq is not None:
        out.append(f"{topic}#{uniq}")
    keys = props.get(F.PROPERTY_KEYS)
    if keys:
        for k in keys.split(F.KEY_SEPARATOR):
            if k:
                out.append(f"{topic}#{k}")
    return out


def cq_file_size(requested: int | None) -> int:
    """``MessageStoreConfig#getMappedFileSizeConsumeQueue``: rounded up to whole 20-byte units."""
    if requested is None:
        return F.DEFAULT_CQ_UNITS_PER_FILE * F.CQ_STORE_UNIT_SIZE
    unit = F.CQ_STORE_UNIT_SIZE
    return -(-requested // unit) * unit
