"""The S3 side of the remote-storage tests: a moto server on 127.0.0.1 (fixture ``s3``), uploads of local
stores, the stores used. Shared by tests/test_common_remote.py and tests/test_common_remote_spark.py."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import FIXTURES, require_realdata

_CI = os.environ.get("CI", "").lower() == "true"
if not _CI:         # under CI=true a missing piece fails (.ci/run installs the dev and remote extras)
    for _m in ("moto.server", "boto3", "s3fs"):
        pytest.importorskip(_m)
import boto3  # noqa: E402
import moto.server as moto_server  # noqa: E402
import s3fs  # noqa: E402,F401

BUCKET = "evidence"


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on the loopback port conftest chose (and pointed AWS_ENDPOINT_URL and test
    credentials at, before any Spark session started)."""
    port = int(os.environ["MQTOOL_TEST_S3_PORT"])
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    client.create_bucket(Bucket=BUCKET)
    try:
        yield client
    finally:
        server.stop()


def upload(client, local: Path, prefix: str) -> str:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            client.upload_file(str(p), BUCKET, f"{prefix}/{p.relative_to(local).as_posix()}")
    return f"s3://{BUCKET}/{prefix}"


def _stores():
    return {
        "rocketmq": require_realdata("rocketmq", "gen-5.1.4-clean", "store"),
        "litemq": require_realdata("litemq", "clean", "data", "broker"),
        "kafka": FIXTURES / "kafka" / "logdir",
    }
