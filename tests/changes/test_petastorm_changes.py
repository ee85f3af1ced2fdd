"""Change reads of Petastorm datasets dal writes: appends are their new files' rows, an overwrite (a write or
``dal optimize``'s compaction) the multiset difference of the two versions' rows, a schema merge projects the
earlier rows onto the new schema. Checked against the rows each version holds (``to_arrow``) and against
pyarrow reading the version directories' Parquet files."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.formats.changes import DiffUnit, FileChanges
from dal.read.changes import plan_changes
from tests.changes.helpers import changes, rows

NAME = "frames"
FIELDS = [
    TensorField("id", np.int64, (), ScalarCodec()),
    TensorField("part", np.str_, (), ScalarCodec()),
    TensorField("score", np.float64, (), ScalarCodec(), nullable=True),
    TensorField("m", np.float32, (2,), NdarrayCodec()),
]
SCHEMA = TensorSchema("Frames", FIELDS)
WIDER = TensorSchema("Frames", [*FIELDS, TensorField("extra", np.int64, (), ScalarCodec(), nullable=True)])


def _rows(ids: range, rng: random.Random, wide: bool) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in ids:
        row: dict[str, object] = {"id": i, "part": rng.choice("ab"), "score": rng.choice([0.5, None]),
                                  "m": np.full((2,), i, np.float32)}  # fmt: skip
        if wide:
            row["extra"] = i * 3
        out.append(row)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_changes_are_the_difference_of_the_versions_rows(tmp_path: Path, seed: int) -> None:
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    path = str(tmp_path / "frames")
    rng = random.Random(seed)
    wide, next_id = False, 0
    written: dict[object, dict[str, object]] = {}  # every row written, by id

    def fresh(n: int) -> list[dict[str, object]]:
        nonlocal next_id
        next_id += n
        new = _rows(range(next_id - n, next_id), rng, wide)
        written.update((r["id"], r) for r in new)
        return new

    dal.write(fresh(6), NAME, format="petastorm", schema=SCHEMA, partition_by=["part"], path=path, catalog=catalog)
    ops = ["append", "append", "append", "overwrite", "overwrite", "optimize", "merge"]
    rng.shuffle(ops)  # every kind of version, in an order the seed picks
    for op in ops:
        if op == "append":
            dal.write(fresh(rng.randint(1, 4)), NAME, format="petastorm", catalog=catalog)
        elif op == "overwrite":  # half the rows kept as they are, plus new ones
            ids = dal.open(NAME, catalog=catalog).to_arrow().column("id").to_pylist()
            kept = [{**written[i], **({"extra": i * 3} if wide else {})} for i in ids if i % 2 == 0]
            dal.write(kept + fresh(2), NAME, format="petastorm", mode="overwrite", catalog=catalog)
        elif op == "optimize":
            dal.lifecycle.optimize(NAME, catalog=catalog)
        elif not wide:
            wide = True
            dal.write(fresh(2), NAME, format="petastorm", schema=WIDER, schema_mode="merge", catalog=catalog)
    versions = sorted(dal.get_catalog(catalog).versions(NAME), key=lambda v: v.number)
    for before, after in itertools.pairwise(versions):
        columns = after.schema.names
        got = changes(NAME, catalog, before.number, after.number)
        old_t = dal.open(NAME, before.number, catalog=catalog).to_arrow()
        for c in columns:
            if c not in old_t.column_names:
                old_t = old_t.append_column(c, pa.nulls(old_t.num_rows, pa.int64()))
        old = rows(old_t, columns)
        new = rows(dal.open(NAME, after.number, catalog=catalog).to_arrow(), columns)
        kinds = got.column("_change_type")
        context = f"seed {seed}, ops {ops}, version {after.number}"
        assert rows(got.filter(pc.equal(kinds, "delete")), columns) == old - new, context
        assert rows(got.filter(pc.equal(kinds, "insert")), columns) == new - old, context
        assert set(got.column("_commit_version").to_pylist()) <= {after.number}


def test_an_append_reads_only_its_own_files_and_a_compaction_reports_nothing(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    rng = random.Random(0)
    dal.write(_rows(range(4), rng, False), NAME, format="petastorm", schema=SCHEMA, path=str(tmp_path / "f"),
              catalog=catalog)  # fmt: skip
    dal.write(_rows(range(4, 7), rng, False), NAME, format="petastorm", catalog=catalog)
    dal.lifecycle.optimize(NAME, catalog=catalog)
    cat = dal.get_catalog(catalog)
    info, versions = cat.get_dataset(NAME), cat.versions(NAME)
    appended = plan_changes(info, versions, 0, 1)
    assert [type(u) for u in appended.units] == [FileChanges]  # the carried file is not read
    assert sorted(changes(NAME, catalog, 0, 1).column("id").to_pylist()) == [4, 5, 6]
    assert [type(u) for u in plan_changes(info, versions, 1, 2).units] == [DiffUnit]
    assert changes(NAME, catalog, 1, 2).num_rows == 0
    everything = changes(NAME, catalog, None)
    assert sorted(everything.column("id").to_pylist()) == list(range(7))
    assert set(everything.column("_change_type").to_pylist()) == {"insert"}
