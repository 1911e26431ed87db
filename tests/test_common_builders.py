"""One encoder per format for every test, fuzz target and bench input: RocketMQ units, Kafka batches, legacy
messages and records and LiteMQ records are built by the fixture builders (fixtures/build_*.py, reached from
tests through tests/builders.py, from bench/ through bench/fixture_builders.py), nowhere else."""
from __future__ import annotations

import re

from conftest import ROOT

# a unit/batch/record written from field values: a schema's build() (Kafka and LiteMQ records: from a dict
# literal; re-encoding a parsed record to learn its length stays allowed) or a pack() of a unit's fixed part
ENCODERS = re.compile(r"\b(?:(?:MessageV1|MessageV2|MESSAGE_SCHEMAS\[[^\]]*\]|RecordBatch|RecordBatchHeader"
                      r"|LegacyMessage)\.build\(|Record\.build\(\s*dict\(|FIXED\.pack\()")


def _sources():
    for folder in ("tests", "fuzz", "bench", "fixtures"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def test_units_batches_and_records_are_encoded_only_by_the_fixture_builders():
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for rel, text in _sources() if not re.fullmatch(r"fixtures/build_\w+\.py", rel)
             and rel != "tests/test_common_builders.py" for m in ENCODERS.finditer(text)]
    assert found == [], "encode through tests/builders.py (fixtures/build_*.py) instead:\n" + "\n".join(found)


def test_the_rule_sees_an_encoder():
    assert ENCODERS.search('F.MESSAGE_SCHEMAS["v1"].build(dict(TOTALSIZE=1))')
    assert ENCODERS.search("K.RecordBatch.build(x)") and ENCODERS.search("FIXED.pack(*vals)")
    assert ENCODERS.search("K.Record.build(\n    dict(attributes=0))")
    assert not ENCODERS.search("len(K.Record.build(parsed))")
