"""Hive Metastore sync and import against a real metastore (pyspark's bundled Hive 2.3 jars, embedded Derby);
Spark SQL pointed at the same metastore reads the synced tables."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DalError, DatasetExists

pytestmark = [pytest.mark.spark, pytest.mark.slow]
HIVE_SITE = """<?xml version="1.0"?>
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:derby:;databaseName={db};create=true</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>file://{warehouse}</value></property>
</configuration>
"""


@pytest.fixture(scope="session")
def metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import pyspark

    root = tmp_path_factory.mktemp("hms")
    (root / "conf").mkdir()
    (root / "conf" / "hive-site.xml").write_text(
        HIVE_SITE.format(db=root / "metastore_db", warehouse=root / "warehouse")
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    jars = Path(pyspark.__file__).parent / "jars"
    proc = subprocess.Popen(
        ["java", "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector",
         "-cp", f"{jars}/*:{root / 'conf'}", "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port)],
        cwd=root, stdout=open(root / "log", "w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    import logging

    from hive_metastore_client import HiveMetastoreClient

    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)  # refused connects while it starts
    deadline = time.monotonic() + 120
    while True:
        try:
            with HiveMetastoreClient("127.0.0.1", port) as c:
                c.get_all_databases()
            break
        except Exception:
            assert proc.poll() is None and time.monotonic() < deadline, (root / "log").read_text()[-2000:]
            time.sleep(0.5)
    yield f"thrift://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=60)


def spark_sql(uri: str, tmp: Path, *queries: str) -> list[list[dict[str, object]]]:
    """Run queries in a Spark session with Hive support pointed at the metastore (its own JVM)."""
    code = textwrap.dedent(f"""
        import json, sys
        from pyspark.sql import SparkSession
        s = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.hadoop.hive.metastore.uris", {uri!r}).config("spark.sql.warehouse.dir", {str(tmp / "spark-wh")!r})
             .enableHiveSupport().getOrCreate())
        out = [[r.asDict() for r in s.sql(q).collect()] for q in json.loads(sys.argv[1])]
        print("RESULT" + json.dumps(out, default=str))
    """)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(queries))],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])  # type: ignore[no-any-return]


def frame(n: int, start: int = 0) -> pd.DataFrame:
    ts = pd.date_range("2026-01-01", periods=n, freq="h", tz="UTC") + pd.Timedelta(hours=start)
    return pd.DataFrame(
        {"id": np.arange(start, start + n), "ts": ts, "date": ts.strftime("%Y-%m-%d"), "x": np.arange(n) / 2}
    )


def test_sync_delta_and_petastorm_then_spark_sql_reads_them(
    sqlite_env: Catalog, metastore: str, tmp_path: Path
) -> None:
    dal.write(frame(48), "weather.obs", partition_by=["date"], time_column="ts")
    schema = dal.TensorSchema("Frames", [dal.TensorField("id", np.int64), dal.TensorField("cam", np.str_),
                                         dal.TensorField("depth", np.float32, (2, 2), dal.NdarrayCodec())])  # fmt: skip
    dal.write([{"id": i, "cam": f"c{i % 2}", "depth": np.full((2, 2), i, np.float32)} for i in range(6)], "vision.frames",
              format="petastorm", schema=schema, partition_by=["cam"])  # fmt: skip
    tables = {t.dataset: t for t in dal.hive.sync(uri=metastore)}
    assert (tables["weather.obs"].database, tables["weather.obs"].table, tables["weather.obs"].partitions) == (
        "weather",
        "obs",
        2,
    )
    assert re.search(r"/vision\.frames/v0-[0-9a-f]{12}$", tables["vision.frames"].location)
    counts, parts, frames, props = spark_sql(
        metastore, tmp_path,
        "SELECT count(*) AS n, sum(id) AS s FROM weather.obs",
        "SHOW PARTITIONS weather.obs",
        "SELECT cam, count(*) AS n FROM vision.frames GROUP BY cam ORDER BY cam",
        "SHOW TBLPROPERTIES weather.obs",
    )  # fmt: skip
    assert counts == [{"n": 48, "s": sum(range(48))}]
    assert sorted(p["partition"] for p in parts) == ["date=2026-01-01", "date=2026-01-02"]
    assert frames == [{"cam": "c0", "n": 3}, {"cam": "c1", "n": 3}]
    assert {p["key"]: p["value"] for p in props}["dal.dataset"] == "weather.obs"

    # a new version, synced again: Spark sees it
    dal.write(frame(24, 48), "weather.obs")
    (t,) = dal.hive.sync(["weather.obs"], uri=metastore)
    assert (t.version, t.partitions) == (1, 3)
    (counts,) = spark_sql(metastore, tmp_path, "SELECT count(*) AS n FROM weather.obs")
    assert counts == [{"n": 72}]


def test_refusals_leave_the_metastore_and_catalog_unchanged(
    sqlite_env: Catalog, metastore: str, tmp_path: Path
) -> None:
    dal.write(frame(10), "refuse.over")
    dal.write(frame(5, 100), "refuse.over", mode="overwrite")  # v0's files are still on disk
    versions = sqlite_env.versions("refuse.over")
    with pytest.raises(DalError, match="does not include .*removed by a later overwrite"):
        dal.hive.sync(["refuse.over"], uri=metastore)
    from hive_metastore_client import HiveMetastoreClient

    host, port = metastore.removeprefix("thrift://").split(":")
    with HiveMetastoreClient(host, int(port)) as c:
        assert "over" not in c.get_all_tables("refuse") if "refuse" in c.get_all_databases() else True
    assert sqlite_env.versions("refuse.over") == versions
    # a foreign table of the same name with another schema is not overwritten
    dal.write(pd.DataFrame({"a": [1]}), "clash.tbl")
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"b": ["x"]}), plain / "p.parquet")
    dal.register("clash.other", str(plain), format="parquet")
    (first,) = dal.hive.sync(["clash.other"], uri=metastore)
    with HiveMetastoreClient(host, int(port)) as c:  # pretend someone else owns the table: drop dal's marker
        t = c.get_table("clash", "other")
        t.parameters.pop("dal.dataset")
        t.tableName = "tbl"
        c.create_external_table(t)
    with pytest.raises(DatasetExists, match="clash.tbl exists with another schema"):
        dal.hive.sync(["clash.tbl"], uri=metastore)
    with pytest.raises(DalError, match="cannot reach the Hive Metastore"):
        dal.hive.sync(["clash.tbl"], uri="thrift://127.0.0.1:1")
    with pytest.raises(DalError, match="thrift://host:9083"):
        dal.hive.sync(["clash.tbl"], uri="http://nope")
    assert first.table == "other"


def test_import_and_cli(sqlite_env: Catalog, sqlite_url: str, metastore: str, tmp_path: Path) -> None:
    dal.write(frame(30), "src.rows", partition_by=["date"])
    run = CliRunner()
    r = run.invoke(cli, ["--catalog", sqlite_url, "hive", "sync", "src.rows", "--uri", metastore])
    assert r.exit_code == 0 and "src.rows v0 -> src.rows (2 partitions)" in r.stdout, r.output
    importing = ["--catalog", sqlite_url, "hive", "import", "src.rows", "--uri", metastore, "--name", "copy.rows"]
    r = run.invoke(cli, importing)  # its location is src.rows': one writable entry per location and catalog
    assert r.exit_code == 1 and "location of dataset 'src.rows'" in r.output, r.output
    r = run.invoke(cli, [*importing, "--read-only"])  # read-only too: one location is one dataset's
    assert r.exit_code == 1 and "location of dataset 'src.rows'" in r.output, r.output
    other = f"sqlite:///{tmp_path}/other.db"  # another catalog reads it read-only
    r = run.invoke(cli, ["--catalog", other, *importing[2:], "--read-only"])
    assert r.exit_code == 0 and "imported src.rows as copy.rows with 1 version(s)" in r.stdout, r.output
    assert Catalog(other).get_dataset("copy.rows").format == "delta"
    assert sorted(dal.open("copy.rows", catalog=other).to_arrow().column("id").to_pylist()) == list(range(30))
    r = run.invoke(cli, ["--catalog", sqlite_url, "hive", "import", "src.nope", "--uri", metastore])
    assert r.exit_code == 1 and r.stderr.startswith("dal: error: Hive table src.nope not found")


def test_object_store_datasets_get_hadoop_urls_and_a_clear_refusal_without_the_connector(
    sqlite_env: Catalog, metastore: str, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metastore here has no hadoop-aws (pyspark ships none, Maven is unreachable): it refuses s3a://
    locations, and dal says which connector it lacks. The URL dal hands it is Hadoop's, s3a://."""
    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    dal.write(frame(10), "hs3.rows", partition_by=["date"], storage_options=options)
    versions = sqlite_env.versions("hs3.rows")
    with pytest.raises(DalError, match=rf"refused hs3\.rows at s3a://{bucket}/wh/hs3\.rows: .*hadoop-aws for s3a://"):
        dal.hive.sync(["hs3.rows"], uri=metastore, storage_options=options)
    from hive_metastore_client import HiveMetastoreClient

    host, port = metastore.removeprefix("thrift://").split(":")
    with HiveMetastoreClient(host, int(port)) as c:
        assert "rows" not in c.get_all_tables("hs3")
    assert sqlite_env.versions("hs3.rows") == versions


def test_maps_structs_and_empty_partition_values_reach_hive(
    sqlite_env: Catalog, sqlite_url: str, metastore: str, tmp_path: Path
) -> None:
    """Issue 23, item 11: map and struct columns are published with their Hive types; a partition value '' is
    Hive's null partition (Hive and Spark write '' there and read it as NULL), so Spark SQL counts every row dal
    and delta-rs count; a dataset that cannot be published is named with its column and does not stop the others."""
    import deltalake

    nested = pa.table(
        {
            "id": [1, 2, 3, 4, 5],
            "p": ["a", "", None, "a", "50% a/b"],
            "m": pa.array([[("k", 1)], [], None, [("z", 2)], []], pa.map_(pa.string(), pa.int64())),
            "s": pa.array([{"a": 1, "b": "x"}, None, {"a": 3, "b": None}, {"a": 4, "b": "y"}, None]),
            "l": pa.array([[{"q": 1.5}], None, [], [{"q": None}], []]),
        }
    )
    dal.write(nested, "hv.nested", partition_by=["p"])  # dal writes '' where nulls go
    older = tmp_path / "older"  # delta-rs writes '' in a p= directory of its own
    deltalake.write_deltalake(str(older), pa.table({"id": [1, 2, 3], "p": ["a", "", "b"]}), partition_by=["p"])
    dal.register("hv.older", str(older))
    both = tmp_path / "both"  # '' and null in two directories: one Hive partition cannot read both
    deltalake.write_deltalake(str(both), pa.table({"id": [1, 2], "p": ["", None]}), partition_by=["p"])
    dal.register("hv.both", str(both))
    dal.write(pa.table({"id": [1], "s": pa.array([{"a b": 1}])}), "hv.odd")  # a struct field Hive cannot name
    assert (
        dal.open("hv.nested").count()
        == deltalake.DeltaTable(dal.open("hv.nested").location).to_pyarrow_table().num_rows
        == 5
    )

    with pytest.raises(dal.hive.HiveSyncError) as e:
        dal.hive.sync(["hv.nested", "hv.older", "hv.both", "hv.odd"], uri=metastore)
    assert [t.dataset for t in e.value.synced] == ["hv.nested", "hv.older"]
    assert sorted(e.value.failures) == ["hv.both", "hv.odd"]
    assert "hv.odd: column s (struct<a b: int64>): Hive struct fields are named with letters" in str(e.value)
    assert "hv.both version 0: the Hive partition {'p': '__HIVE_DEFAULT_PARTITION__'} has files in two" in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(DalError, match=r"^hv\.odd: column s "):  # one dataset by name: its own error
        dal.hive.sync(["hv.odd"], uri=metastore)

    counts, described, parts, values, older_rows = spark_sql(
        metastore, tmp_path,
        "SELECT count(*) AS n, count(p) AS with_p FROM hv.nested",
        "DESCRIBE hv.nested",
        "SHOW PARTITIONS hv.nested",
        "SELECT id, p, m['k'] AS k, s.a AS a, s.b AS b, size(l) AS nl FROM hv.nested ORDER BY id",
        "SELECT id, p FROM hv.older ORDER BY id",
    )  # fmt: skip
    assert counts == [{"n": 5, "with_p": 3}]
    types = {r["col_name"]: r["data_type"] for r in described}
    assert (types["m"], types["s"], types["l"]) == (
        "map<string,bigint>",
        "struct<a:bigint,b:string>",
        "array<struct<q:double>>",
    )
    assert sorted(p["partition"] for p in parts) == ["p=50%25 a%2Fb", "p=__HIVE_DEFAULT_PARTITION__", "p=a"]
    assert values == [
        {"id": 1, "p": "a", "k": 1, "a": 1, "b": "x", "nl": 1},
        {"id": 2, "p": None, "k": None, "a": None, "b": None, "nl": None},
        {"id": 3, "p": None, "k": None, "a": 3, "b": None, "nl": 0},
        {"id": 4, "p": "a", "k": None, "a": 4, "b": "y", "nl": 1},
        {"id": 5, "p": "50% a/b", "k": None, "a": None, "b": None, "nl": 0},  # its encoded directory, p=50%25%20a%2Fb
    ]
    assert older_rows == [{"id": 1, "p": "a"}, {"id": 2, "p": None}, {"id": 3, "p": "b"}]  # delta-rs: '' is null too
    assert [
        r["p"] for r in sorted(deltalake.DeltaTable(str(older)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    ] == ["a", None, "b"]

    # the CLI lists what it published, then one line naming each dataset that failed
    r = CliRunner().invoke(cli, ["--catalog", sqlite_url, "hive", "sync", "hv.nested", "hv.odd", "--uri", metastore])
    assert r.exit_code == 1 and "hv.nested v0 -> hv.nested (3 partitions)" in r.stdout, r.output
    assert (
        r.stderr.startswith("dal: error: hive sync: synced 1 of 2 datasets; hv.odd: column s")
        and r.stderr.count("\n") == 1
    )


def test_import_types_partitions_as_hive_declares_them(sqlite_env: Catalog, metastore: str, tmp_path: Path) -> None:
    """A Hive Parquet table's partition columns are typed by its partition keys (DATE, INT), not guessed from
    the directory names (dates as strings, an INT as int64): the rows Spark SQL gives, with Hive's types."""
    results = spark_sql(
        metastore,
        tmp_path,
        "CREATE DATABASE IF NOT EXISTS imp",
        "CREATE TABLE imp.typed (x DOUBLE) PARTITIONED BY (d DATE, h INT, s STRING) STORED AS PARQUET",
        "INSERT INTO imp.typed PARTITION (d='2024-04-01', h=5, s='12') VALUES (1.5), (2.5)",
        "INSERT INTO imp.typed PARTITION (d='2024-04-02', h=23, s='007') VALUES (3.5)",
        "SELECT x, d, h, s FROM imp.typed",
    )
    theirs = sorted((r["x"], r["d"], r["h"], r["s"]) for r in results[-1])
    (version,) = dal.hive.import_table("imp.typed", uri=metastore)
    ds = dal.open("imp.typed")
    schema = ds.arrow_schema()
    assert [str(schema.field(c).type) for c in ("d", "h", "s")] == ["date32[day]", "int32", "string"]
    assert version.schema.get("d").type == "date32[day]"  # type: ignore[union-attr]
    mine = sorted((r["x"], str(r["d"]), r["h"], r["s"]) for r in ds.to_arrow().to_pylist())
    assert mine == theirs
    assert ds.filter("d = '2024-04-02' AND h = 23").count() == 1
