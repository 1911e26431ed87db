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
        hint = _suggest(p) if p.is_dir() else None
        raise NotAStoreError(f"not a RocketMQ, LiteMQ or Kafka store {kind}"
                             + (f"; stores below it: {hint}" if hint else " (use --format to force one)"), str(p))
    winners = [f for f, s in scores.items() if s == best]
    if len(winners) > 1:
        raise NotAStoreError(f"ambiguous store: looks like {' and '.join(winners)} (use --format)", str(p))
    return winners[0]


def _suggest(root: Path, max_dirs: int = 300, max_depth: int = 3) -> str | None:
    """Store roots a few levels below ``root`` (bounded walk), for a helpful error message."""
    found: list[str] = []
    queue = [(root, 0)]
    seen = 0
    while queue and seen < max_dirs and len(found) < 3:
        d, depth = queue.pop(0)
        try:
            children = sorted((e for e in os.scandir(d) if e.is_dir(follow_symlinks=False)), key=lambda e: e.name)
        except OSError:
            continue
        for e in children:
            seen += 1
            sub = Path(e.path)
            for fam in FAMILIES:
                try:
                    if family_module(fam, "layout").sniff(sub) > 0:
                        found.append(f"{sub} ({fam})")
                        break
                except (UsageError, OSError, ValueError):
                    continue
            else:
                if depth + 1 < max_depth:
                    queue.append((sub, depth + 1))
            if len(found) >= 3:
                break
    return ", ".join(found) if found else None
