"""Corruption matrix: damage copies of real stores, run verify with salvage, score what it reports.

Family-agnostic driver. A family plugs in with an *adapter* registered in :data:`ADAPTERS` (module
``tools.corruption.<family>``, attribute ``ADAPTER``) that provides:

``stores(realdata: Path) -> list[Path]``
    the real stores of that family that have a log (commitlog / segments) to damage;
``messages(store: Path) -> list[Msg]``
    ground truth on the intact store: every readable message with a stable identity, file and byte range;
``events(store: Path, msgs: list[Msg]) -> list[Event]``
    the damage events to try, each with a kind (see :data:`KINDS`), a label and ``apply(copy) -> Expect``
    that damages a copy of the store in place and says what a good verifier reports;
``verify(store: Path, salvage_dir: Path) -> (list[Finding-like dict], set[identity])``
    run the family's verify with salvage on a (damaged) copy: findings as dicts with ``severity``, ``code``,
    ``file`` (relative to the store), ``position``, ``offset``, ``message``; identities of salvaged messages;
``explained(finding: dict, expect: Expect, msgs) -> bool``
    whether a finding that the intact store does not have is a consequence of this damage.

Scores per (family, damage kind):

* (a) share of events whose every expected report is present (right code at the right file and position);
* (b) share of untouched messages (bytes intersect no damaged range) found in the salvage output;
* (c) number of new error/warning findings (not in the intact store's verify) that the damage does not
  explain — false findings on untouched regions.
"""
from __future__ import annotations

import importlib
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

KINDS = ["header-bitflip", "body-bitflip", "truncate-mid-record", "zero-page", "garbage-insert",
         "delete-middle-segment", "stale-overwrite", "cq-entry-corruption", "index-entry-corruption"]

ADAPTERS = {"rocketmq": "tools.corruption.rocketmq", "litemq": "tools.corruption.litemq",
            "kafka": "tools.corruption.kafka"}


def finding_rows(findings, store: Path) -> list[dict]:
    """Finding dicts with file paths relative to the store copy (so events and findings compare)."""
    rows = []
    for f in findings:
        d = f.to_dict()
        if d["file"]:
            try:
                d["file"] = str(Path(d["file"]).relative_to(store))
            except ValueError:
                pass
        rows.append(d)
    return rows


@dataclass(frozen=True)
class Msg:
    ident: tuple            # stable identity, as recoverable from a salvage row
    file: str               # relative to the store root
    position: int
    size: int
    offset: int             # global log offset (family meaning)
    queue: tuple = ()       # (topic, queue id) or (topic, partition)


@dataclass
class Expect:
    reports: list           # [(set of acceptable codes, relative file, position)]
    touched: list           # [(relative file, lo, hi)] byte ranges whose content changed (original coordinates)
    removed_files: list = field(default_factory=list)
    explain_from: dict = field(default_factory=dict)    # relative file -> position from which findings are expected
    explain_offsets: list = field(default_factory=list)  # [(lo, hi)] global offsets whose findings are expected
    explain_queues: set = field(default_factory=set)    # queues that lost (or gained) messages
    resized: list = field(default_factory=list)         # relative files whose size changed
    neighbours: list = field(default_factory=list)      # files whose file-level findings the change explains
    note: str = ""
    detectable: bool = True     # False: no checksum or cross-check covers the changed bytes (say why in note)


@dataclass
class Event:
    kind: str
    label: str
    apply: Callable[[Path], Expect]


@dataclass
class Outcome:
    family: str
    store: str
    kind: str
    label: str
    reported: bool
    missing: list
    untouched: int
    recovered: int
    false_findings: list
    detectable: bool = True
    note: str = ""


def load_adapter(family: str):
    try:
        mod = importlib.import_module(ADAPTERS[family])
    except ImportError:
        return None
    return mod.ADAPTER


def untouched_messages(msgs: list[Msg], expect: Expect) -> list[Msg]:
    out = []
    for m in msgs:
        if m.file in expect.removed_files:
            continue
        hit = any(f == m.file and lo < m.position + m.size and hi > m.position for f, lo, hi in expect.touched)
        if not hit:
            out.append(m)
    return out


def _key(f: dict) -> tuple:
    return (f["code"], f["file"], f["position"])


def run_event(adapter, family: str, store: Path, msgs: list[Msg], baseline: Counter, event: Event,
              workdir: Path) -> Outcome:
    copy = workdir / "store"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(store, copy, symlinks=True)
    for p in [copy, *copy.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    expect = event.apply(copy)
    salvage = workdir / "salvage"
    if salvage.exists():
        shutil.rmtree(salvage)
    findings, recovered = adapter.verify(copy, salvage)
    missing = []
    for codes, file, position in expect.reports:
        if not any(f["code"] in codes and f["file"] == file and f["position"] == position for f in findings):
            missing.append((sorted(codes), file, position))
    left = Counter(baseline)
    new = []
    for f in findings:
        if f["severity"] not in ("error", "warning"):
            continue
        k = _key(f)
        if left[k] > 0:
            left[k] -= 1
            continue
        new.append(f)
    false = [f for f in new if not _explained_generic(f, expect) and not adapter.explained(f, expect, msgs)]
    intact = untouched_messages(msgs, expect)
    got = sum(1 for m in intact if m.ident in recovered)
    return Outcome(family, store_name(store), event.kind, event.label,
                   not missing, missing, len(intact), got, false, expect.detectable, expect.note)


def store_name(store: Path) -> str:
    """Short name of a real store: ``<name>/store`` (RocketMQ), ``<name>/data/broker`` (LiteMQ), ``<name>``."""
    if store.name == "store":
        return store.parent.name
    if store.name == "broker" and store.parent.name == "data":
        return store.parent.parent.name
    return store.name


def _explained_generic(f: dict, e: Expect) -> bool:
    if any(f["file"] == file and f["position"] == pos for _, file, pos in e.reports):
        return True           # a second code at a reported spot (e.g. wrong slot next to wrong hash)
    frm = e.explain_from.get(f["file"])
    if frm is not None and (f["position"] is None or f["position"] >= frm):
        return True
    off = f.get("offset")
    if off is not None and any(lo <= off < hi for lo, hi in e.explain_offsets):
        return True
    return False


def run_family(family: str, realdata: Path, kinds: list[str] | None = None, stores: list[str] | None = None,
               max_events_per_kind: int | None = None, progress: Callable[[str], None] | None = None) -> list:
    adapter = load_adapter(family)
    if adapter is None:
        return []
    outcomes = []
    for store in adapter.stores(realdata):
        name = store_name(store)
        if stores and name not in stores:
            continue
        msgs = adapter.messages(store)
        with tempfile.TemporaryDirectory(prefix="mqtool-matrix-") as td:
            base_findings, _ = adapter.verify(store, Path(td) / "salvage")
        baseline = Counter(_key(f) for f in base_findings if f["severity"] in ("error", "warning"))
        per_kind = Counter()
        for ev in adapter.events(store, msgs):
            if kinds and ev.kind not in kinds:
                continue
            if max_events_per_kind is not None and per_kind[ev.kind] >= max_events_per_kind:
                continue
            per_kind[ev.kind] += 1
            with tempfile.TemporaryDirectory(prefix="mqtool-matrix-") as td:
                out = run_event(adapter, family, store, msgs, baseline, ev, Path(td))
            outcomes.append(out)
            if progress:
                progress(f"{family} {name} {ev.kind} {ev.label}: reported={out.reported} "
                         f"recovered={out.recovered}/{out.untouched} false={len(out.false_findings)}")
    return outcomes


def table(outcomes: list[Outcome]) -> list[dict]:
    """Rows per (family, kind): events, (a) % (over detectable events), (b) %, (c) count, undetectable events."""
    rows = []
    keys = sorted({(o.family, o.kind) for o in outcomes}, key=lambda k: (k[0], KINDS.index(k[1])
                                                                          if k[1] in KINDS else 99))
    for fam, kind in keys:
        os_ = [o for o in outcomes if o.family == fam and o.kind == kind]
        ev = len(os_)
        det = [o for o in os_ if o.detectable]
        rep = sum(o.reported for o in det)
        unt = sum(o.untouched for o in os_)
        rec = sum(o.recovered for o in os_)
        fal = sum(len(o.false_findings) for o in os_)
        rows.append({"family": fam, "kind": kind, "events": ev, "stores": len({o.store for o in os_}),
                     "detectable": len(det), "undetectable": ev - len(det),
                     "reported_pct": 100.0 * rep / len(det) if det else 100.0,
                     "recovered_pct": 100.0 * rec / unt if unt else 100.0,
                     "untouched": unt, "recovered": rec, "false_findings": fal})
    return rows
