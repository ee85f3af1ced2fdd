"""Deletion vectors, column mapping, vacuumed history and broken logs on real tables of the shared corpus.

Each test copies one table to a temp dir and compares dal with delta-rs's DataFusion engine (which applies
deletion vectors and column mapping) through projections, filters, shards, splits and shuffles.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.errors import FormatError, UnsupportedFeature
from tests.conformance.conftest import CORPUS, require_corpus
from tests.conformance.test_delta_conformance import NAME, rows, same_rows

pytestmark = pytest.mark.usefixtures("corpus")


@pytest.fixture
def corpus() -> Path:
    return require_corpus()


def _copy(table: str, tmp_path: Path) -> Path:
    dst = tmp_path / "table"
    shutil.copytree(CORPUS / table, dst)
    return dst


def _register(table: str, tmp_path: Path) -> tuple[Path, str]:
    path = _copy(table, tmp_path)
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register(NAME, str(path), catalog=catalog)
    return path, catalog


def _delta_rs(path: Path, sql: str, version: int | None = None) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(path), version=version)
    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all())


def _same(ours: pa.Table, theirs: pa.Table) -> None:
    problem = same_rows(ours, theirs)
    assert problem is None, problem


@pytest.mark.parametrize(
    ("table", "where", "columns"),
    [
        ("delta-rs/table_with_deletion_logs", "age > 30", ["id", "name", "age"]),
        ("delta-golden/dv-partitioned-with-checkpoint", "part >= 3 AND col1 < 40", ["col1", "part"]),
        ("delta-golden/dv-with-columnmapping", "part < 5 OR col2 = 'foo8'", ["col2", "part"]),
    ],
)
def test_deletion_vectors_through_filter_projection_shard_split_and_shuffle(
    table: str, where: str, columns: list[str], tmp_path: Path
) -> None:
    path, catalog = _register(table, tmp_path)
    ds = dal.open(NAME, catalog=catalog)
    assert any(f.deleted_rows for f in ds.files()), "the table's latest version has deletion vectors"
    everything = _delta_rs(path, "select * from t")
    _same(ds.to_arrow(), everything)
    assert ds.count() == everything.num_rows == ds.version.row_count

    expected = _delta_rs(path, f"select {', '.join(columns)} from t where {where}")
    scan = ds.scan().filter(where).select(*columns)
    _same(scan.to_arrow(), expected)
    assert scan.count() == expected.num_rows

    # shards: disjoint, together every matching row once ("keep"), equal sizes with "pad"
    shards = [scan.shard(r, 3, remainder="keep").to_arrow() for r in range(3)]
    assert sum(s.num_rows for s in shards) == expected.num_rows
    _same(pa.concat_tables(shards), expected)
    padded = [scan.shard(r, 3).count() for r in range(3)]
    assert len(set(padded)) == 1
    # DataLoader-style splits of a plan read through their tasks (deleted positions travel with them)
    parts = [pa.Table.from_batches(list(scan.iter_batches(7, tasks=scan.split(i, 2))), schema=None) for i in range(2)]
    _same(pa.concat_tables(parts), expected)
    # shuffle: another order, the same rows
    _same(scan.shuffle(seed=3, buffer_size=5).to_arrow(), expected)


def test_deletion_vectors_of_every_version_match_delta_rs(tmp_path: Path) -> None:
    path, catalog = _register("delta-rs/table_with_deletion_logs", tmp_path)
    for v in dal.get_catalog(catalog).versions(NAME):
        ours = dal.open(NAME, v.number, catalog=catalog).scan().filter("nbr >= 0").to_arrow()
        assert rows(ours) == rows(_delta_rs(path, "select * from t where nbr >= 0", v.storage_version))


@pytest.mark.parametrize(
    ("table", "where", "columns"),
    [
        # a partition column and a data column whose logical names hold spaces; physical col-<uuid> in files
        (
            "delta-rs/table_with_column_mapping",
            "\"Company Very Short\" = 'BMS' AND \"Super Name\" > 'M'",
            ["Super Name"],
        ),
        # nested struct fields are mapped too (their physical names differ at every level)
        ("delta-golden/table-with-columnmapping-mode-name", "IntegerType >= 2", ["nested_struct", "StringType"]),
        ("delta-golden/table-with-columnmapping-mode-id", "LongType < 3", ["nested_struct", "array_of_structs"]),
        ("delta-kernel/data-reader-partition-values-column-mapping-name", "as_int = 1", ["as_string", "as_date"]),
    ],
)
def test_column_mapping_through_projection_and_filter(
    table: str, where: str, columns: list[str], tmp_path: Path
) -> None:
    path, catalog = _register(table, tmp_path)
    ds = dal.open(NAME, catalog=catalog)
    _same(ds.to_arrow(), _delta_rs(path, "select * from t"))
    quoted = ", ".join(f'"{c}"' for c in columns)
    expected = _delta_rs(path, f"select {quoted} from t where {where}")
    assert expected.num_rows > 0
    scan = ds.scan().filter(where).select(*columns)
    _same(scan.to_arrow(), expected)
    assert scan.count() == expected.num_rows
    _same(pa.concat_tables([scan.shard(r, 2, remainder="keep").to_arrow() for r in range(2)]), expected)


def test_expired_early_versions_are_recorded_and_refused(tmp_path: Path) -> None:
    """JSON commits 0-2 were cleaned up; the log starts at checkpoint 3."""
    path, catalog = _register("delta-rs/checkpoint-cdf-table", tmp_path)
    versions = dal.get_catalog(catalog).versions(NAME)
    assert [(v.storage_version, v.operation) for v in versions[:3]] == [(0, "expired"), (1, "expired"), (2, "expired")]
    assert all("no longer holds" in v.properties["unavailable"] for v in versions[:3])
    # their commit times are gone with their commits: they take the first readable version's, so opening
    # "as of" a time never lands on one after a readable version
    assert {v.created_at for v in versions[:4]} == {versions[3].created_at}
    with pytest.raises(FormatError, match=rf"{NAME} version 1 .*expired.*oldest readable version is 3"):
        dal.open(NAME, 1, catalog=catalog)
    for v in versions[3:]:
        _same(
            dal.open(NAME, v.number, catalog=catalog).to_arrow(), _delta_rs(path, "select * from t", v.storage_version)
        )


def test_missing_middle_commit_is_an_error_naming_it(tmp_path: Path) -> None:
    path = _copy("delta-golden/basic-with-inserts-deletes-checkpoint", tmp_path)  # checkpoint at 10
    (path / "_delta_log" / f"{5:020d}.json").unlink()
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    with pytest.raises(FormatError, match=r"Delta version 5 cannot be loaded.*missing or corrupt"):
        dal.register(NAME, str(path), catalog=catalog)
    assert NAME not in [d.name for d in dal.get_catalog(catalog).list_datasets()]


def test_corrupt_middle_commit_is_an_error_naming_it(tmp_path: Path) -> None:
    path = _copy("delta-golden/basic-with-inserts-deletes-checkpoint", tmp_path)
    (path / "_delta_log" / f"{7:020d}.json").write_text('{"add": {"path": ')
    with pytest.raises(FormatError, match=r"Delta version 7 cannot be loaded"):
        dal.register(NAME, str(path), catalog=f"sqlite:///{tmp_path}/catalog.db")


@pytest.mark.parametrize("broken", [5, 6])  # the first version after the recorded ones, or one after that
def test_corrupt_commit_after_registering_is_reported_by_sync(broken: int, tmp_path: Path) -> None:
    path = _copy("delta-golden/basic-with-inserts-deletes-checkpoint", tmp_path)
    log = path / "_delta_log"
    later = {p.name: p.read_bytes() for p in log.iterdir() if p.name[:20].isdigit() and int(p.name[:20]) > 4}
    for name in later:
        (log / name).unlink()
    (log / "_last_checkpoint").unlink()
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    assert len(dal.register(NAME, str(path), catalog=catalog)) == 5
    for name, data in later.items():
        (log / name).write_bytes(data)
    (log / f"{broken:020d}.json").write_text("not json\n")
    with pytest.raises(FormatError, match=rf"Delta version {broken} cannot be loaded"):
        dal.sync(NAME, catalog=catalog)
    assert [v.storage_version for v in dal.get_catalog(catalog).versions(NAME)] == [0, 1, 2, 3, 4]


def test_vacuumed_data_files_without_stats_are_recorded_unavailable(tmp_path: Path) -> None:
    _, catalog = _register("delta-golden/snapshot-vacuumed", tmp_path)
    versions = dal.get_catalog(catalog).versions(NAME)
    gone = [v for v in versions if v.operation == "unavailable"]
    assert gone and all("missing" in v.properties["unavailable"] for v in gone)
    with pytest.raises(FormatError, match=rf"{NAME} version {gone[0].number} .*missing"):
        dal.open(NAME, gone[0].number, catalog=catalog)


def test_missing_deletion_vector_file_is_refused_naming_the_version(tmp_path: Path) -> None:
    _, catalog = _register("delta-spark/table-with-dv-large", tmp_path)
    assert dal.open(NAME, 0, catalog=catalog).to_arrow().num_rows == 2000
    with pytest.raises(FormatError, match=rf"{NAME} version 1 .*deletion vector file.*missing"):
        dal.open(NAME, 1, catalog=catalog)


def test_missing_deletion_vector_files_are_named_alike_on_every_register(tmp_path: Path) -> None:
    # delta-rs names whichever missing deletion vector file its parallel reads meet first; the recorded reason
    # names the first of them sorted and how many more, the same on every register
    reasons = []
    for i in range(3):
        path = _copy("delta-spark/table-with-dv-large", tmp_path / str(i))
        catalog = f"sqlite:///{tmp_path}/{i}.db"
        dal.register(NAME, str(path), catalog=catalog)
        version = dal.get_catalog(catalog).versions(NAME)[3]
        reasons.append(version.properties["unavailable"])
    assert len(set(reasons)) == 1
    named = re.search(r"\((deletion_vector_[0-9a-f-]{36}\.bin) and 1 more\)", reasons[0])
    assert named is not None, reasons[0]
    assert not (path / named.group(1)).exists()


def test_unsupported_reader_feature_is_named(tmp_path: Path) -> None:
    _, catalog = _register("delta-spark/variant-stats-no-checkpoint", tmp_path)
    with pytest.raises(UnsupportedFeature, match=rf"{NAME} version 0 .*variantShredding-preview"):
        dal.open(NAME, 0, catalog=catalog).to_arrow()


def test_unknown_reader_feature_delta_rs_cannot_load_is_named(tmp_path: Path) -> None:
    path = _copy("delta-rs/simple_table_features", tmp_path)
    with pytest.raises(UnsupportedFeature, match="blahabl"):
        dal.register(NAME, str(path), catalog=f"sqlite:///{tmp_path}/catalog.db")


def test_column_mapping_id_mode_matches_parquet_field_ids(tmp_path: Path) -> None:
    """In id mode a file's columns may carry other names (e.g. written by another engine): the field id decides."""
    import pyarrow.parquet as pq

    path, catalog = _register("delta-golden/table-with-columnmapping-mode-id", tmp_path)
    before = dal.open(NAME, catalog=catalog).to_arrow()
    for f in path.rglob("*.parquet"):
        if "_delta_log" in f.parts:
            continue
        table = pq.read_table(f)
        renamed = pa.schema([field.with_name(f"other_{i}") for i, field in enumerate(table.schema)])
        assert all(b"PARQUET:field_id" in (field.metadata or {}) for field in renamed)
        pq.write_table(pa.Table.from_arrays(table.columns, schema=renamed), f)
    fresh = dal.open(NAME, catalog=catalog)
    _same(fresh.to_arrow(), before)
    _same(
        fresh.scan().filter("LongType < 3").select("StringType").to_arrow(),
        before.filter(pa.compute.field("LongType") < 3).select(["StringType"]),
    )


@pytest.mark.spark
@pytest.mark.parametrize("table", ["delta-golden/dv-with-columnmapping", "delta-rs/table_with_deletion_logs"])
def test_deletion_vectors_and_column_mapping_through_to_spark(table: str, spark: object, tmp_path: Path) -> None:
    path, catalog = _register(table, tmp_path)
    ds = dal.open(NAME, catalog=catalog)
    expected = _delta_rs(path, "select * from t")
    got = ds.to_spark(spark).toPandas()
    _same(pa.Table.from_pandas(got, preserve_index=False).select(expected.schema.names), expected)
    shards = [ds.scan().shard(r, 2, remainder="keep").to_spark(spark).count() for r in range(2)]
    assert sum(shards) == expected.num_rows


@pytest.mark.parametrize("table", ["delta-rs/table_with_deletion_logs", "delta-rs/table_with_column_mapping"])
def test_hive_sync_refuses_versions_a_plain_parquet_table_would_misread(table: str, tmp_path: Path) -> None:
    from dal import hive

    _, catalog = _register(table, tmp_path)
    with pytest.raises(UnsupportedFeature, match=rf"{NAME} version \d+ has Delta deletion vectors or column mapping"):
        hive.sync([NAME], uri="thrift://127.0.0.1:9", catalog=catalog)  # refused before the metastore is asked


def test_deletion_vectors_through_torch_ranks_and_workers(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there
    path, catalog = _register("delta-rs/table_with_deletion_logs", tmp_path)
    ds = dal.open(NAME, catalog=catalog).select("id", "age")
    expected = sorted(_delta_rs(path, "select id from t").column("id").to_pylist())
    seen: list[int] = []
    for rank in range(2):
        data = ds.shard(rank, 2, "keep").to_torch(batch_size=16)
        loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=2)
        seen += [int(i) for batch in loader for i in batch["id"]]
    assert sorted(seen) == expected  # deleted rows stay deleted in every worker; none twice, none missing


def test_column_mapping_prunes_row_groups_by_physical_statistics(tmp_path: Path) -> None:
    path, catalog = _register("delta-golden/dv-with-columnmapping", tmp_path)
    ds = dal.open(NAME, catalog=catalog)
    scan = ds.scan().filter("col1 > 40 AND part >= 0")
    assert len(scan.plan()) < len(ds.scan().plan())  # files whose col1 statistics rule them out are skipped
    _same(scan.to_arrow(), _delta_rs(path, "select * from t where col1 > 40 AND part >= 0"))
