"""Petastorm's pickled ``_common_metadata`` as an attack (issue #22): the restricted unpickler bounds size,
nesting depth and elements (counting memo-shared ones each time) before loading anything, so an 830-byte
"billion laughs" list or a 200,000-deep list is a ``FormatError`` at once: no hang in ``str()``, no raw
``RecursionError``, and ``register`` leaves nothing behind."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import dal
from dal import ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.catalog.errors import DatasetNotFound
from dal.errors import FormatError
from dal.formats.petastorm.unischema import UNISCHEMA_KEY, dumps_unischema, loads_rowgroup_indexes, loads_unischema

SCHEMA = TensorSchema("Example", [TensorField("id", np.int64, (), ScalarCodec())])
NAME = b"X" + struct.pack("<I", 7) + b"Example"  # BINUNICODE 'Example': the Unischema's _name


def laughs(levels: int = 50, fanout: int = 4) -> bytes:
    """A list of ``fanout`` copies of the list one level down, ``levels`` deep, each level memoised once:
    fanout**levels elements written out (4**50 = 2**100) in a few hundred bytes."""
    out = b"X\x03\x00\x00\x00lolq\x000"  # 'lol', memo 0, popped
    for level in range(1, levels + 1):
        out += b"](" + (b"h" + bytes([level - 1])) * fanout + b"eq" + bytes([level]) + (b"0" if level < levels else b"")
    return out


def deep(levels: int) -> bytes:
    return b"]" * levels + b"a" * (levels - 1)


def with_name(value: bytes) -> bytes:
    blob = dumps_unischema(SCHEMA)
    assert blob.count(NAME) == 1
    return blob.replace(NAME, value)


def run_bounded(code: str, stdin: bytes = b"", timeout: float = 60) -> str:
    """``code`` in a fresh interpreter, killed after ``timeout`` s (the old unpickler hung): its last line."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], input=stdin, capture_output=True, timeout=timeout
    )
    return (proc.stdout + proc.stderr).decode(errors="replace").strip().splitlines()[-1]


def test_the_bombs_are_small() -> None:
    assert len(laughs()) <= 830  # the size the adversarial run used
    assert loads_unischema(with_name(NAME)) == SCHEMA


@pytest.mark.parametrize(
    "payload, why",
    [
        (laughs(), "elements"),
        (laughs(30, 10), "elements"),
        (deep(200_000), "nested deeper"),
        (deep(1000), "nested deeper"),
    ],
    ids=["laughs-4x50", "laughs-10x30", "deep-200k", "deep-1000"],
)
def test_bombs_in_the_schema_are_format_errors_at_once(payload: bytes, why: str) -> None:
    blob = with_name(payload)
    line = run_bounded(
        """
        import sys
        from dal.errors import FormatError
        from dal.formats.petastorm.unischema import loads_unischema
        try:
            loads_unischema(sys.stdin.buffer.read())
        except FormatError as e:
            print("FormatError", str(e)[:300])
        """,
        blob,
    )
    assert line.startswith("FormatError petastorm schema metadata refused:") and why in line, line
    with pytest.raises(FormatError, match=why):
        loads_rowgroup_indexes(b"\x80\x02" + payload + b".")


def test_a_shared_but_small_structure_is_fine() -> None:
    """Memo sharing itself is normal (petastorm pickles share strings): only the written-out size counts."""
    assert loads_unischema(with_name(b"X\x07\x00\x00\x00Exampleq\x00")) == SCHEMA
    with pytest.raises(FormatError, match="name"):  # a list as a name is refused, not str()-ed
        loads_unischema(with_name(laughs(3, 2)))


def test_malformed_stacks_are_format_errors() -> None:
    for blob in (b"\x80\x02a.", b"\x80\x02e.", b"\x80\x02h\x05.", b"\x80\x020."):
        with pytest.raises(FormatError, match="petastorm schema metadata refused"):
            loads_unischema(blob)


def test_register_of_a_bomb_fails_fast_and_records_nothing(sqlite_env: Catalog, tmp_path: Path) -> None:
    where = tmp_path / "bomb"
    dal.write({"id": np.arange(4)}, "p.src", format="petastorm", schema=SCHEMA, path=str(where))
    metas = sorted(where.rglob("_common_metadata"))
    assert metas
    for meta in metas:
        schema = pq.read_schema(meta)
        pq.write_metadata(schema.with_metadata({**schema.metadata, UNISCHEMA_KEY: with_name(laughs())}), meta)
    line = run_bounded(
        f"""
        import dal
        from dal.errors import FormatError
        try:
            dal.register("p.bomb", {str(where)!r}, format="petastorm", catalog={sqlite_env.url!r})
        except FormatError as e:
            print("FormatError", str(e)[:300])
        """
    )
    assert line.startswith("FormatError") and "elements" in line, line
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("p.bomb")
