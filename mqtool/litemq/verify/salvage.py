"""``verify --salvage-out``: every readable record (live and carved) as NDJSON with base64 bodies."""
from __future__ import annotations

from mqtool.damage import Damage
from mqtool.io import open_salvage_file
from mqtool.litemq.store import Store
from mqtool.litemq.rows import record_row
from mqtool.litemq.scan import walk
from mqtool.options import VerifyOptions
from mqtool.ndjson import dumps


def _salvage(store: Store, opts: VerifyOptions):
    with open_salvage_file(opts.salvage_out, [store.root or store.target.parent, store.target], opts.force) as f:
        for item in walk(store, carve_stale=True, with_body=True):
            if isinstance(item, Damage):
                continue
            f.write(dumps(record_row(item, "base64")).encode("utf-8") + b"\n")
