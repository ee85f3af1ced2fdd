"""Row counts from another writer's Delta statistics are checked against the Parquet footers before dal records
them (issue #22: a log claiming ``numRecords`` 10**12 for a 10-row file made ``count()`` say 10**12 while
``to_arrow()`` had 10 rows): such a commit is refused, an honest one registers with ``count() == len(to_arrow())``.

Parquet footers are checked too: a footer claiming 10**12 rows in a 77-row file (its Thrift ``num_rows`` rewritten
here, the file otherwise valid) is refused with a ``FormatError`` naming the file when plain Parquet, Petastorm or
Delta data is registered, and when a file is read, instead of a count dal cannot return and a raw Arrow error."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

import dal
from dal.catalog import Catalog
from dal.catalog.errors import DatasetNotFound
from dal.errors import FormatError
from dal.ops import lifecycle


def _claim(table: Path, version: int, rows: object) -> None:
    log = table / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for a in actions:
        if "add" in a:
            stats = json.loads(a["add"]["stats"])
            stats["numRecords"] = rows
            a["add"]["stats"] = json.dumps(stats)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


ROWS = 77  # written; a count unlikely to appear elsewhere in a footer as a Thrift i64
PAD = b"p" * 20  # a key-value entry the lie shortens, so a lying file keeps the honest one's size


def _varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def _honest(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"a": list(range(ROWS))}).replace_schema_metadata({"pad": PAD.decode()}), path)


def _lie(path: Path, claim: int, *, values: bool) -> None:
    """Rewrite the footer of ``path`` (written by :func:`_honest`) to claim ``claim`` rows: the file's and the
    row group's ``num_rows`` (Thrift compact: field delta 1, type i64, zigzag varint), and with ``values`` the
    column chunk's ``num_values`` too, so that the footer is self-consistent. Same size as before where the
    file carries :data:`PAD` (delta-rs drops schema metadata: its files grow by a few bytes)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<I", data[-8:-4])
    footer = data[-8 - length : -8]
    honest, lying = b"\x16" + _varint(ROWS * 2), b"\x16" + _varint(claim * 2)
    parts = footer.split(honest)
    assert len(parts) == 4  # FileMetaData.num_rows, ColumnMetaData.num_values, RowGroup.num_rows
    footer = parts[0] + lying + parts[1] + (lying if values else honest) + parts[2] + lying + parts[3]
    grown = len(footer) - length
    padded = footer.count(bytes([len(PAD)]) + PAD) == 1
    if padded:
        footer = footer.replace(bytes([len(PAD)]) + PAD, bytes([len(PAD) - grown]) + PAD[grown:])
    path.write_bytes(data[: -8 - length] + footer + struct.pack("<I", len(footer)) + b"PAR1")
    assert pq.read_metadata(path).num_rows == claim and (path.stat().st_size == len(data) or not padded)


LIES = pytest.mark.parametrize("values", [False, True], ids=["rows", "rows-and-values"])


def test_an_honest_foreign_table_counts_what_it_reads(sqlite_env: Catalog, tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    write_deltalake(str(tmp_path / "t"), pa.table({"a": [10, 11]}), mode="append")
    dal.register("x.honest", str(tmp_path / "t"))
    ds = dal.open("x.honest")
    assert ds.count() == len(ds.to_arrow()) == 12


@pytest.mark.parametrize("claim", [10**12, 11, 0, -1, "10"])
def test_a_lying_row_count_is_refused(sqlite_env: Catalog, tmp_path: Path, claim: object) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    _claim(tmp_path / "t", 0, claim)
    with pytest.raises(
        FormatError, match=r"Delta version 0\): the log says .* rows \(numRecords\) but its Parquet footer says 10"
    ):
        dal.register("x.liar", str(tmp_path / "t"))
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("x.liar")


def test_a_lying_append_is_refused_by_sync(sqlite_env: Catalog, tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    dal.register("x.later", str(tmp_path / "t"))
    write_deltalake(str(tmp_path / "t"), pa.table({"a": [10]}), mode="append")
    _claim(tmp_path / "t", 1, 10**12)
    with pytest.raises(FormatError, match="numRecords"):
        dal.sync("x.later")
    ds = dal.open("x.later")
    assert ds.number == 0 and ds.count() == len(ds.to_arrow()) == 10


@LIES
def test_a_parquet_footer_claiming_a_trillion_rows_is_not_registered(
    sqlite_env: Catalog, tmp_path: Path, values: bool
) -> None:
    _honest(tmp_path / "plain" / "part-0.parquet")
    _honest(tmp_path / "plain" / "part-1.parquet")
    _lie(tmp_path / "plain" / "part-1.parquet", 10**12, values=values)
    with pytest.raises(
        FormatError, match=r"part-1\.parquet: implausible Parquet footer: row group 0 claims 1,000,000,000,000"
    ):
        dal.register("x.plain", str(tmp_path / "plain"), format="parquet")
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("x.plain")


@LIES
def test_a_delta_file_whose_footer_and_log_agree_on_a_lie_is_not_registered(
    sqlite_env: Catalog, tmp_path: Path, values: bool
) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(ROWS))}))
    (data,) = (tmp_path / "t").glob("*.parquet")
    _lie(data, 10**12, values=values)
    _claim(tmp_path / "t", 0, 10**12)
    with pytest.raises(FormatError, match=rf"Delta version 0\): {data.name}: implausible Parquet footer"):
        dal.register("x.delta", str(tmp_path / "t"))
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("x.delta")


def test_a_petastorm_footer_claiming_a_trillion_rows_is_not_registered(sqlite_env: Catalog, tmp_path: Path) -> None:
    schema = dal.TensorSchema("Rows", [dal.TensorField("a", np.int64, (), dal.ScalarCodec())])
    dal.write(pa.table({"a": list(range(ROWS))}), "x.src", format="petastorm", schema=schema)
    written = Path(dal.open("x.src").location.removeprefix("file://"))
    foreign = tmp_path / "foreign"  # as petastorm itself leaves it: _common_metadata beside the Parquet files
    foreign.mkdir()
    (common,) = written.glob("v0-*/_common_metadata")  # dal's version directory is such a dataset
    shutil.copy(common, foreign / "_common_metadata")
    _honest(foreign / "part-0.parquet")
    dal.register("x.honest", str(foreign), format="petastorm")  # the layout is one dal adopts
    assert dal.open("x.honest").count() == len(dal.open("x.honest").to_arrow()) == ROWS
    _lie(foreign / "part-0.parquet", 10**12, values=True)
    other = f"sqlite:///{tmp_path}/other.db"  # another catalog (one location is one dataset's in one)
    with pytest.raises(FormatError, match=r"part-0\.parquet: implausible Parquet footer"):
        dal.register("x.legacy", str(foreign), format="petastorm", read_only=True, catalog=other)
    with pytest.raises(DatasetNotFound):
        Catalog(other).get_dataset("x.legacy")


@LIES
def test_a_file_that_starts_lying_after_registration_is_refused_when_read(
    sqlite_env: Catalog, tmp_path: Path, values: bool
) -> None:
    _honest(tmp_path / "plain" / "part-0.parquet")
    dal.register("x.swapped", str(tmp_path / "plain"), format="parquet")
    assert dal.open("x.swapped").count() == len(dal.open("x.swapped").to_arrow()) == ROWS
    _lie(tmp_path / "plain" / "part-0.parquet", 10**12, values=values)  # same size: the catalog cannot tell
    ds = dal.open("x.swapped")
    with pytest.raises(FormatError, match=r"part-0\.parquet: implausible Parquet footer"):
        ds.to_arrow()
    with pytest.raises(FormatError, match="implausible Parquet footer"):
        ds.filter(dal.col("a") > 3).count()


def test_a_hand_edited_dal_commit_is_refused_without_reading_its_files(sqlite_env: Catalog) -> None:
    dal.write(pa.table({"a": list(range(10))}), "x.own", format="delta")
    location = Path(dal.open("x.own").location.removeprefix("file://"))
    lifecycle.drop("x.own")  # the catalog forgets it; the table stays
    _claim(location, 0, 10**12)  # the commit still carries dal's write id: its footers are not compared
    with pytest.raises(FormatError, match=r"holds 1,000,000,000,000 rows \(numRecords\) but a Parquet file of"):
        dal.register("x.own", str(location))
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("x.own")


def test_a_lie_known_only_from_a_checkpoint_is_refused(sqlite_env: Catalog, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    _claim(tmp_path / "t", 0, 10**12)
    write_deltalake(str(tmp_path / "t"), pa.table({"a": [10]}), mode="append")
    DeltaTable(str(tmp_path / "t")).create_checkpoint()
    (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").unlink()  # the lying add is in the checkpoint only
    with pytest.raises(FormatError, match=r"Delta version 1\): the log says .* holds 1,000,000,000,000 rows"):
        dal.register("x.checkpointed", str(tmp_path / "t"))
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("x.checkpointed")


def test_a_small_lie_a_checkpoint_carries_is_refused_when_read(sqlite_env: Catalog, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    write_deltalake(str(tmp_path / "t"), pa.table({"a": list(range(10))}))
    _claim(tmp_path / "t", 0, 11)  # within what the file's size allows: only its footer can tell
    write_deltalake(str(tmp_path / "t"), pa.table({"a": [10]}), mode="append")
    DeltaTable(str(tmp_path / "t")).create_checkpoint()
    (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").unlink()
    dal.register("x.checkpointed", str(tmp_path / "t"))
    ds = dal.open("x.checkpointed")
    with pytest.raises(FormatError, match=r"holds 10 rows by its Parquet footer but the version says 11"):
        ds.to_arrow()
    with pytest.raises(FormatError, match="by its Parquet footer but the version says 11"):
        ds.filter(dal.col("a") >= 0).to_arrow()


def test_a_footer_lying_consistently_is_refused_when_read(sqlite_env: Catalog, tmp_path: Path) -> None:
    """A footer whose every count agrees on 8,000 rows (77 written) passes the plausibility bounds at
    register; reading the file finds 77 and refuses, so no read path hands out rows that disagree with
    ``count()`` (which is the footers' 8,000)."""
    _honest(tmp_path / "plain" / "part-0.parquet")
    _honest(tmp_path / "plain" / "part-1.parquet")
    _lie(tmp_path / "plain" / "part-1.parquet", 8_000, values=True)  # rows only: refused at register (above)
    dal.register("x.quiet", str(tmp_path / "plain"), format="parquet")
    ds = dal.open("x.quiet")
    assert ds.count() == ROWS + 8_000  # what the footers say: count() reads no pages
    for read in (
        lambda: ds.to_arrow(),
        lambda: list(ds.scan().iter_batches(64)),
        lambda: ds.scan().rows().take([0, 100]),
        lambda: list(ds.scan().shuffle(seed=1).to_arrow()),
    ):
        with pytest.raises(
            FormatError, match=r"part-1\.parquet, row group 0: the Parquet footer says 8,000 rows but the pages hold 77"
        ):
            read()
    # filtered reads cannot tell (a filter drops rows) and read what the pages hold
    assert len(ds.filter("a >= 0").to_arrow()) == 2 * ROWS


def test_a_lying_footer_is_refused_when_its_row_group_is_read_page_by_page(
    sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paged_reads: list[Any]
) -> None:
    """The same lie in a row group wider than a chunk: the direct read takes it a slice of pages at a time
    (``dal.read.reader.read_pages``) and refuses it as the whole-row-group read does, with the same error."""
    import dal.read.reader as reader

    monkeypatch.setattr(reader, "MIN_CHUNK_ROWS", 16)
    _honest(tmp_path / "plain" / "part-0.parquet")
    _honest(tmp_path / "plain" / "part-1.parquet")
    _lie(tmp_path / "plain" / "part-1.parquet", 8_000, values=True)
    dal.register("x.paged", str(tmp_path / "plain"), format="parquet")
    ds = dal.open("x.paged")
    for read in (lambda: list(ds.scan().iter_batches(64)), lambda: list(ds.scan().to_torch(64))):
        with pytest.raises(
            FormatError, match=r"part-1\.parquet, row group 0: the Parquet footer says 8,000 rows but the pages hold 77"
        ):
            read()
    assert paged_reads  # the row groups were read page by page
