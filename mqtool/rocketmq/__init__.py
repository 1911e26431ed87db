"""Apache RocketMQ family: layout, scanning, verify, rebuild, query over broker store files."""
