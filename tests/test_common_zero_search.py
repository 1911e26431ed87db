"""``mqtool.io.last_nonzero`` / ``first_nonzero`` / ``first_nonzero_in`` against a plain byte-by-byte answer:
in-memory buffers with zero tails of every length around the search's piece sizes, and sparse files (holes)
read through a map."""
import os
import random

import pytest

from mqtool.io import first_nonzero, first_nonzero_in, last_nonzero, map_input, open_input

KIB = 1 << 10
MIB = 1 << 20


def _last(data: bytes, start: int, end: int) -> int:       # the whole range at once, no chunks, no holes
    kept = len(data[start:end].rstrip(b"\x00")) if end > start else 0
    return start + kept - 1 if kept else -1


def _first(data: bytes, start: int, end: int) -> int:
    piece = data[start:end] if end > start else b""
    kept = len(piece.lstrip(b"\x00"))
    return start + len(piece) - kept if kept else -1


# the last non-zero byte this far before the end: inside, at and past the first look at the tail (64 KiB),
# and past one 1 MiB chunk
TAILS = [0, 1, 7, 64 * KIB - 1, 64 * KIB, 64 * KIB + 1, 300 * KIB, MIB - 1, MIB, MIB + 5, 2 * MIB + 3]


@pytest.mark.parametrize("tail", TAILS)
def test_last_nonzero_in_memory(tail):
    rng = random.Random(tail)
    n = 3 * MIB
    data = bytearray(n)
    last = n - 1 - tail
    data[last] = rng.randrange(1, 256)
    for _ in range(20):                     # more non-zero bytes before it
        data[rng.randrange(0, last)] = rng.randrange(1, 256)
    data = bytes(data)
    for start, end in ((0, n), (0, last + 1), (last, n), (last + 1, n), (5, n - 3), (0, 0), (n, n)):
        assert last_nonzero(data, start, end) == _last(data, start, end), (start, end)


def test_all_zero_and_single_byte():
    z = bytes(2 * MIB + 17)
    assert last_nonzero(z, 0, len(z)) == -1
    assert first_nonzero(z, 0, len(z)) == -1
    for pos in (0, 1, 64 * KIB, MIB, len(z) - 1):
        b = bytearray(z)
        b[pos] = 1
        assert last_nonzero(bytes(b), 0, len(b)) == pos
        assert first_nonzero(bytes(b), 0, len(b)) == pos


@pytest.mark.parametrize("layout", [
    # (offset, length) of the non-zero runs in a 6 MB file; the rest is holes or written zeros
    [(0, 864 * KIB)],                                  # a consumequeue file: data first, then a hole
    [(0, 10)],
    [(2 * MIB, 100), (5 * MIB, 3)],                    # holes before, between and after
    [(0, 4 * KIB), (3 * MIB + 4095, 1)],
    [],                                                # only a hole
])
@pytest.mark.parametrize("zero_tail", [0, 4 * KIB, 200 * KIB])   # zeros written after the data (not a hole)
def test_sparse_files(tmp_path, layout, zero_tail):
    size = 6_000_000
    path = tmp_path / "f"
    with open(path, "wb") as f:
        f.truncate(size)
        rng = random.Random(len(layout) * 7 + zero_tail)
        for off, length in layout:
            f.seek(off)
            f.write(bytes(rng.randrange(1, 256) for _ in range(length)))
            if zero_tail and off + length + zero_tail <= size:
                f.write(bytes(zero_tail))
    data = path.read_bytes()
    with map_input(path, whole_limit=0) as mi:
        fd = mi.fileno() if mi.mapped else None
        for start, end in ((0, size), (0, size - 20), (MIB, size), (0, MIB)):
            assert last_nonzero(mi.buf, start, end, fd) == _last(data, start, end), (start, end)
            assert first_nonzero(mi.buf, start, end, fd) == _first(data, start, end), (start, end)
        assert last_nonzero(mi.buf, 0, size, None) == _last(data, 0, size)      # no fd: no hole search
    with open_input(path) as f:                     # the pread search (files past the address space)
        for start, end in ((0, size), (0, size - 20), (MIB, size), (0, MIB), (size - 5, size + 100)):
            assert first_nonzero_in(f, start, end) == _first(data, start, end), (start, end)
    os.remove(path)
