"""``verify --salvage-out``: the readable messages of a damaged store, written atomically."""
from __future__ import annotations

from mqtool.rocketmq.store import RocketStore
from mqtool.rocketmq.records import Message


class _Salvage:
    """Readable messages of a damaged store, as NDJSON with base64 bodies, written atomically."""

    def __init__(self, out: str, store: RocketStore, force: bool):
        from mqtool.io import open_salvage_file

        inputs = [p for p in (store.root, store.commitlog_dir, store.path) if p]
        self._w = open_salvage_file(out, inputs, force)
        self.path = str(self._w.path)
        self._f = self._w.__enter__()
        self.count = 0

    def add(self, m: Message) -> None:
        self.add_row(m.to_row("base64"))

    def add_row(self, row: dict) -> None:
        from mqtool.ndjson import dumps

        self._f.write((dumps(row) + "\n").encode("utf-8"))
        self.count += 1

    def close(self, commit: bool = True) -> None:
        if commit:
            self._w.__exit__(None, None, None)
        else:
            self._w.__exit__(InterruptedError, InterruptedError("verify interrupted"), None)
