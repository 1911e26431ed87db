"""Recognise which broker family wrote a path (store root, part directory or single file).

Each family package (:data:`mqtool.families.FAMILIES`) provides ``store.sniff(path) -> int`` (0 = not mine; higher = more confident,
100 = certain). The highest score wins; a tie or no score is an error, never a guess.
"""
from __future__ import annotations

import os
from pathlib import Path

from mqtool.errors import InputError, NotAStoreError, UsageError
from mqtool.families import FAMILIES, REGISTRY, family_module  # noqa: F401  (family_module: re-exported)


def detect(path: str | os.PathLike, forced: str | None = None) -> str:
    p = Path(path)
    if not os.path.lexists(p):
        raise InputError("no such file or directory", str(p))
    if forced and forced not in FAMILIES:
        raise UsageError(f"unknown format {forced!r} (choose from {', '.join(FAMILIES)})")
    scores = _scores(p)
    best = max(scores.values(), default=0)
    if forced:
        return _check_forced(p, forced, scores, best)
    if best <= 0:
        raise _not_a_store(p)
    winners = [f for f, s in scores.items() if s == best]
    if len(winners) > 1:
        raise NotAStoreError(f"ambiguous store: looks like {' and '.join(winners)} (use --format)", str(p))
    return winners[0]


def _check_forced(p: Path, forced: str, scores: dict[str, int], best: int) -> str:
    """A forced family is obeyed for damaged input nobody recognises, but never against the evidence: a path
    that another family recognises, or a directory that holds nothing of any family, is a usage error."""
    if scores.get(forced, 0) > 0:
        return forced
    if best > 0:
        other = max(scores, key=scores.get)
        raise NotAStoreError(f"looks like a {REGISTRY[other].display} store, not a {REGISTRY[forced].display} one", str(p))
    if p.is_dir() and not _has_names_of(p, forced):
        raise _not_a_store(p, f"no {REGISTRY[forced].display} files found")
    return forced          # damaged input nobody recognises: the user says what it is (e.g. an unreadable segment)


def _has_names_of(p: Path, family: str) -> bool:
    try:
        names = [e.name for e in os.scandir(p)][:10_000]
    except OSError:
        return False
    fam = REGISTRY[family]
    if fam.file_suffixes:
        return any(n.endswith(fam.file_suffixes) or n.rpartition("-")[2].isdigit() for n in names)
    parts = fam.part_names
    return p.name in parts or p.parent.name in parts or any(n in parts for n in names)


def _not_a_store(p: Path, what: str | None = None) -> NotAStoreError:
    hint = _suggest(p) if p.is_dir() else None
    if hint:
        tail = f"; stores below it: {hint}"
    elif _empty_dir(p):
        tail = " (empty directory)"
    else:
        tail = "" if what else " (use --format to force one)"
    kind = "directory" if p.is_dir() else "file"
    names = [f.display for f in REGISTRY.values()]
    either = ", ".join(names[:-1]) + " or " + names[-1]
    return NotAStoreError((what or f"not a {either} store {kind}") + tail, str(p))


def _empty_dir(p: Path) -> bool:
    try:
        return p.is_dir() and not any(os.scandir(p))
    except OSError:
        return False


def _scores(p: Path) -> dict[str, int]:
    scores = {}
    for fam in FAMILIES:
        try:
            layout = family_module(fam, "store")
        except UsageError:
            continue
        try:
            scores[fam] = int(layout.sniff(p))
        except (OSError, ValueError):
            scores[fam] = 0
    return scores


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
                    if family_module(fam, "store").sniff(sub) > 0:
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
