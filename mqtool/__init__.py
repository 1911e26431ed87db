"""mqtool: offline forensic toolkit for message-broker stores (RocketMQ, LiteMQ, Kafka)."""

__version__ = "0.1.0"

from mqtool import schemacache as _schemacache  # noqa: E402

_schemacache.install()      # formats.* modules serve their cached constants until a schema is needed
