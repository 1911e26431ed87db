"""Reader for the broker's ``config/*.json`` files (fastjson output, not strict JSON).

fastjson writes ``Map<Integer, …>`` keys unquoted (``{0:10,1:12}``). This is a small tokenizer-based parser
for JSON plus bare object keys (integers or identifiers); bare integer keys become Python ints. Nesting depth
is bounded so hostile input cannot exhaust the stack.
"""
from __future__ import annotations

import json

from mqtool.common import STRICT_JSON

MAX_DEPTH = 256
_WS = " \t\r\n"
_BARE = set("0123456789-+abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$.")


class ConfigSyntaxError(ValueError):
    def __init__(self, message: str, pos: int):
        super().__init__(f"{message} at byte {pos}")
        self.pos = pos


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self._dec = STRICT_JSON                 # NaN, Infinity and overflowing numbers refused

    def ws(self):
        s, i = self.s, self.i
        while i < len(s) and s[i] in _WS:
            i += 1
        self.i = i

    def value(self, depth: int):
        if depth > MAX_DEPTH:
            raise ConfigSyntaxError("nesting too deep", self.i)
        self.ws()
        if self.i >= len(self.s):
            raise ConfigSyntaxError("unexpected end of input", self.i)
        c = self.s[self.i]
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.arr(depth)
        try:
            v, end = self._dec.raw_decode(self.s, self.i)
        except json.JSONDecodeError:
            raise ConfigSyntaxError(f"unexpected {c!r}", self.i) from None
        except ValueError as e:     # a number the hooks refuse, or an integer of more digits than Python reads
            raise ConfigSyntaxError(f"bad number: {e}", self.i) from None
        self.i = end
        return v

    def key(self):
        self.ws()
        if self.i < len(self.s) and self.s[self.i] == '"':
            try:
                v, self.i = self._dec.raw_decode(self.s, self.i)
            except json.JSONDecodeError as e:
                raise ConfigSyntaxError(f"bad key string: {e.msg}", e.pos) from None
            return v
        j = self.i
        while j < len(self.s) and self.s[j] in _BARE:
            j += 1
        if j == self.i:
            raise ConfigSyntaxError("expected a key", self.i)
        tok = self.s[self.i:j]
        self.i = j
        try:
            return int(tok)
        except ValueError:
            return tok

    def expect(self, ch: str):
        self.ws()
        if self.i >= len(self.s) or self.s[self.i] != ch:
            got = self.s[self.i] if self.i < len(self.s) else "end of input"
            raise ConfigSyntaxError(f"expected {ch!r}, found {got!r}", self.i)
        self.i += 1

    def peek(self) -> str:
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def obj(self, depth: int):
        self.expect("{")
        out = {}
        if self.peek() == "}":
            self.i += 1
            return out
        while True:
            k = self.key()
            self.expect(":")
            out[k] = self.value(depth + 1)
            c = self.peek()
            if c == ",":
                self.i += 1
                if self.peek() == "}":   # tolerate a trailing comma
                    self.i += 1
                    return out
                continue
            self.expect("}")
            return out

    def arr(self, depth: int):
        self.expect("[")
        out = []
        if self.peek() == "]":
            self.i += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            c = self.peek()
            if c == ",":
                self.i += 1
                continue
            self.expect("]")
            return out


def parse_fastjson(text: str):
    """Parse fastjson output; raises :class:`ConfigSyntaxError` (with byte position) on bad input."""
    p = _Parser(text)
    v = p.value(0)
    p.ws()
    if p.i != len(text):
        raise ConfigSyntaxError("trailing data", p.i)
    return v


def parse_broker_conf(text: str) -> dict[str, str]:
    """broker.conf / broker.properties (Java properties: ``key=value`` or ``key: value``, # and ! comments)."""
    out = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, _, v = s.partition(sep)
                out[k.strip()] = v.strip()
                break
    return out


def read_broker_conf(path) -> dict[str, str]:
    """``--broker-conf``: a broker.conf / .properties / broker.toml / Kafka server.properties as key → value
    strings (TOML's quoted strings unquoted: ``messageDelayLevel = "1s 5s ..."``)."""
    from mqtool.io import read_input

    conf = parse_broker_conf(read_input(path, limit=1 << 20).decode("utf-8", "replace"))
    return {k: v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'" else v for k, v in conf.items()}


def conf_int(conf: dict[str, str], key: str, path) -> int | None:
    """An integer setting of a broker config, None when absent; a value that is no number is a usage error."""
    if key not in conf:
        return None
    from mqtool.errors import UsageError

    try:
        return int(conf[key].strip().replace("_", ""))
    except ValueError:
        raise UsageError(f"{key}={conf[key]!r} in {path} is not a number") from None
