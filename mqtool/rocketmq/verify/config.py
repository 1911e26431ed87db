"""The broker's config files (``config/*.json``) and their ``.bak`` copies: parse, compare."""
from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Iterator

from mqtool.findings import ERROR, INFO, WARNING, Finding
from mqtool.rocketmq.configfiles import load_config
from mqtool.rocketmq.verify.context import _Ctx


def _verify_config(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    if store.config_dir:
        d = Path(store.config_dir)
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            yield ctx.f(ERROR, "config-unreadable", str(d), None, None, str(e))
            return
        for name in names:
            if not name.endswith(".json"):
                continue
            v, err = load_config(d / name)
            bak = d / (name + ".bak")
            if err:
                bv, berr = load_config(bak) if bak.exists() else (None, "no .bak")
                yield ctx.f(WARNING if berr is None else ERROR, "config-unparsable", str(d / name), None, None,
                            f"{err}" + ("; the .bak parses and the broker would load it" if berr is None else
                                        f"; no usable .bak ({berr})"))
                continue
            if bak.exists():
                bv, berr = load_config(bak)
                if berr:
                    yield ctx.f(WARNING, "config-bak-unparsable", str(bak), None, None, berr)
                elif bv != v:
                    yield ctx.f(INFO, "config-differs-from-bak", str(d / name), None, None,
                                f"{name} differs from its .bak ({_diff_summary(bv, v)})")


def _diff_summary(old, new) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        parts = []
        for k in sorted(set(old) | set(new), key=str):
            if old.get(k) != new.get(k):
                o, n = old.get(k), new.get(k)
                if isinstance(o, dict) and isinstance(n, dict):
                    added = len(set(n) - set(o))
                    removed = len(set(o) - set(n))
                    changed = sum(1 for x in set(o) & set(n) if o[x] != n[x])
                    parts.append(f"{k}: +{added} -{removed} ~{changed}")
                else:
                    parts.append(f"{k} changed")
        return "; ".join(parts) or "same keys"
    return "content changed"
