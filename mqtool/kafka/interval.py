"""``index.interval.bytes`` of a Kafka partition: stated, or read from the partition's own ``.index`` files.

The broker adds an offset-index entry for a batch when more than ``index.interval.bytes`` bytes were
appended since the last entry (``LogSegment.append`` / ``recover``: ``bytesSinceLastIndexEntry >
indexIntervalBytes``, counted from the start of the segment). So each ``.index`` entry at position P after
the previous one at P' (or the segment start) says ``interval < P − P'``, and each batch at Q that got no
entry says ``interval ≥ Q − P'``. Every segment gives a range of intervals; the partition's interval is where
most segments' ranges agree (a broker restart can break the rule for one segment). Within that range any value
rebuilds the same bytes; the broker default is taken when it lies inside, else the roundest value.
"""
from __future__ import annotations

from formats import kafka as K
from mqtool.errors import InputError, UsageError
from mqtool.io import map_input
from mqtool.kafka.indexfiles import read_offset_index
from mqtool.kafka.store import Partition
from mqtool.pages import PageWindow
from mqtool.options import SizeDecision

_INF = float("inf")
_CONF_KEYS = ("index.interval.bytes", "log.index.interval.bytes")


def segment_range(index_path, log_path) -> tuple[int, float]:
    """[lo, hi) of the intervals that reproduce this segment's ``.index`` entries (empty when none does).
    Damage in the log or the index, or the end of the data, ends the evidence there: what follows is not
    judged (verify reports it)."""
    positions = read_offset_index(index_path).entries.column(1)
    lo, hi, last, j = 0, _INF, 0, 0
    with map_input(log_path, ranged=True) as m:     # a remote file: the PageWindow fetches ahead of the walk
        for q in _batch_starts(m.buf):
            if j < len(positions) and positions[j] == q:
                hi = min(hi, q - last)
                last, j = q, j + 1
                continue
            if j < len(positions) and positions[j] < q:
                return lo, hi       # an entry where no batch starts: a damaged index (verify reports it)
            lo = max(lo, q - last)
    return lo, hi           # entries past the end of the data: a shorter log than the index (verify reports it)


def _batch_starts(buf):
    """Start positions of the batches of a .log, read from their length fields only (no decoding); stops at
    the end of data (zeros) or at a length that cannot be a batch (damage: verify reports it)."""
    n = len(buf)
    p = 0
    # bounded RSS on a mapped segment (mqtool.pages); 12 bytes read a batch: nothing worth populating ahead
    # (populating cost 40-60 ms a GiB of this walk's 80)
    win = PageWindow(buf, populate=False)
    while p + K.LOG_OVERHEAD <= n:
        if p >= win.next_at:
            win.advance(p)
        size = int.from_bytes(buf[p + 8:p + K.LOG_OVERHEAD], "big", signed=True)
        if size < K.MIN_RECORD_OVERHEAD or p + K.LOG_OVERHEAD + size > n:
            return
        yield p
        p += K.LOG_OVERHEAD + size


def _roundest(lo: int, hi: float) -> int:
    """The positive value in [lo, hi) with the most trailing decimal zeros (the smallest of those)."""
    start = max(lo, 1)
    top = hi if hi != _INF else 10 * start        # an open range: stay near its start
    step = 10 ** len(str(int(top)))
    while step > 1:
        v = -(-start // step) * step
        if v < top:
            return v
        step //= 10
    return start if start < hi else lo


def _pick(lo: int, hi: float) -> int:
    d = K.DEFAULT_INDEX_INTERVAL_BYTES
    return d if lo <= d < hi else _roundest(lo, hi)


def _text(r) -> str:
    lo, hi = r
    return f"{lo}..{int(hi) - 1}" if hi != _INF else f">= {lo}"


def given_interval(opts) -> SizeDecision | None:
    v = getattr(opts, "index_interval_bytes", None)
    if v is not None:
        if v < 0:
            raise UsageError("--index-interval-bytes must not be negative")
        return SizeDecision(v, "option", "--index-interval-bytes")
    conf_path = getattr(opts, "broker_conf", None)
    if conf_path:
        from mqtool.rocketmq.config import conf_int, read_broker_conf

        conf = read_broker_conf(conf_path)
        for key in _CONF_KEYS:
            v = conf_int(conf, key, conf_path)
            if v is not None:
                return SizeDecision(v, "broker-conf", f"{key} in {conf_path}")
    return None


def index_interval(part: Partition, opts=None) -> SizeDecision:
    """The partition's ``index.interval.bytes``: ``--index-interval-bytes``, else ``--broker-conf``
    (``index.interval.bytes`` / ``log.index.interval.bytes``), else the spacing of its ``.index`` entries
    against its batches, else the broker default (4096)."""
    given = given_interval(opts)
    if given is not None:
        return given
    ranges = []
    unfit = []
    for seg in part.segments:
        if seg.log is None or seg.index is None:
            continue
        try:
            r = segment_range(seg.index, seg.log)
        except InputError:
            continue
        if r[0] < r[1]:
            ranges.append((seg.name, r))
        else:
            unfit.append(seg.name)
    d = K.DEFAULT_INDEX_INTERVAL_BYTES
    if not ranges:
        warn = (f"{part.label}: the .index entries of segment(s) {', '.join(unfit)} fit no index.interval.bytes; "
                f"using the default {d}") if unfit else None
        return SizeDecision(d, "default", "the broker's default (no .index entries to learn from)", (), warn)
    # the point where the most segments' ranges overlap (ranges are [lo, hi))
    events = sorted([(lo, 1) for _, (lo, _) in ranges] + [(hi, -1) for _, (_, hi) in ranges if hi != _INF],
                    key=lambda e: (e[0], e[1]))
    best, n, best_lo, best_hi = 0, 0, 0, _INF
    for i, (x, step) in enumerate(events):
        n += step
        if step == 1 and n > best:
            best, best_lo = n, x
            best_hi = next((y for y, s in events[i + 1:] if s == -1), _INF)
    value = _pick(best_lo, best_hi)
    agree = [name for name, (lo, hi) in ranges if lo <= value < hi]
    how = (f"the spacing of the .index entries of {len(agree)} segment(s) (any value in "
           f"{_text((best_lo, best_hi))} gives the same entries)")
    warn = None
    others = [(name, r) for name, r in ranges if name not in agree]
    if others or unfit:
        warn = (f"{part.label}: segments disagree on index.interval.bytes: {_text((best_lo, best_hi))} fits "
                f"{len(agree)} segment(s)" + "".join(f", {_text(r)} fits {name}" for name, r in others)
                + (f", none fits {', '.join(unfit)}" if unfit else "")
                + f"; using {value} (give --index-interval-bytes to choose)")
    cands = tuple(sorted({_pick(*r) for _, r in others}))
    # a minority of segments off the rule is usual (a restart resets the broker's byte count; multi-batch
    # appends index the set's last offset): information, unless the majority does not agree either
    sev = "info" if 2 * len(agree) > len(ranges) + len(unfit) else "warning"
    return SizeDecision(value, "store", how, cands, warn, sev)
