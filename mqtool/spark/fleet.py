"""Fleet-wide ``query --engine spark`` (``verify --engine spark`` is :mod:`mqtool.spark.verify`), giving the
output of the embedded runner."""
from __future__ import annotations

from mqtool.errors import UsageError
from mqtool.ranges import family_ranges

# Row keys that `dump` leaves out of a row when they have no value (Spark rows always have every column).
OPTIONAL_WHEN_NULL = ("property_pairs", "body_error")


def spark_row_to_dump_row(d: dict, body: str, optional=OPTIONAL_WHEN_NULL, sorted_maps=()) -> dict:
    """A Spark/Arrow message row → the dict `dump commitlog` yields for the same record (``optional``: the
    family's keys that a dump row leaves out when they have no value; ``sorted_maps``: map columns the
    family renders with sorted keys, as a Spark map does not keep the order)."""
    d = dict(d)
    d.pop("store", None)
    for k in optional:
        if d.get(k) is None:
            d.pop(k, None)
    if body == "none" and d.get("body") is None:
        d.pop("body", None)
    if isinstance(d.get("properties"), list):
        d["properties"] = dict(d["properties"])
    for k in sorted_maps:
        if isinstance(d.get(k), dict):
            d[k] = dict(sorted(d[k].items()))
    if d.get("property_pairs") is not None:
        d["property_pairs"] = [list(p) for p in d["property_pairs"]]
    return d


QUERY_SUPPORTED = {"key", "topic", "body", "max"}


def query_rows(spark, paths: list[str], fmt: str | None, opts) -> list[dict]:
    """Messages whose KEYS contain ``opts.key`` (optionally of ``opts.topic``): a full-scan filter over
    every range of every store, in store order then offset order."""
    from mqtool.detect import detect

    if not opts.key:
        raise UsageError("--engine spark supports --key (with --topic, --body); other queries run embedded")
    from mqtool.options import QueryOptions

    dflt = QueryOptions()
    extra = [k for k, v in vars(opts).items() if k not in QUERY_SUPPORTED and v != getattr(dflt, k, None)]
    if extra:
        raise UsageError(f"--engine spark does not support {', '.join('--' + e.replace('_', '-') for e in extra)}")
    out: list[dict] = []
    by_family: dict[str, list[str]] = {}
    order = []
    import os

    for p in paths:
        fam = detect(p, fmt)
        p = os.path.abspath(p)
        by_family.setdefault(fam, []).append(str(p))
        order.append((str(p), fam))
    rows_by_store: dict[str, list] = {}
    for fam, ps in by_family.items():
        r = spark.read.format("mqtool").option("format", fam).option("key", opts.key).option("body", opts.body)
        if opts.topic:
            r = r.option("topic", opts.topic)
        for row in r.load(ps if len(ps) > 1 else ps[0]).collect():
            d = row.asDict(recursive=True)
            rows_by_store.setdefault(d["store"], []).append(
                spark_row_to_dump_row(d, opts.body,
                                      getattr(family_ranges(fam), "OPTIONAL_WHEN_NULL", OPTIONAL_WHEN_NULL),
                                      getattr(family_ranges(fam), "SORTED_MAPS", ())))
    for p, _ in order:
        out.extend(rows_by_store.pop(p, []))
    return out[:opts.max] if opts.max is not None and opts.max >= 0 else out


def query_columns(family: str, body: str):
    return family_ranges(family).message_columns(body)
