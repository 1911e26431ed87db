"""Build the optional compiled helpers (``mqtool/_native/*.c``).

Everything else is in pyproject.toml. Each helper is ``optional=True``: on a machine without a C compiler or
the Python headers the install still succeeds and mqtool runs its pure-Python paths (``mqtool.native``).
"""
import glob

from setuptools import Extension, setup

# One entry per helper module: (import name, C sources). Each is a drop-in for a pure-Python loop and is
# tested for equivalence against it (tests/test_native_*.py).
NATIVE_MODULES = [
    ("mqtool._native.probe", ["mqtool/_native/probe.c"]),
    # the one RocketMQ module: its parts verify, rebuild, dump and decode (mqtool/_native/rmqcore.h)
    ("mqtool._native.rmqcore", ["mqtool/_native/rmqcore.c", "mqtool/_native/rmqverify.c",
                                "mqtool/_native/rmqrebuild.c", "mqtool/_native/rmqdump.c",
                                "mqtool/_native/rmqjson.c", "mqtool/_native/rmqdecode.c"]),
    ("mqtool._native.kafka", ["mqtool/_native/kafka.c"]),
    ("mqtool._native.guard", ["mqtool/_native/guard.c"]),
]

setup(
    ext_modules=[
        Extension(name, sources, optional=True, extra_compile_args=["-O3", "-std=c11", "-Wall"],
                  depends=sorted(glob.glob("mqtool/_native/*.h")))   # shipped in sdists; edits rebuild
        for name, sources in NATIVE_MODULES
    ],
)
