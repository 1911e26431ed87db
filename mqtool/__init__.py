"""mqtool: offline forensic toolkit for message-broker stores (RocketMQ, LiteMQ, Kafka)."""

__version__ = "0.1.0"
