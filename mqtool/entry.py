"""The part of the command line that needs no click: the error guard every command runs in, the engine call
of ``verify`` (which :mod:`mqtool.cli` runs too) and the start-up fast path of :mod:`mqtool.__main__`.

The most common small run, ``mqtool verify PART PATH...`` with no option but ``--json``, is parsed here and
run straight away (click and the whole command tree cost more than a small verify itself: issue #20 asks for
a small ``verify store`` within 3x of ``python -c pass``); everything else, ``--help`` included, goes to
:func:`mqtool.cli.main`. The fast path passes the values click would (``tests/test_common_cli.py`` checks
them against click's own parse of the same line).
"""
from __future__ import annotations

import errno
import os
import sys
from functools import wraps

from mqtool import render
from mqtool.detect import detect
from mqtool.errors import MqToolError, wrap_decode
from mqtool.families import family_module
from mqtool.options import VerifyOptions

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    render.say(message)
    sys.exit(code)


def guarded(fn):
    """Turn our errors into one stderr line + exit code; exit quietly on a closed pipe."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        undo = []       # remote inputs: output shows their URLs until the command ends (mqtool.remote)
        try:
            return _guarded_run(fn, args, kwargs, undo)
        finally:
            for u in undo:
                u()

    return wrapper


def _guarded_run(fn, args, kwargs, undo):
    """:func:`guarded`'s body (``undo`` gets what puts the output streams back)."""
    try:
        if _stage_remote_inputs(kwargs):
            undo.append(_remote().show_urls_on_streams())
        return fn(*args, **kwargs)
    except MqToolError as e:
        if getattr(e, "hint", None) and not render.quiet():
            render.say(str(e))
            render.hint(e.hint)
            sys.exit(e.exit_code)
        _fail(str(e), e.exit_code)
    except BrokenPipeError:
        _quiet_pipe_exit()
    except OSError as e:
        if e.errno == errno.EPIPE:
            _quiet_pipe_exit()
        _fail(f"{getattr(e, 'filename', None) or ''}{': ' if getattr(e, 'filename', None) else ''}"
              f"{e.strerror or e}", EXIT_USAGE)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except ValueError as e:
        _fail(str(e), EXIT_USAGE)
    except Exception as e:
        # a schema's parse (construct) that no decoder turned into a finding: a decode failure, one line
        if type(e).__module__.partition(".")[0] != "construct":
            raise
        _fail(str(wrap_decode(e)), EXIT_USAGE)


def _stage_remote_inputs(kwargs) -> bool:
    """Store arguments given as URLs (s3://, hdfs://, file://...) are read through their local shadow
    (:mod:`mqtool.remote`): the verbs then work unchanged and fetch only the bytes they open. True when one was."""
    staged = False
    for name in ("path", "store", "paths", "stores", "images"):
        v = kwargs.get(name)
        if isinstance(v, str) and _is_url(v):
            kwargs[name] = str(_remote().stage(v, render.say))
            staged = True
        elif isinstance(v, (tuple, list)) and any(_is_url(x) for x in v):
            kwargs[name] = type(v)(str(_remote().stage(x, render.say)) if _is_url(x) else x for x in v)
            staged = True
    return staged


def _is_url(v) -> bool:
    return isinstance(v, str) and "://" in v and _remote().is_remote(v)


def _remote():
    from mqtool import remote

    return remote


def _quiet_pipe_exit():
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        sys.exit(EXIT_OK)
    for out in (sys.stdout, sys.__stdout__):     # (stdout shown through mqtool.remote has no descriptor)
        try:
            os.dup2(devnull, out.fileno())
            break
        except (OSError, ValueError, AttributeError):
            continue
    sys.exit(EXIT_OK)


def _ops(path, fmt):
    family = detect(path, fmt)
    return family, family_module(family, "ops")


def run_verify(part: str, paths, fmt, as_json: bool, engine: str, master, all_findings: bool, table: bool,
               kw: dict) -> None:
    """``mqtool verify PART PATHS...``: verify each store, render its findings and summary, exit 0/1."""
    from mqtool.causes import Linker

    worst = EXIT_OK
    planned = None
    if engine == "spark":
        from mqtool.spark.session import get_context
        from mqtool.spark.verify import merged, verify_plans

        # every store in one Spark job; each store's findings are merged on the driver in its turn
        planned = iter(verify_plans(get_context(master), part, paths, fmt, VerifyOptions(**kw)))
    linker = Linker()           # ids unique over the whole run
    summaries = []
    for path in paths:
        family, ops = _ops(path, fmt)
        render.set_base(path)
        opts = VerifyOptions(**kw)
        findings, summary_fn = merged(next(planned)) if planned is not None else ops.verify(part, path, opts)
        if len(paths) > 1 and not render.want_json(as_json):
            render.stdout_console().rule(render.text(f"{family}: {path}"))
        s = render.render_verify(findings, summary_fn, as_json, linker=linker,
                                 view="table" if table else "compact", all_findings=all_findings,
                                 store=path, family=family)
        summaries.append(s)
        if s.errors:
            worst = EXIT_FINDINGS
    if len(summaries) > 1:
        render.render_total(summaries, as_json)
    if worst and part == "store":
        from mqtool import hints

        h = hints.verify_found_errors(paths, bool(kw.get("salvage_out")))
        if h:
            render.hint(h)
    sys.exit(worst)


# ---- the fast path ------------------------------------------------------------------------------------------

VERIFY_PARTS = ("store", "commitlog", "consumequeue", "index")
# what `mqtool verify PART PATH...` passes besides the paths when no option is given (= the click defaults)
VERIFY_DEFAULTS = {"fmt": None, "as_json": False, "engine": "local", "master": None, "manifest_out": None,
                   "all_findings": False, "table": False, "max_message_size": 4 * 1024 * 1024,
                   "salvage_out": None, "force": False, "deep": False, "jobs": 0, "split_size": None,
                   "broker_conf": None, "cq_file_size": None, "max_hash_slots": None, "max_index_num": None,
                   "index_interval_bytes": None}


def fast_verify_params(argv: list[str]) -> dict | None:
    """The parameters of ``verify PART PATH... [--json]`` (nothing else on the line), or None."""
    if len(argv) < 3 or argv[0] != "verify" or argv[1] not in VERIFY_PARTS or "_MQTOOL_COMPLETE" in os.environ:
        return None
    params = dict(VERIFY_DEFAULTS, paths=())
    paths = []
    for a in argv[2:]:
        if a == "--json":
            params["as_json"] = True
        elif a and not a.startswith("-") and "://" not in a:
            paths.append(a)
        else:               # any option, "--", a URL: click parses the line
            return None
    if not paths:
        return None
    params["paths"] = tuple(paths)
    return params


@guarded
def _fast_verify(part: str, paths, fmt, as_json, engine, master, manifest_out, all_findings, table, **kw):
    run_verify(part, paths, fmt, as_json, engine, master, all_findings, table, kw)


_REBUILD_FLAGS = ("--force", "--json", "--compare", "--write-checkpoint", "--trim")


def rebuild_store_arg(argv: list[str]) -> str | None:
    """The STORE of ``rebuild-index STORE`` with nothing else on the line but ``--out DIR`` and flags, or None."""
    if not argv or argv[0] != "rebuild-index" or "_MQTOOL_COMPLETE" in os.environ:
        return None
    stores = []
    args = iter(argv[1:])
    for a in args:
        if a == "--out":
            if next(args, None) is None:
                return None
        elif a.startswith("--out=") or a in _REBUILD_FLAGS:
            continue
        elif a and not a.startswith("-") and "://" not in a:
            stores.append(a)
        else:               # any other option, "--", a URL: nothing is started early
            return None
    return stores[0] if len(stores) == 1 else None


def start_early(args: list[str]):
    """Before click and the command load: a plain ``rebuild-index STORE --out DIR`` of a RocketMQ store starts
    parsing its commitlog now (:func:`mqtool.rocketmq.rebuild.native_lane.start_early`; the run takes the
    parsed ranges over). Returns what ends them if no run took them (call it when the command is over), or
    None when nothing was started."""
    path = rebuild_store_arg(args)
    if path is None:
        return None
    try:
        if detect(path) != "rocketmq":
            return None
    except Exception:       # noqa: BLE001 - the command reports it in its own place
        return None
    from mqtool.rocketmq.rebuild import native_lane

    native_lane.start_early(path)
    return native_lane.drop_early


def run_fast(args: list[str]) -> bool:
    """Run ``args`` through the fast path when it takes them (then it exits); False when click must parse."""
    params = fast_verify_params(args)
    if params is None:
        return False
    try:
        import _signal as signal    # the C module under ``signal`` (whose enum classes cost ~1 ms to build)
    except ImportError:             # pragma: no cover - another interpreter
        import signal
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    render.configure(no_color=False, quiet=False)       # as a fresh click invocation starts
    render.configure_output()
    _fast_verify(args[1], **params)
    return True
