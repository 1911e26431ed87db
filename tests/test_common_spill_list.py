"""mqtool.io.SpillList: appended, then read once in order; past its limit the items live in a temporary file
that is unlinked at once; pickled it is a plain list."""
from __future__ import annotations

import os
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.io import SpillList


@settings(max_examples=100, deadline=None)
@given(items=st.lists(st.one_of(st.integers(), st.text(max_size=5), st.tuples(st.integers(), st.binary(max_size=4))),
                      max_size=60),
       limit=st.integers(1, 8), chunked=st.booleans())
def test_reads_back_what_was_appended_in_order(items, limit, chunked):
    s = SpillList(limit)
    if chunked:
        s.extend(items)
    else:
        for x in items:
            s.append(x)
    assert len(s) == len(items) and list(s) == items
    assert len(s._mem) < limit                                  # the rest went to the file
    assert pickle.loads(pickle.dumps(s)) == items and type(pickle.loads(pickle.dumps(s))) is list
    s.close()


def test_the_file_is_never_a_name_on_disk(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    s = SpillList(2)
    s.extend(range(10))
    assert s._file is not None and os.listdir(tmp_path) == []     # unlinked at once (O_TMPFILE or unlink)
    assert list(s) == list(range(10))
    s.close()
    assert s._file is None
