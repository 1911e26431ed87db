"""Recognise which broker family wrote a path (store root, part directory or single file).

Each family package provides ``layout.sniff(path) -> int`` (0 = not mine; higher = more confident,
100 = certain). The highest score wins; a tie or no score is an error, never a guess.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

from mqtool.errors import InputError, NotAStoreError, UsageError

FAMILIES = ("rocketmq", "litemq", "kafka")


def family_module(family: str, part: str):
    """Import ``mqtool.<family>.<part>`` (e.g. ops, layout)."""
    if family not in FAMILIES:
        raise UsageError(f"unknown format {family!r} (choose from {', '.join(FAMILIES)})")
    try:
        return importlib.import_module(f"mqtool.{family}.{part}")
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith(f"mqtool.{family}"):
            raise UsageError(f"{family} support is not available in this build") from None
        raise


def detect(path: str | os.PathLike, forced: str | None = None) -> str:
    p = Path(path)
    if not os.path.lexists(p):
        raise InputError("no such file or directory", str(p))
    if forced:
        if forced not in FAMILIES:
            raise UsageError(f"unknown format {forced!r} (choose from {', '.join(FAMILIES)})")
        return forced
    scores = {}
    for fam in FAMILIES:
        try:
            layout = family_module(fam, "layout")
        except UsageError:
            continue
        try:
            scores[fam] = int(layout.sniff(p))
        except (OSError, ValueError):
            scores[fam] = 0
    best = max(scores.values(), default=0)
    if best <= 0:
        kind = "directory" if p.is_dir() else "file"
        raise NotAStoreError(f"not a RocketMQ, LiteMQ or Kafka store {kind} "
                             "(use --format to force one)", str(p))
    winners = [f for f, s in scores.items() if s == best]
    if len(winners) > 1:
        raise NotAStoreError(f"ambiguous store: looks like {' and '.join(winners)} (use --format)", str(p))
    return winners[0]
