"""config/*.json (+ .bak): parse each file with the fastjson-tolerant reader and describe it."""
from __future__ import annotations

import os
from pathlib import Path

from mqtool.errors import InputError
from mqtool.io import read_input
from mqtool.columns import Column
from mqtool.rocketmq.config import ConfigSyntaxError, parse_fastjson

MAX_CONFIG_SIZE = 64 * 1024 * 1024


def config_files(config_dir: str | None, files: list[Path] | None = None) -> list[Path]:
    if files is not None:
        return files
    d = Path(config_dir)
    names = sorted(n for n in os.listdir(d) if n.endswith((".json", ".json.bak")))
    return [d / n for n in names]


def load_config(p: Path) -> tuple[object | None, str | None]:
    """(parsed value, error text) for one config file."""
    try:
        raw = read_input(p, limit=MAX_CONFIG_SIZE + 1)
    except InputError as e:
        return None, str(e)
    if len(raw) > MAX_CONFIG_SIZE:
        return None, f"larger than {MAX_CONFIG_SIZE} bytes"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 at byte {e.start}"
    if not text.strip(" \t\r\n\x00"):
        return None, "empty or zero-filled (the broker falls back to the .bak file)"
    try:
        return parse_fastjson(text), None
    except ConfigSyntaxError as e:
        return None, str(e)


def load_with_backup(p: Path) -> tuple[object | None, str]:
    """(parsed value, the name of the file it came from): ``p``, else its ``.bak`` when ``p`` does not parse
    (as the broker falls back); (None, "<name>: <error>") when neither does."""
    v, err = load_config(p)
    if err is None:
        return v, p.name
    bak = p.with_name(p.name + ".bak")
    if bak.exists():
        bv, berr = load_config(bak)
        if berr is None:
            return bv, bak.name
    return None, f"{p.name}: {err}"


def _summary(name: str, v) -> str:
    if not isinstance(v, dict):
        return type(v).__name__
    parts = []
    if "topicConfigTable" in v:
        parts.append(f"{len(v['topicConfigTable'])} topics")
    if "offsetTable" in v:
        parts.append(f"{len(v['offsetTable'])} offset entries")
    if "subscriptionGroupTable" in v:
        parts.append(f"{len(v['subscriptionGroupTable'])} groups")
    if "filterDataByTopic" in v:
        parts.append(f"{len(v['filterDataByTopic'])} filtered topics")
    dv = v.get("dataVersion")
    if isinstance(dv, dict):
        parts.append(f"dataVersion counter={dv.get('counter')} ts={dv.get('timestamp')}")
    return ", ".join(parts) or ", ".join(map(str, list(v)[:5]))


def config_rows(config_dir: str | None, files: list[Path] | None = None):
    paths = config_files(config_dir, files)

    def rows():
        for p in paths:
            value, err = load_config(p)
            yield {"kind": "config", "file": str(p), "name": p.name, "ok": err is None, "error": err,
                   "summary": _summary(p.name, value) if err is None else None, "content": value}

    cols = [Column("name", "File"), Column("ok", "Parsed"), Column("summary", "Summary", max_width=70),
            Column("error", "Error", max_width=50)]
    return cols, rows(), "config"
