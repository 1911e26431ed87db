"""Thin click CLI: parse options, call one engine function, hand the result to a renderer, set the exit code.

Engine contract: every family package ``mqtool.<family>`` has an ``ops`` module with

* ``dump(part, path, opts: DumpOptions, stats: ScanStats) -> (columns, rows, title)``
* ``verify(part, path, opts: VerifyOptions) -> (findings_iter, summary_fn)``
* ``rebuild(path, opts: RebuildOptions) -> (findings_iter, summary_fn)``  (``--compare`` differences)
* ``query(path, opts: QueryOptions, stats: ScanStats) -> (columns, rows)``

and a ``layout`` module with ``sniff(path) -> int`` (see :mod:`mqtool.detect`).

Exit codes: 0 clean, 1 findings / damaged records / nothing found, 2 usage or I/O error.
"""
from __future__ import annotations

import os
import signal
import sys

import click

from mqtool import __version__, hints, render
from mqtool.common import parse_time
from mqtool.detect import detect
from mqtool.families import FAMILIES, family_module
from mqtool.families import get as get_family
from mqtool.errors import MqToolError
from mqtool.options import DumpOptions, QueryOptions, RebuildOptions, ScanStats, VerifyOptions

# the part of the CLI that needs no click (error handling, the engine call of verify, the start-up fast path)
from mqtool.entry import (EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, _fail, _is_url, _ops, _quiet_pipe_exit,  # noqa: F401
                          _remote, _stage_remote_inputs, guarded, run_verify)

#: counts and sizes that must be at least 1; offsets and counts that may be 0 but never negative
POSITIVE = click.IntRange(min=1)
NON_NEGATIVE = click.IntRange(min=0)
#: --max-message-size: a unit's length field is a signed 32-bit integer (RocketMQ TOTALSIZE, formats/rocketmq.py),
#: so no larger size can be read; a larger value overflowed the compiled walkers (a traceback)
MESSAGE_SIZE = click.IntRange(1, (1 << 31) - 1)

FORMAT_OPT = click.option("--format", "fmt", type=click.Choice(list(FAMILIES)),
                          default=None, help="Store family; detected from content and layout when omitted.")
JSON_OPT = click.option("--json", "as_json", is_flag=True,
                        help="NDJSON on stdout (the default when stdout is not a terminal).")
BODY_OPT = click.option("--body", type=click.Choice(["none", "text", "hex", "base64"]), default="none",
                        show_default=True, help="Include message bodies (decompressed) in this encoding.")

ENGINE_OPT = click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True,
                          help="local: this machine (with --jobs worker processes where the command has "
                               "--jobs); spark: Apache Spark through PySpark (pip install 'mqtool[spark]', "
                               "Java 17+).")
MASTER_OPT = click.option("--master", help="Spark master URL with --engine spark (default: what Spark's own "
                                            "configuration says: spark-submit, spark-defaults.conf, "
                                            "PYSPARK_SUBMIT_ARGS; else local[*]).")
JOBS_OPT = click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, show_default=True,
                        help="Parallel workers over byte ranges of the log (0 = all cores): threads where "
                             "the compiled helper runs without the GIL (verify), else processes. "
                             "Output is the same for any value.")
KAFKA_DUMP_JOBS_OPT = click.option(
    "--jobs", "-j", type=click.IntRange(min=0), default=0, show_default=True,
    help="Parallel workers (0 = all cores). --deep/--print-data --json without a record filter or --limit: "
         "threads in this process that decode batches ahead (the compiled helper); otherwise, and with "
         "--split-size, worker processes over byte ranges of the log. Output is the same for any value.")


def FINDINGS_VIEW_OPTS(f):
    f = click.option("--table", is_flag=True,
                     help="On a terminal: findings as tables (by code, by file, every finding) instead of one "
                          "line per finding.")(f)
    return click.option("--all-findings", is_flag=True,
                        help="On a terminal: also list the findings that follow from another (caused_by), and "
                             "every root finding; by default each root finding says how many follow from it, and at "
                             "most 200 of one code are listed (the rest counted). NDJSON always has all.")(f)


SPLIT_OPT = click.option("--split-size", type=str, default=None,
                         help="Byte-range size of the split (e.g. 64M, 1G; default 128M, and smaller work "
                              "units for dump).")


def SIZE_OPTS(f):
    """Store geometry, on every command that reads consumequeue, index or Kafka index files. Each size not
    given comes from --broker-conf, else from the store's own files, else the broker default; the command
    says which (info, the verify/rebuild summary)."""
    for opt in reversed((
        click.option("--broker-conf", type=click.Path(),
                     help="broker.conf / broker.properties / broker.toml (LiteMQ: [consumequeue] file_size) / Kafka "
                          "server.properties to take the sizes below from."),
        click.option("--cq-file-size", type=click.IntRange(min=1), default=None,
                     help="Consume queue file size in bytes (RocketMQ mappedFileSizeConsumeQueue, LiteMQ "
                          "[consumequeue] file_size). Default: from the store's own files."),
        click.option("--max-hash-slots", type=click.IntRange(min=1), default=None,
                     help="RocketMQ index hash slots per file (maxHashSlotNum). Default: from the index files."),
        click.option("--max-index-num", type=click.IntRange(min=2), default=None,
                     help="RocketMQ index entries per file (maxIndexNum). Default: from the index files."),
        click.option("--index-interval-bytes", type=click.IntRange(min=0), default=None,
                     help="Kafka index.interval.bytes. Default: from the spacing of each partition's own .index "
                          "entries, else 4096."),
    )):
        f = opt(f)
    return f


def _size(value):
    """'128M' / '1g' / '4096' → bytes (None stays None)."""
    from mqtool.ranges import MIN_SPLIT_SIZE, parse_size

    try:
        n = parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    if n is None:
        return None
    if n < MIN_SPLIT_SIZE:
        raise click.BadParameter(f"split size {n} is below the minimum of 64 bytes")
    return n


def _report_stats(stats: ScanStats, path=None) -> int:
    if not render.quiet():
        for n in stats.notes:
            render.say(n)
        if stats.damaged > len(stats.notes):
            render.say(f"... {stats.damaged - len(stats.notes)} more damaged ranges")
        if stats.damaged and path is not None:
            render.hint(hints.damaged_while_reading(path, stats.damaged))
    return EXIT_FINDINGS if stats.damaged else EXIT_OK


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    """``mqtool --version``: the version, then which compiled helpers are in use (loaded only when asked)."""
    if not value or ctx.resilient_parsing:
        return
    from mqtool import native

    click.echo(f"mqtool {__version__}\n{native.summary()}")
    ctx.exit()


def _global_option(ctx: click.Context, param: click.Parameter, value) -> None:
    """Callback of the global options: applied wherever on the command line they stand."""
    if ctx.resilient_parsing or value in (None, False):
        return
    if param.name == "quiet":
        render.configure(quiet=True)
    elif param.name == "no_color":
        render.configure(no_color=True)
    else:
        render.configure(color=value)


def _global_options() -> list[click.Option]:
    """Fresh copies of the options every command accepts (before or after its name)."""
    common = {"expose_value": False, "callback": _global_option}
    return [
        click.Option(["--color"], type=click.Choice(["auto", "always", "never"]), default=None,
                     help="Colours: auto (terminals only, honours NO_COLOR), always, never.", **common),
        click.Option(["--no-color"], is_flag=True, help="Same as --color never: no colours, no styling, no progress "
                     "bar, no terminal escape at all (also honoured: NO_COLOR).", **common),
        click.Option(["-q", "--quiet"], is_flag=True,
                     help="No progress bars, notes or hints on stderr (errors still print).", **common),
    ]


def _output_option(ctx: click.Context, param: click.Parameter, value) -> None:
    if ctx.resilient_parsing or value is None:
        return
    if param.name == "as_mode":
        render.configure_output(value, render._state["fields"])
    else:
        fields = [f.strip() for f in value.split(",") if f.strip()]
        if not fields:
            raise click.BadParameter("name at least one field, e.g. --fields offset,topic,keys")
        render.configure_output(render._state["as"], fields)


def _output_options() -> list[click.Option]:
    """How records are shown, for every command that prints records (those with --json)."""
    common = {"expose_value": False, "callback": _output_option}
    return [
        click.Option(["--as", "as_mode"], type=click.Choice(render.OUTPUT_MODES[1:]), default=None,
                     help="Output form: table (also when stdout is not a terminal, e.g. for less -S), vertical "
                          "(field: value blocks), json (NDJSON, as --json), csv, tsv. Default: a table that fits "
                          "the terminal, NDJSON in a pipe.", **common),
        click.Option(["--fields"], metavar="A,B,...", default=None,
                     help="Only these fields, in this order (table columns by name or header; the keys of every "
                          "NDJSON row, summaries too, and CSV column).",
                     **common),
    ]


def _fields_need_json(json_out: bool, command: str, other: str = "") -> None:
    """A command whose output for a person is not a table of rows (info, inspect, verify's compact view,
    explain, export's summary) applies ``--fields`` to its NDJSON rows only (and ``other``'s view): there a
    usage error says so (it was ignored)."""
    if render._state["fields"] and not json_out:
        raise click.UsageError(f"--fields selects the keys of {command}'s NDJSON rows{other}: add --json "
                               "(or --as json)")


def _add_global_options(command: click.Command) -> None:
    """Give every command (and group) below ``command`` the global options, so `mqtool info S -q` works, and
    the output options to every command that prints records."""
    taken = {opt for p in command.params for opt in getattr(p, "opts", ())}
    extra = _global_options() + (_output_options() if "--json" in taken else [])
    command.params.extend(o for o in extra if not taken & set(o.opts))
    for sub in getattr(command, "commands", {}).values():
        _add_global_options(sub)


_NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class _UsageLine(click.ClickException):
    """A click usage error (bad option or value, missing argument) shown as one line on stderr, exit 2, as
    every other error (README: exit codes), instead of click's usage block, hint and ``Error:`` line."""

    exit_code = EXIT_USAGE

    def __init__(self, e: click.UsageError):
        super().__init__(e.format_message())
        self.command = e.ctx.command_path if e.ctx is not None else "mqtool"

    def show(self, file=None) -> None:
        from mqtool.sanitize import visible

        msg = " ".join(self.format_message().split())
        click.echo(f"mqtool: {visible(msg)} (see `{visible(self.command)} --help`)", err=True)


class _Cli(click.Group):
    def make_context(self, info_name, args, parent=None, **extra):
        if parent is None:           # a fresh invocation starts from the defaults (in-process runs too)
            render.configure(no_color=False, quiet=False)
            render.configure_output()
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _NO_ARGS_HELP:               # `mqtool` alone: the help, as click shows it
            raise
        except click.UsageError as e:
            raise _UsageLine(e) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _NO_ARGS_HELP:               # `mqtool dump` alone
            raise
        except click.UsageError as e:       # a subcommand's options and arguments
            raise _UsageLine(e) from None


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and which compiled helpers are in use, then exit.")
def cli():
    """Offline forensic toolkit for RocketMQ, LiteMQ and Kafka broker stores.

    Reads store files straight from disk (read-only), with no broker running. Data goes to stdout
    (tables on a terminal, JSON in a pipe), messages for people to stderr. Exit 0 clean, 1 findings or
    damage or nothing found, 2 usage or I/O error. Shell completion: see `mqtool completion --help`.

    \b
    Examples:
      mqtool info /data/rocketmq/store
      mqtool report /data/rocketmq/store -o incident.html
      mqtool dump commitlog fixtures/rocketmq/store
      mqtool verify store /data/rocketmq/store
      mqtool rebuild-index /data/rocketmq/store --out /tmp/rebuilt --compare
      mqtool query /data/rocketmq/store --key order-42
    """


# ---- dump -----------------------------------------------------------------------------------

@cli.group()
def dump():
    """Decode store files and print their records (table on a terminal, NDJSON otherwise)."""


def _dump_common(f):
    f = FORMAT_OPT(f)
    f = JSON_OPT(f)
    return f


# Options that narrow what dump prints: when they match nothing, say so and exit 1 (as grep does).
_FILTERS = ("topic", "key", "tag", "queue", "from_offset", "to_offset")


TIME_OPTS = [
    click.option("--since", help="Only records stored at or after this time (epoch ms or ISO-8601, UTC unless "
                                 "it says otherwise; Kafka: the record's or batch's timestamp)."),
    click.option("--until", help="Only records stored before this time (epoch ms or ISO-8601)."),
]


def _time_opts(f):
    for opt in reversed(TIME_OPTS):
        f = opt(f)
    return f


def _time_window(kw) -> tuple[int, int] | None:
    since, until = kw.pop("since", None), kw.pop("until", None)
    if since is None and until is None:
        return None
    try:
        lo, hi = parse_time(since), parse_time(until)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--since/--until'") from None
    lo = -(1 << 63) if lo is None else lo
    hi = 1 << 63 if hi is None else hi
    if lo >= hi:
        raise click.BadParameter(f"--since {since} is not before --until {until}", param_hint="'--since'")
    return lo, hi


def _in_window(rows, window: tuple[int, int]):
    """Records whose store time (Kafka: timestamp) falls in [since, until); rows with no time are left out."""
    lo, hi = window
    for r in render.as_dicts(rows):
        t = r.get("store_timestamp", r.get("timestamp"))
        if isinstance(t, int) and lo <= t < hi:
            yield r


def _run_dump(part: str, path: str, fmt, as_json: bool, **kw):
    window = _time_window(kw)
    if kw.get("from_offset") is not None and kw.get("to_offset") is not None and kw["from_offset"] >= kw["to_offset"]:
        raise click.BadParameter(f"--from-offset {kw['from_offset']} is not below --to-offset {kw['to_offset']}",
                                 param_hint="'--from-offset'")
    family, ops = _ops(path, fmt)
    render.set_base(path)
    if "split_size" in kw:
        kw["split_size"] = _size(kw["split_size"])
        kw["ndjson"] = render.want_json(as_json) and window is None
        kw["write_direct"] = kw["ndjson"]      # render.write_ndjson takes ndjson.Direct rows (an engine may give them)
    opts = DumpOptions(**kw)

    def run():
        stats = ScanStats()
        columns, rows, title = ops.dump(part, path, opts, stats)
        if window is not None:
            rows = _in_window(rows, window)
        return rows, (columns, title, stats)

    if opts.limit is not None and _remote().is_staged(path):
        # a remote store: fetch the start of each file first, more only if the first rows need it
        def run_dicts():
            rows, state = run()
            return render.as_dicts(rows), state

        rows, (columns, title, stats) = _remote().first_rows(run_dicts, opts.limit)
    else:
        rows, (columns, title, stats) = run()
    if opts.limit is not None:
        rows = _limit(rows, opts.limit)
    emitted = render.emit(_note_damaged_rows(rows, stats), columns, as_json, title=title)
    code = _report_stats(stats, path)
    filters = [f"--{f.replace('_', '-')} {kw[f]}" for f in _FILTERS if kw.get(f) is not None]
    if window is not None:
        filters.append("--since/--until")
    if filters and not emitted and opts.limit != 0:
        if not render.quiet():
            render.say(f"nothing matched {' '.join(filters)}")
        code = EXIT_FINDINGS
    sys.exit(code)


def _row_damage(r: dict) -> str | None:
    where = f"{r.get('file')}: position {r.get('position')}"
    if r.get("body_error"):
        return f"{where}: body does not decode: {r['body_error']}"
    if r.get("crc_ok") is False:
        return f"{where}: {r.get('kind') or 'record'} CRC does not match"
    return None


def _note_damaged_rows(rows, stats: ScanStats):
    """Pass ``rows`` through; each one that reports damaged bytes is a damage note (so dump exits 1)."""
    import json

    from mqtool.ndjson import DAMAGED_MARKS as marks, CleanLines, Direct

    text_marks = tuple(m.decode("ascii") for m in marks)

    def note_line(line: bytes) -> None:
        row = json.loads(line)
        why = _row_damage(row)
        if why:
            stats.damage(why, at=(row.get("file"), row.get("position")))

    for r in rows:
        if type(r) is CleanLines:       # lines that carry no mark: nothing to look for
            yield r
            continue
        if type(r) is Direct:       # written by its producer, which hands each marked line over as it goes
            r.on_marked = note_line
        elif type(r) is dict:
            why = _row_damage(r)
            if why:
                stats.damage(why, at=(r.get("file"), r.get("position")))
        elif isinstance(r, (str, bytes)) or hasattr(r, "marked"):
            # pre-rendered NDJSON line(s): look inside (no copy) only when a mark is; a worker's spool piece: the
            # lines it found marked
            if isinstance(r, str):
                if not any(m in r for m in text_marks):
                    yield r
                    continue
                raw = r.encode("utf-8", "surrogateescape")
            else:
                raw = b"\n".join(r.marked) if hasattr(r, "marked") else r
            if any(m in raw for m in marks):
                for line in raw.splitlines():
                    if any(m in line for m in marks):
                        note_line(line)
        yield r


def _limit(rows, n):
    if n <= 0:
        return
    for i, r in enumerate(rows, 1):
        yield r
        if i >= n:
            return


@dump.command("commitlog")
@click.argument("path", type=click.Path())
@_dump_common
@click.option("--topic", help="Only messages of this topic.")
@click.option("--key", help="Only messages whose KEYS contain this key.")
@click.option("--tag", help="Only messages with this tag.")
@click.option("--from-offset", type=NON_NEGATIVE, help="Start at this global offset (inclusive).")
@click.option("--to-offset", type=NON_NEGATIVE, help="Stop before this global offset.")
@click.option("--limit", type=NON_NEGATIVE, help="At most N records.")
@BODY_OPT
@click.option("--include-blank", is_flag=True, help="Also list BLANK end-of-file units.")
@click.option("--include-stale", is_flag=True, help="LiteMQ: also carve stale records after the end of data.")
@_time_opts
@JOBS_OPT
@SPLIT_OPT
@guarded
def dump_commitlog(path, fmt, as_json, **kw):
    """Messages of a commitlog (store root, commitlog directory or one segment file).

    \b
    Examples:
      mqtool dump commitlog store/ --topic TopicA --limit 10
      mqtool dump commitlog store/commitlog/00000000000000000000 --json | jq .msg_id
      mqtool dump commitlog store/ --key order-42 --body text
    """
    _run_dump("commitlog", path, fmt, as_json, **kw)


@dump.command("consumequeue")
@click.argument("path", type=click.Path())
@_dump_common
@click.option("--topic", help="Only this topic's queues.")
@click.option("--queue", type=NON_NEGATIVE, help="Only this queue id.")
@click.option("--limit", type=NON_NEGATIVE, help="At most N units.")
@SIZE_OPTS
@guarded
def dump_consumequeue(path, fmt, as_json, **kw):
    """Units of consume queues (store root, consumequeue dir, one queue dir or one file).

    \b
    Example:
      mqtool dump consumequeue store/ --topic TopicA --queue 0
    """
    _run_dump("consumequeue", path, fmt, as_json, **kw)


@dump.command("index")
@click.argument("path", type=click.Path())
@_dump_common
@click.option("--slots", is_flag=True, help="Also list the non-empty hash slots.")
@click.option("--limit", type=NON_NEGATIVE, help="At most N rows.")
@SIZE_OPTS
@guarded
def dump_index(path, fmt, as_json, **kw):
    """Index files: header and entries (store root, index dir or one file).

    \b
    Example:
      mqtool dump index store/index/20261122090857074 --slots
    """
    _run_dump("index", path, fmt, as_json, **kw)


@dump.command("checkpoint")
@click.argument("path", type=click.Path())
@_dump_common
@guarded
def dump_checkpoint(path, fmt, as_json):
    """The checkpoint file (store root or the file itself).

    \b
    Example:
      mqtool dump checkpoint store/checkpoint
    """
    _run_dump("checkpoint", path, fmt, as_json)


@dump.command("config")
@click.argument("path", type=click.Path())
@_dump_common
@guarded
def dump_config(path, fmt, as_json):
    """config/*.json (and .bak) files; fastjson's unquoted integer keys are handled.

    \b
    Example:
      mqtool dump config store/ --json | jq .
    """
    _run_dump("config", path, fmt, as_json)


@dump.command("abort")
@click.argument("path", type=click.Path())
@_dump_common
@guarded
def dump_abort(path, fmt, as_json):
    """The abort (crash marker) and lock files.

    \b
    Example:
      mqtool dump abort store/
    """
    _run_dump("abort", path, fmt, as_json)


@dump.command("kafka")
@click.argument("path", type=click.Path())
@JSON_OPT
@click.option("--deep", "--deep-iteration", "deep", is_flag=True, help="Records inside each batch.")
@click.option("--print-data", "--print-data-log", "print_data", is_flag=True,
              help="Keys and values too (implies --deep).")
@click.option("--max-bytes", type=NON_NEGATIVE, help="Stop after N bytes of each .log segment.")
@click.option("--limit", type=NON_NEGATIVE, help="At most N rows.")
@_time_opts
@BODY_OPT
@KAFKA_DUMP_JOBS_OPT
@SPLIT_OPT
@SIZE_OPTS
@guarded
def dump_kafka(path, as_json, **kw):
    """Kafka files: .log, .index, .timeindex, .txnindex, .snapshot, checkpoints (file, partition or log dir).

    \b
    Examples:
      mqtool dump kafka /var/kafka-logs/orders-0 --deep
      mqtool dump kafka 00000000000000000000.log --print-data --body text --json
    """
    _run_dump("kafka", path, "kafka", as_json, **kw)


# ---- info -----------------------------------------------------------------------------------

@cli.command("info")
@click.argument("store", type=click.Path())
@FORMAT_OPT
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object on stdout (the default when stdout is not a terminal).")
@click.option("--bucket", default="auto", show_default=True,
              help="Timeline bucket width: 100ms, 10s, 1m, 1h, 1d … or auto.")
@click.option("--max-buckets", type=POSITIVE, default=60, show_default=True,
              help="With --bucket auto: the narrowest width giving at most this many buckets.")
@click.option("--max-message-size", type=MESSAGE_SIZE, default=4 * 1024 * 1024, show_default=True,
              help="Largest plausible message (bytes).")
@SIZE_OPTS
@guarded
def info_cmd(store, fmt, as_json, bucket, max_buckets, max_message_size, **sizes):
    """What is in a store and when, on one screen.

    Kind and version hints, files and sizes, first/last store time, messages and bytes per topic and
    queue, consumer offsets and lag, the crash marker, and a timeline of messages per time bucket with
    damaged ranges marked. Exit 1 when damaged bytes were met while reading.

    \b
    Examples:
      mqtool info /data/rocketmq/store
      mqtool info store/ --bucket 1m
      mqtool info store/ --json | jq '.consumers[] | select(.lag > 0)'
    """
    from mqtool.info import build_info, parse_bucket
    from mqtool.options import InfoOptions

    _fields_need_json(render.want_json(as_json), "info")
    opts = InfoOptions(bucket_ms=parse_bucket(bucket), max_buckets=max_buckets,
                       max_message_size=max_message_size, **sizes)
    result = build_info(store, fmt, opts)
    if render.want_json(as_json):
        render.write_ndjson([result.to_dict()])
    else:
        from mqtool.render_info import render_info

        render_info(result)
    if result.damage_total:
        render.hint(hints.damaged_while_reading(store, result.damage_total))
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


# ---- report ---------------------------------------------------------------------------------

@cli.command("report")
@click.argument("store", type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(), help="HTML file to write (not inside the store).")
@FORMAT_OPT
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--bucket", default="auto", show_default=True, help="Timeline bucket width (see mqtool info).")
@click.option("--max-message-size", type=MESSAGE_SIZE, default=4 * 1024 * 1024, show_default=True,
              help="Largest plausible message (bytes).")
@SIZE_OPTS
@guarded
def report_cmd(store, output, fmt, force, bucket, max_message_size, **sizes):
    """One self-contained HTML incident report: overview, timeline, bytes per topic, where the damage
    lies, consumer lag and every verify finding. No script, no network: attach it to the ticket.

    Prints the written path on stdout. Exit 1 when verify found an error or damaged bytes were met.

    \b
    Examples:
      mqtool report /data/rocketmq/store -o incident-4711.html
      mqtool report store/ -o /tmp/r.html --force --bucket 1m
    """
    from mqtool.info import parse_bucket
    from mqtool.io import open_output_file
    from mqtool.options import InfoOptions
    from mqtool.report import build_report

    detect(store, fmt)                    # "not a store" comes before anything about the output path
    umask = os.umask(0)
    os.umask(umask)
    # a report is meant to be shared: the usual permissions, not the temp file's 0600
    writer = open_output_file(output, [store], force, mode=0o666 & ~umask)
    out = writer.path
    html, info, summary, _ = build_report(
        store, fmt, InfoOptions(bucket_ms=parse_bucket(bucket), max_message_size=max_message_size, **sizes),
        VerifyOptions(max_message_size=max_message_size, **sizes))
    with writer as f:
        f.write(html.encode("utf-8"))
    if getattr(writer, "fd", None) != 1:          # -o /dev/stdout: the report is what stdout holds
        sys.stdout.write(f"{render.visible(out) if render.stdout_is_tty() else out}\n")
        sys.stdout.flush()
    if not render.quiet():
        render.say(f"wrote {out} ({len(html) // 1024} KiB): verdict {summary.verdict}, "
                   f"{summary.errors} errors, {summary.warnings} warnings, {info.messages} messages")
    if summary.errors or info.damage_total:
        render.hint(hints.damaged_while_reading(store, info.damage_total) if info.damage_total else
                    hints.verify_found_errors([store], False))
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


# ---- verify ---------------------------------------------------------------------------------

@cli.group()
def verify():
    """Check CRCs, structure and cross-file consistency; report every finding."""


def _verify_cmd(part: str):
    @click.argument("paths", nargs=-1, required=True, type=click.Path())
    @FORMAT_OPT
    @JSON_OPT
    @click.option("--max-message-size", type=MESSAGE_SIZE, default=4 * 1024 * 1024, show_default=True,
                  help="Largest plausible message (bytes); larger sizes are findings.")
    @click.option("--salvage-out", type=click.Path(), help="Write every readable message (with body) as NDJSON here.")
    @click.option("--force", is_flag=True, help="Allow --salvage-out to overwrite.")
    @click.option("--deep", is_flag=True, help="Kafka: also decode and check the records inside every batch.")
    @click.option("--manifest", "manifest_out", type=click.Path(),
                  help="Also write a sha256 manifest (NDJSON, as `mqtool hash`) of the inputs to this file.")
    @JOBS_OPT
    @SPLIT_OPT
    @ENGINE_OPT
    @MASTER_OPT
    @SIZE_OPTS
    @FINDINGS_VIEW_OPTS
    @guarded
    def cmd(paths, fmt, as_json, engine, master, manifest_out=None, all_findings=False, table=False, **kw):
        _fields_need_json(render.want_json(as_json) or table, "verify", " and the columns of --table")
        if manifest_out:
            _write_manifest(manifest_out, paths, kw.get("force", False))
        kw["split_size"] = _size(kw["split_size"])
        run_verify(part, paths, fmt, as_json, engine, master, all_findings, table, kw)

    return cmd


verify.command("store", help="Verify a whole store (RocketMQ/LiteMQ root, Kafka log or partition dir).\n\n"
               "\b\nExample:\n  mqtool verify store /data/rocketmq/store --json | jq 'select(.severity==\"error\")'"
               )(_verify_cmd("store"))
verify.command("commitlog", help="Verify commitlog segments only.\n\n\b\nExample:\n  mqtool verify commitlog store/commitlog"
               )(_verify_cmd("commitlog"))
verify.command("consumequeue", help="Verify consume queues against the commitlog.\n\n\b\nExample:\n"
               "  mqtool verify consumequeue store/")(_verify_cmd("consumequeue"))
verify.command("index", help="Verify index files against the commitlog.\n\n\b\nExample:\n  mqtool verify index store/"
               )(_verify_cmd("index"))


def _write_manifest(out: str, paths, force: bool) -> None:
    from mqtool.io import open_output_file
    from mqtool.manifest import manifest_rows

    for p in paths:
        if not os.path.lexists(p):
            raise MqToolError("no such file or directory", p)
    with open_output_file(out, list(paths), force) as f:
        for p in paths:
            for row in manifest_rows(p):
                f.write((render.dumps(row) + "\n").encode("utf-8", "surrogateescape"))


# ---- hash -----------------------------------------------------------------------------------

@cli.command("hash")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@JSON_OPT
@click.option("--sha256sum", "sums", is_flag=True, help="Print `sha256sum -c` lines (paths relative to each root).")
@guarded
def hash_cmd(paths, as_json, sums):
    """sha256 manifest of a store (any family, any file): path, size, mtime, sha256 of every file.

    Proves what was examined. Files are read read-only; FIFOs, devices and unreadable entries are listed
    without a hash (exit 1 when any file could not be hashed).

    \b
    Examples:
      mqtool hash store/ --json > store.manifest.ndjson
      mqtool hash store/ --sha256sum > SHA256SUMS && (cd store && sha256sum -c ../SHA256SUMS)
    """
    from mqtool.manifest import manifest_rows, sha256sum_lines

    code = EXIT_OK
    for p in paths:
        if not os.path.lexists(p):
            raise MqToolError("no such file or directory", p)
        summary = {}

        def rows(p=p, summary=summary):
            for r in manifest_rows(p):
                if r["kind"] == "manifest":
                    summary.update(r)
                    if not render.want_json(as_json) and not sums:
                        render.say(f"{r['files']} files, {r['bytes']} bytes, "
                                   f"{r['unhashed']} not hashed; manifest digest {r['digest']}")
                        continue
                yield r

        if sums:
            for line in sha256sum_lines(rows(), for_terminal=render.stdout_is_tty()):
                sys.stdout.write(line)
            sys.stdout.flush()
        else:
            render.emit(rows(), [render.Column("path", "Path"), render.Column("type", "Type"),
                                 render.Column("size", "Size", justify="right"),
                                 render.Column("mtime", "Modified (UTC)", no_wrap=True),
                                 render.Column("sha256", "sha256"),
                                 render.Column("error", "Error")], as_json, title=f"manifest {p}")
        if summary.get("unhashed"):
            code = EXIT_FINDINGS
    sys.exit(code)


# ---- rebuild-index --------------------------------------------------------------------------

@cli.command("rebuild-index")
@click.argument("store", type=click.Path())
@FORMAT_OPT
@JSON_OPT
@click.option("--out", type=click.Path(), help="Output directory (must not be inside the store).")
@click.option("--force", is_flag=True, help="Allow a non-empty --out / overwrite files there.")
@click.option("--compare", is_flag=True, help="Compare the rebuild with the store's own index files.")
@click.option("--write-checkpoint", is_flag=True,
              help="Also write a checkpoint consistent with the rebuilt files. RocketMQ: 4096 bytes; "
              "physicMsgTimestamp = store time of the last message, logicsMsgTimestamp = of the last message given "
              "a consumequeue unit, indexMsgTimestamp = endTimestamp of the last full index file, "
              "masterFlushedOffset = confirmPhyOffset = 0.")
@click.option("--trim", is_flag=True, help="Do not zero-fill the last file to its full size.")
@click.option("--preallocate", is_flag=True, help="Kafka: leave indexes preallocated as a running broker does.")
@click.option("--with-index", is_flag=True, help="LiteMQ: also write the key index file in LiteMQ's format.")
@click.option("--no-store-hints", is_flag=True,
              help="LiteMQ: rebuild from the commitlog alone (no commit positions / entry times from the store).")
@SIZE_OPTS
@guarded
def rebuild_index(store, fmt, as_json, **kw):
    """Rebuild index files from the log, into a separate directory, never in place.

    RocketMQ: consumequeue/ and index/ from the commitlog. Index file names are the broker's creation
    time, which the commitlog cannot tell: mqtool names each file from its first entry's store timestamp
    (yyyyMMddHHmmssSSS, UTC). LiteMQ: consumequeue (and its index format on request). Kafka: .index,
    .timeindex and .txnindex from each .log.

    \b
    Examples:
      mqtool rebuild-index store/ --out /tmp/rebuilt
      mqtool rebuild-index store/ --compare          # exit 0 identical, 1 differs
    """
    _fields_need_json(render.want_json(as_json), "rebuild-index")
    family, ops = _ops(store, fmt)
    opts = RebuildOptions(**kw)
    if not opts.out and not opts.compare:
        raise click.UsageError("give --out DIR, --compare, or both")
    findings, summary_fn = ops.rebuild(store, opts)
    s = render.render_verify(findings, summary_fn, as_json, store=store, family=family)
    sys.exit(EXIT_FINDINGS if (s.errors or s.warnings) and opts.compare else EXIT_OK)


# ---- query ----------------------------------------------------------------------------------

@cli.command("query")
@click.argument("stores", nargs=-1, required=True, type=click.Path())
@FORMAT_OPT
@JSON_OPT
@click.option("--key", help="Business key (KEYS), through the index files.")
@click.option("--unique-key", help="Client message id (UNIQ_KEY).")
@click.option("--msg-id", help="Broker offsetMsgId (store host + physical offset).")
@click.option("--offset", type=NON_NEGATIVE, help="Message starting at this global offset (Kafka: this offset).")
@click.option("--containing", is_flag=True, help="With --offset: the message that contains the offset.")
@click.option("--topic", help="Topic (narrows --key/--unique-key; required with --queue).")
@click.option("--queue", type=NON_NEGATIVE, help="Queue id (with --topic and --queue-offset).")
@click.option("--queue-offset", type=NON_NEGATIVE, help="Logical offset in the queue.")
@click.option("--count", type=POSITIVE, default=1, show_default=True, help="With --queue-offset: how many.")
@click.option("--time-from", help="Store time from (epoch ms or ISO-8601).")
@click.option("--time-to", help="Store time to (epoch ms or ISO-8601).")
@click.option("--begin", help="With --key: earliest store time (epoch ms or ISO-8601).")
@click.option("--end", help="With --key: latest store time (epoch ms or ISO-8601).")
@click.option("--max", type=POSITIVE, default=64, show_default=True, help="At most N results for --key.")
@click.option("--scan", is_flag=True, help="Full scan instead of the index files.")
@click.option("--include-stale", is_flag=True,
              help="LiteMQ: --key/--msg-id/--topic also search stale records of an older run (marked stale).")
@click.option("--timestamp", help="Kafka: first batch with max timestamp >= this (epoch ms or ISO-8601).")
@click.option("--producer-id", type=int, help="Kafka: batches of this producer id.")
@click.option("--unconsumed-by", "unconsumed_by", metavar="GROUP",
              help="The messages after this consumer group's committed offset in every queue/partition, and a "
                   "count per queue (offsets from the store, or --offsets).")
@click.option("--offsets", "offsets_file", type=click.Path(),
              help="With --unconsumed-by: committed offsets from this JSON file, {group: {topic: {queue: offset}}} "
                   "(or RocketMQ's consumerOffset.json), instead of the store's own.")
@click.option("--limit", type=NON_NEGATIVE, help="With --unconsumed-by: at most N message rows.")
@BODY_OPT
@ENGINE_OPT
@MASTER_OPT
@SIZE_OPTS
@guarded
def query(stores, fmt, as_json, engine, master, **kw):
    """Find messages offline by key, unique key, message id, offset, queue position or time.

    A query that finds nothing exits 1 (like grep).

    \b
    Examples:
      mqtool query store/ --key orderA-17
      mqtool query store/ --msg-id 0A00000500002A9F0000000000000000
      mqtool query store/ --topic TopicA --queue 0 --queue-offset 5 --count 3
      mqtool query store/ --time-from 2026-11-22T09:00:00Z --time-to 2026-11-22T09:10:00Z
      mqtool query store/ --unconsumed-by ConsumerGroupA --limit 100
    """
    group, offsets_file, limit = kw.pop("unconsumed_by"), kw.pop("offsets_file"), kw.pop("limit")
    if group is None:
        if offsets_file is not None or limit is not None:
            raise click.UsageError("--offsets and --limit go with --unconsumed-by")
    else:
        if engine == "spark":
            render.say("note: --unconsumed-by runs embedded (--engine spark ignored)")
        _unconsumed(stores, fmt, as_json, group, offsets_file, limit, kw)
    for k in ("time_from", "time_to", "begin", "end", "timestamp"):
        kw[k] = parse_time(kw[k])
    opts = QueryOptions(**kw)
    stats = ScanStats()
    if engine == "spark" and detect(stores[0], fmt) == "kafka":
        # Kafka key queries have their own rows (partition, transaction state): they run embedded
        render.say("note: Kafka queries run embedded (--engine spark ignored)")
        engine = "local"
    if engine == "spark":
        from mqtool.spark.fleet import query_columns, query_rows
        from mqtool.spark.session import get_session

        family = detect(stores[0], fmt)
        rows = query_rows(get_session(master), list(stores), fmt, opts)
        columns = query_columns(family, opts.body)
    else:
        columns, rows = None, []
        for store in stores:
            family, ops = _ops(store, fmt)
            cols, r = ops.query(store, opts, stats)
            columns = columns or cols
            rows = r if len(stores) == 1 else _chain(rows, r)
    if len(stores) == 1:
        render.set_base(stores[0])
    n = render.emit(rows, columns, as_json)
    code = _report_stats(stats, stores[0])
    if n == 0:
        render.say("no message found")
        h = hints.query_found_nothing(stores[0], bool((opts.key or opts.unique_key) and not opts.scan
                                                      and not stats.scanned))
        if h:
            render.hint(h)
        sys.exit(EXIT_FINDINGS)
    sys.exit(code)


def _chain(a, b):
    yield from a
    yield from b


def _unconsumed(stores, fmt, as_json, group, offsets_file, limit, kw) -> None:
    """``query --unconsumed-by GROUP``: the family's message rows (plus group, committed_offset), then one
    summary per committed queue (NDJSON rows ``kind: "unconsumed-summary"``, or a table). Exit 0 (1 on damage
    met, or a group the store does not know; 2 without offsets)."""
    from mqtool.lag import SUMMARY_COLUMNS, offsets_file as read_offsets

    chosen = [k for k in ("key", "unique_key", "msg_id", "offset", "queue", "queue_offset", "time_from",
                          "time_to", "timestamp", "producer_id") if kw.get(k) is not None]
    if chosen:
        raise click.UsageError(f"--unconsumed-by takes no other selector (got --{chosen[0].replace('_', '-')})")
    opts = QueryOptions(**kw)
    offsets = read_offsets(offsets_file) if offsets_file is not None else None
    stats = ScanStats()
    code = EXIT_OK
    for store in stores:
        family = detect(store, fmt)
        cols, queues, rows = family_module(family, "lag").unconsumed(store, group, opts, stats, limit, offsets)
        render.set_base(store)
        n = render.emit(rows, cols + [render.Column("committed_offset", "Committed", justify="right")], as_json,
                        title=f"Unconsumed by {group}")
        summary = [q.to_row() for q in queues]
        if render.output_mode(as_json) == "json":
            render.write_ndjson(summary)
        elif render.output_mode(as_json) not in ("csv", "tsv"):
            render.render_table(summary, SUMMARY_COLUMNS, title=f"Per {get_family(family).unit}: committed offset "
                                f"and what is after it ({group})")
        total = sum(q.unconsumed or 0 for q in queues)
        unknown = sum(q.unconsumed is None for q in queues)
        if n == 0 and not render.quiet():
            render.say(f"{total} unconsumed by {group} per the queue ends, but none of them could be read" if total
                       else f"nothing unconsumed by {group}" if not unknown else
                       f"what {group} did not consume is unknown in {unknown} of {len(queues)} queue(s) (see note)")
        code = max(code, _report_stats(stats, store))
    sys.exit(code)


# ---- export ---------------------------------------------------------------------------------

@cli.command("export")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--to", "out", required=True, type=click.Path(),
              help="Output dataset directory (e.g. all.parquet): store=…/topic=…/part-*.parquet.")
@FORMAT_OPT
@ENGINE_OPT
@MASTER_OPT
@SPLIT_OPT
@JOBS_OPT
@click.option("--findings", is_flag=True, help="Also write verify findings under OUT/_findings/store=…/.")
@BODY_OPT
@click.option("--force", is_flag=True,
              help="Allow a non-empty --to directory; a store exported there before is replaced.")
@click.option("--partition-size", help="--engine spark: pack small segments into tasks of about this size "
                                       "(default: --split-size when given, else 128M).")
@click.option("--max-partitions", type=click.IntRange(min=1), help="--engine spark: at most this many tasks.")
@click.option("--json", "as_json", is_flag=True, help="Also print the counts as one NDJSON row on stdout.")
@SIZE_OPTS
@guarded
def export(paths, out, fmt, engine, master, split_size, jobs, findings, body, force, partition_size,
           max_partitions, as_json, **sizes):
    """Messages of many stores as a Parquet dataset partitioned by store and topic.

    Columns are those of `dump commitlog --json` of every family in one schema (plus `family`), with
    `store` (the store's absolute path) and `topic` as partition columns. Read it with Spark
    (spark.read.parquet(OUT)), pyarrow or DuckDB. The local engine (pip install 'mqtool[parquet]') runs
    the byte ranges in --jobs worker processes, each writing its own part files; the dataset appears only
    when complete. --jobs does not apply to --engine spark.

    \b
    Examples:
      mqtool export /data/broker-*/store --to all.parquet
      mqtool export /data/broker-*/store --to all.parquet --engine spark --findings
      mqtool export store/ --to out.parquet --engine spark --master spark://head:7077
    """
    from mqtool import export as X

    as_json = as_json or render._state["as"] == "json"
    _fields_need_json(as_json, "export")
    split = _size(split_size)

    def run(to, force):
        if engine == "spark":
            return X.export_spark(paths, to, fmt, split, body, findings, force, master=master, sizes=sizes,
                                  partition_size=_size(partition_size), max_partitions=max_partitions)
        return X.export_local(paths, to, fmt, split, body, findings, force, jobs=jobs, sizes=sizes)

    if _is_url(out):        # written locally, then uploaded under a temporary prefix and copied into place
        counts = _remote().export_to(out, force, lambda local: run(local, True))
    else:
        counts = run(out, force)
    notes = counts.pop("notes", [])     # damage of a store as a whole (Kafka segment-gap), worded as dump words it
    if as_json:     # rows, messages (Kafka records included), Kafka batches and their records, findings, ...
        render.write_ndjson_plain_first([{"kind": "export", "to": str(out), **counts}])
    if not render.quiet():
        for n in notes:
            render.say(n)
    if not render._state["quiet"]:
        # a Kafka row is a batch (its records are counted, not written one per row)
        plain = counts["messages"] - counts.get("records", 0)
        what = ([f"{plain} messages"] if plain or not counts.get("batches") else []) + \
            ([f"{counts['batches']} Kafka batches of {counts['records']} records"] if counts.get("batches") else [])
        render.say(f"exported {' and '.join(what)} ({counts['rows']} rows) from {counts['stores']} "
                   f"store(s) to {out}" + (f", {counts['findings']} finding rows in {out}/_findings" if findings else ""))
    if counts.get("damaged"):
        render.say(f"{counts['damaged']} damaged range(s) skipped (mqtool verify store tells what and where)")
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


@cli.command("decode-msgid")
@click.argument("msg_id")
@JSON_OPT
@guarded
def decode_msgid(msg_id, as_json):
    """What a RocketMQ offsetMsgId or unique key (UNIQ_KEY) encodes, without a store.

    \b
    Example:
      mqtool decode-msgid 0A00000500002A9F0000000000000000
    """
    from mqtool.rocketmq.msgid import decode_any

    row = decode_any(msg_id)
    render.emit([row], render.key_columns(row), as_json)


# ---- inspect --------------------------------------------------------------------------------

@cli.command("inspect")
@click.argument("path", type=click.Path())
@click.option("--offset", type=NON_NEGATIVE,
              help="The record at this store offset: RocketMQ/LiteMQ the global commitlog offset, Kafka the "
                   "record offset (its batch is shown, the record marked). PATH: a store, commitlog dir, Kafka "
                   "partition dir or one segment file.")
@click.option("--position", type=NON_NEGATIVE, help="The record at this byte position of the file PATH.")
@FORMAT_OPT
@JSON_OPT
@guarded
def inspect_cmd(path, offset, position, fmt, as_json):
    """One record field by field, from the format's schema: each field's position, size, raw bytes and
    value, nested fields (RocketMQ properties, Kafka records and their headers, LiteMQ strings) indented,
    and every check verify makes on it (lengths, magic, CRC, stored offset, counts) with expected and
    actual values. On a damaged record: how far the schema matches and where it breaks.

    On a terminal: a hexdump with each field's bytes in the colour of its number, then the field list.
    NDJSON: one row per field (kind "field"), then one summary row (kind "record"). Exit 0 when every
    check passes, 1 when one fails or the record breaks off, 2 when no file holds the offset.

    \b
    Examples:
      mqtool inspect /data/rocketmq/store --offset 1048576
      mqtool inspect store/commitlog/00000000000000000000 --position 587
      mqtool inspect /var/kafka-logs/orders-0 --offset 42 --json | jq 'select(.ok == false)'
    """
    if (offset is None) == (position is None):
        raise click.UsageError("give --offset N or --position P (one of them)")
    _fields_need_json(render.want_json(as_json), "inspect")
    family = detect(path, fmt)
    ins = family_module(family, "inspect").inspect(path, offset=offset, position=position)
    if render.want_json(as_json):
        render.write_ndjson(ins.rows())
    else:
        from mqtool.render_inspect import render_inspection

        render_inspection(ins)
    sys.exit(EXIT_OK if ins.ok else EXIT_FINDINGS)
# ---- diff -----------------------------------------------------------------------------------

DIFF_COLUMNS = [
    render.Column("what", "What", priority=0, no_wrap=True),
    render.Column("where", "Where", max_width=32, priority=1),
    render.Column("offset", "Offset", justify="right", priority=0),
    render.Column("last_offset", "Last offset", justify="right", priority=2),
    render.Column("count", "Count", justify="right", priority=2),
    render.Column("field", "Field", priority=0),
    render.Column("a", "A", max_width=40, priority=1),
    render.Column("b", "B", max_width=40, priority=1),
]


@cli.command("diff")
@click.argument("stores", nargs=2, type=click.Path())
@FORMAT_OPT
@JSON_OPT
@click.option("--limit", type=NON_NEGATIVE, help="At most N difference rows (the summary counts them all).")
@click.option("--log-only", is_flag=True, help="Compare the logs only, not consume queues and index files.")
@guarded
def diff_cmd(stores, fmt, as_json, limit, log_only):
    """Compare two copies of one store: a master and its slave, a Kafka leader and follower, a store and its
    backup.

    A and B are two store roots, two commitlog directories (RocketMQ), two partition directories or two log
    dirs holding the same partitions (Kafka), or two data directories (LiteMQ). The logs are aligned by
    offset (RocketMQ and LiteMQ physical offset, Kafka record offset) and compared byte by byte first; only
    what differs is decoded. Rows: `content` (a record at one offset differs; `field` says which), `only_in_a`
    / `only_in_b` (one row per run of records on one side only, with its count and first and last offset),
    `damaged`, and for consume queues and index files `cq`, `cq_only_in_a`/`_b`, `index`,
    `index_only_in_a`/`_b`. Then a summary (NDJSON: a row with `kind` summary). Exit 0 identical, 1
    different, 2 usage or I/O error (also: A and B of different families).

    \b
    Examples:
      mqtool diff /data/master/store /data/slave/store
      mqtool diff leader/orders-0 follower/orders-0 --json | jq 'select(.kind=="summary")'
      mqtool diff a/store b/store --log-only --limit 20
    """
    from mqtool.diff import DiffOptions, diff

    a, b = stores
    family, rows, summary_fn = diff(a, b, fmt, DiffOptions(limit=limit, index=not log_only))
    as_ndjson = render.want_json(as_json)
    render.emit(rows, DIFF_COLUMNS, as_json, title=f"diff {a} {b}")
    s = summary_fn()
    if as_ndjson:
        render.write_ndjson([s])
    elif not render.quiet():
        if s["identical"]:
            render.say("identical")
        else:
            first = s["first_divergence"]
            render.say(f"different: {s['differing']} record(s) differ, {s['only_in_a']} only in A, "
                       f"{s['only_in_b']} only in B, {s['damaged']} damaged range(s); consume queue "
                       f"{s['cq_differing']}, index {s['index_differing']} difference(s)"
                       + (f"; first divergence at offset {first}" if first is not None else "")
                       + (f" ({s['first_divergence_where']})" if s["first_divergence_where"] else "")
                       + (f"; {s['difference_rows'] - limit} more row(s) beyond --limit"
                          if limit is not None and s["difference_rows"] > limit else ""))
    sys.exit(EXIT_OK if s["identical"] else EXIT_FINDINGS)


# ---- explain --------------------------------------------------------------------------------

@cli.command("explain")
@click.argument("code", required=False)
@click.option("--list", "as_list", is_flag=True, help="List every finding code (family, severity, meaning).")
@click.option("--json", "as_json", is_flag=True, help="NDJSON (one object per code) instead of text.")
def explain(code, as_list, as_json):
    """What a finding code means, its family and severity, likely causes and what to do next.

    \b
    Examples:
      mqtool explain cq-dangling
      mqtool explain kafka.segment-gap
      mqtool explain --list
      mqtool explain --list --json | jq -r 'select(.severity=="error") | .code'
    """
    from mqtool.codes import REGISTRY, lookup

    if as_list == bool(code):
        raise click.UsageError("give a CODE, or --list")
    as_json = as_json or render._state["as"] == "json"
    _fields_need_json(as_json, "explain")
    if as_list:
        rows = [c.to_dict() for c in REGISTRY.values()]
        if as_json:
            render.write_ndjson(rows)
        else:
            for r in rows:      # one line each, cut to 80 columns (`mqtool explain CODE` has the whole text)
                line = f"{r['code']:<34} {'/'.join(s[0].upper() for s in r['severities']):<4} {r['meaning']}"
                click.echo(line if len(line) <= 80 else line[:79] + "…")
        return
    info = lookup(code)
    if info is None:
        near = sorted(c for c in REGISTRY if code.strip(".").split(".")[-1] in c)[:8]
        _fail(f"unknown finding code {code!r}" + (f"; similar: {', '.join(near)}" if near else "")
              + " (mqtool explain --list shows all)")
    if as_json:
        render.write_ndjson([info.to_dict()])
        return
    import textwrap

    def para(label, text):
        return textwrap.fill(text, 78, initial_indent=f"  {label:<10}", subsequent_indent=" " * 12,
                             break_on_hyphens=False)

    click.echo("\n".join([info.code, "", textwrap.fill(info.meaning + ".", 78, initial_indent="  ",
                                                      subsequent_indent="  "), "",
                          para("family", ", ".join(info.families)), para("severity", " or ".join(info.severities)),
                          para("kind", info.klass), para("causes", info.causes), para("next", info.action)]))


# ---- carve ----------------------------------------------------------------------------------

def _carve_families(values) -> tuple:
    from mqtool.carve import FAMILIES as CARVE_FAMILIES

    names = [v.strip().lower() for value in values for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in CARVE_FAMILIES]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is none of {', '.join(CARVE_FAMILIES)}", param_hint="'--family'")
    return tuple(f for f in CARVE_FAMILIES if f in names) if names else CARVE_FAMILIES


@cli.command("carve")
@click.argument("images", nargs=-1, required=True, type=click.Path())
@click.option("--family", "families", multiple=True, metavar="NAME[,NAME]",
              help="Search only for these families: rocketmq, kafka, litemq (repeat or comma-separate; "
                   "default all).")
@click.option("--deep", is_flag=True, help="Kafka: also a row for every record inside each carved batch.")
@click.option("--max-message-size", type=MESSAGE_SIZE, default=4 * 1024 * 1024, show_default=True,
              help="RocketMQ: the broker's maxMessageSize; larger units are not carved.")
@click.option("--salvage-out", type=click.Path(),
              help="Write the carved records into DIR as stores of their family (rocketmq/, kafka/, litemq/) "
                   "that mqtool reads back.")
@click.option("--force", is_flag=True, help="Allow --salvage-out into a non-empty directory (overwrite).")
@JSON_OPT
@guarded
def carve_cmd(images, families, deep, max_message_size, salvage_out, force, as_json):
    """Find records of every family in arbitrary bytes: disk images, unallocated space, core files,
    fragments of deleted segments, at any byte alignment.

    Reports RocketMQ units (magic, size bounds, tail framing, body CRC, PHYSICALOFFSET not negative), Kafka v2
    batches (shape, CRC-32C) and legacy v0/v1 messages (CRC-32), and LiteMQ records (magic, length equal to
    the encoded fields). Only records that pass every check are shown: random bytes give none. Rows:
    family, kind, image, image_position, then the family's dump fields, with offset the offset the record
    claims (RocketMQ PHYSICALOFFSET, Kafka base offset / record offset; LiteMQ records claim none: null).
    A summary follows (NDJSON: a last row of kind "summary"). Exit 0 when something was carved, 1 when
    nothing was, 2 on a usage or I/O error.

    \b
    Examples:
      mqtool carve disk.img
      mqtool carve --family kafka --deep unallocated.bin --json > carved.ndjson
      mqtool carve disk.img --salvage-out recovered/ && mqtool dump commitlog recovered/rocketmq
    """
    from mqtool.carve import CarveSummary, carve
    from mqtool.options import CarveOptions

    opts = CarveOptions(families=_carve_families(families), deep=deep, max_message_size=max_message_size,
                        salvage_out=salvage_out, force=force, ndjson=render.output_mode(as_json) == "json")
    summary = CarveSummary()
    columns = [render.Column("family", "Family"), render.Column("kind", "Kind"),
               render.Column("image_position", "Image pos", justify="right", priority=0),
               render.Column("offset", "Offset", justify="right", priority=0),
               render.Column("size", "Size", justify="right"), render.Column("topic", "Topic"),
               render.Column("keys", "Keys"), render.Column("tags", "Tags"),
               render.Column("count", "N", justify="right"), render.Column("codec", "Codec"),
               render.Column("store_timestamp", "Stored", fmt=render.iso_ms),
               render.Column("timestamp", "Timestamp", fmt=render.iso_ms),
               render.Column("image", "Image", priority=8)]
    rows = carve(list(images), opts, summary)
    if render.want_json(as_json):
        render.emit(rows, columns, as_json)
        render.write_ndjson([summary.to_dict()])
    else:
        render.emit(rows, columns, as_json, title="carved records")
        if not render.quiet():
            found = ", ".join(f"{f} {n}" for f, n in summary.carved.items())
            render.say(f"carved {summary.total} record(s) in {summary.images} image(s), "
                       f"{summary.bytes_scanned} bytes scanned: {found}"
                       + (f"; salvaged into {summary.salvage_out}" if summary.salvage_out else ""))
    unchecked = {f: k for f, k in summary.unchecked.items() if k}
    if unchecked and not render.quiet():
        render.say("note: the image holds unusually many plausible headers claiming long lengths (crafted?): "
                   + ", ".join(f"{f} {k}" for f, k in unchecked.items())
                   + " candidate(s) past the checking budget were not checked (`unchecked` in the summary)")
    undecodable = sum(summary.undecodable.values())
    if undecodable and not render.quiet():
        render.say(f"note: the records inside {undecodable} carved unit(s) could not be decoded (`undecodable` in "
                   f"the summary); the first: {summary.first_undecodable}")
    sys.exit(EXIT_OK if summary.total else EXIT_FINDINGS)


# ---- completion -----------------------------------------------------------------------------

@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell):
    """Print the shell completion script for bash, zsh or fish (commands, options, file paths).

    \b
    Examples:
      eval "$(mqtool completion bash)"                      # add to ~/.bashrc
      eval "$(mqtool completion zsh)"                       # add to ~/.zshrc
      mqtool completion fish > ~/.config/fish/completions/mqtool.fish
    """
    from click.shell_completion import get_completion_class

    comp = get_completion_class(shell)(cli, {}, "mqtool", "_MQTOOL_COMPLETE")
    sys.stdout.write(comp.source())


_add_global_options(cli)       # last: every command defined above gets them


def main(argv=None) -> None:
    """Console entry point."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        cli.main(args=argv, prog_name="mqtool", standalone_mode=True)
    except SystemExit:
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
