"""Suggestions for the next command, printed on stderr after a result (never on stdout; ``--quiet`` hides
them). One function per situation so every command words the same advice the same way."""
from __future__ import annotations

import shlex
from collections.abc import Iterable


def _q(path) -> str:
    return shlex.quote(str(path))


def damaged_while_reading(path, ranges: int) -> str:
    # (met, not skipped: a Kafka batch whose CRC fails is still shown when its length leads on)
    return (f"{ranges} damaged range{'s' if ranges != 1 else ''} met while reading: `mqtool verify store {_q(path)}` lists "
            f"every finding; add `--salvage-out DIR` to save every readable message")


def verify_found_errors(paths: Iterable, salvaged: bool) -> str | None:
    if salvaged:
        return None
    ps = " ".join(_q(p) for p in paths)
    return (f"the store is damaged: `mqtool verify store {ps} --salvage-out DIR` saves every readable message; "
            f"`mqtool report {ps} -o report.html` gives a report to attach to the ticket")


def query_found_nothing(store, used_index: bool) -> str | None:
    if not used_index:
        return None
    return (f"the index files may be incomplete or damaged (check: `mqtool verify index {_q(store)}`); "
            f"try the same query with `--scan`, which reads the commitlog instead")


def index_damaged(store) -> str:
    """For engines that detect a damaged index while answering: attach to the error as its ``hint``."""
    return (f"index looks damaged; try `mqtool query {_q(store)} --scan ...` "
            f"or `mqtool rebuild-index {_q(store)} --out DIR`")
