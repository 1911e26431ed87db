"""The sizes a rebuild uses (consumequeue file size, index geometry, dispatch rules) and where each came from."""
from __future__ import annotations

from dataclasses import dataclass, field

from formats import rocketmq as F
from mqtool.errors import UsageError
from mqtool.findings import WARNING, Finding
from mqtool.options import RebuildOptions
from mqtool.rocketmq import dispatch as D
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq.config import read_broker_conf
from mqtool.rocketmq.store import RocketStore



@dataclass
class Settings:
    cq_file_size: int
    hash_slots: int
    index_num: int
    rules: D.DispatchRules
    sources: dict = field(default_factory=dict)   # setting -> where it came from
    cq_decision: object = None                    # indexfiles.cq_file_size's SizeDecision
    index_geometries: object = None               # indexfiles.IndexGeometries of the store's index files


def resolve_settings(opts: RebuildOptions, store: RocketStore | None = None) -> Settings:
    """Each size comes from its option, else ``--broker-conf``, else the store's own files (consumequeue file
    names and sizes; index headers and structure), else the broker default
    (:func:`indexfiles.cq_file_size`, :func:`indexfiles.index_geometries`). ``sources`` says which."""
    conf: dict[str, str] = read_broker_conf(opts.broker_conf) if opts.broker_conf else {}
    src: dict[str, str] = {}
    cq = indexfiles.cq_file_size(store, opts)
    src["mappedFileSizeConsumeQueue"] = cq.source
    geos = indexfiles.index_geometries(store.index_files if store is not None else [], opts)
    geo = geos.main()
    (given_slots, given_num), _ = indexfiles.given_index_geometry(opts)
    if geo is not None and geo.slots is None and geo.candidates and given_slots is None and given_num is None:
        # the files' size is known, not its split: a pair of that size (named in the index-geometry warning),
        # so the rebuild is the store's size rather than the broker's 420 MB default
        slots, num = geo.candidates[0]
        src["maxHashSlotNum"] = src["maxIndexNum"] = "guess"
    elif geo is None or geo.slots is None:      # no index file to learn from (or none that tells)
        (slots, num), given_from = indexfiles.given_index_geometry(opts)
        src["maxHashSlotNum"] = given_from if slots is not None else "default"
        src["maxIndexNum"] = given_from if num is not None else "default"
        slots = F.DEFAULT_MAX_HASH_SLOTS if slots is None else slots
        num = F.DEFAULT_MAX_INDEX_NUM if num is None else num
        if slots < 1 or num < 2:
            raise UsageError(f"maxHashSlotNum {slots} / maxIndexNum {num} ({given_from}): slots must be > 0, "
                             "entries > 1")
    else:
        slots, num = geo.slots, geo.entries
        src["maxHashSlotNum"] = src["maxIndexNum"] = geo.source
    levels = D.parse_delay_levels(conf.get("messageDelayLevel"))
    src["messageDelayLevel"] = "broker-conf" if "messageDelayLevel" in conf else "default"
    if not levels:
        raise UsageError(f"messageDelayLevel={conf.get('messageDelayLevel')!r} in {opts.broker_conf}: no delay level "
                         f"can be read (expected e.g. '1s 5s 10s 30s 1m')")
    rules = D.DispatchRules(delay_levels=levels)
    for key, attr in (("enableMultiDispatch", "multi_dispatch"), ("enableLmq", "lmq"),
                      ("messageIndexEnable", "index_enable")):
        if key in conf:
            setattr(rules, attr, conf[key].strip().lower() == "true")
    return Settings(cq.value, slots, num, rules, src, cq, geos)


def geometry_findings(settings: Settings, store: RocketStore) -> list[Finding]:
    """Warnings for sizes the store could not settle (each names the candidates)."""
    out = []
    cq = settings.cq_decision
    if cq is not None and cq.warning:
        out.append(Finding(WARNING, "cq-geometry", store.consumequeue_dir, None, None, cq.warning,
                           cq.value, list(cq.candidates)))
    for w in settings.index_geometries.warnings() if settings.index_geometries is not None else ():
        out.append(Finding(WARNING, "index-geometry", store.index_dir, None, None, w))
    return out
