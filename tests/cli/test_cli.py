"""The ``dal`` CLI through its real entry point: listings, --json, and one-line errors for user mistakes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from dal.catalog import Field, Partition, Schema, VersionDraft
from dal.cli.app import cli
from tests.conftest import open_catalog

SCHEMA = Schema(
    (
        Field("date", "string"),
        Field("station", "string", False),
        Field("reflectivity", "binary", True, "float32", (64, None), "ndarray"),
    )
)


@pytest.fixture
def populated(catalog_url_or_served: str) -> str:
    """The catalog (SQLite, PostgreSQL, and a ``dal serve`` one with a MANAGE token) with two datasets, the same
    CLI output and errors from each."""
    cat = open_catalog(catalog_url_or_served)
    cat.create_dataset("weather.radar", format="delta", location="/w/radar", description="radar scans")
    cat.create_dataset("weather.obs", format="parquet", location="/w/obs")
    for i in range(3):
        schema = SCHEMA if i < 2 else Schema((*SCHEMA.fields, Field("quality", "double")))
        cat.publish(
            "weather.radar",
            VersionDraft(
                "append" if i else "create",
                schema,
                row_count=100 * (i + 1),
                file_count=i + 1,
                size_bytes=4096 * (i + 1),
                storage_version=i,
                committed_at=datetime(2026, 3, 1 + i, tzinfo=UTC),
                partition_columns=("date",),
                partitions=tuple(Partition((("date", f"2026-03-0{d + 1}"),), 100, 1, 4096) for d in range(i + 1)),
            ),
        )
    cat.tag("weather.radar", 1, "prod")
    cat.close()
    return catalog_url_or_served


def run(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--catalog", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_ls(populated: str) -> None:
    code, out, _ = run(populated, "ls")
    assert code == 0 and "weather.radar" in out and "weather.obs" in out
    code, out, _ = run(populated, "ls", "--json")
    listing = json.loads(out)
    assert [d["name"] for d in listing] == ["weather.obs", "weather.radar"]
    assert listing[1]["latest_version"] == 2 and listing[0]["latest_version"] is None
    code, out, _ = run(populated, "ls", "*.radar", "--json")
    assert [d["name"] for d in json.loads(out)] == ["weather.radar"]
    code, out, err = run(populated, "ls", "nothing-like-this")  # stdout not a terminal: tsv, the note on stderr
    assert code == 0 and "no datasets match" in err and out == "name\tformat\tlatest\tupdated\tdescription\n"


def test_show(populated: str) -> None:
    code, out, _ = run(populated, "show", "weather.radar")
    assert code == 0 and "/w/radar" in out and "radar scans" in out and "300" in out
    info = json.loads(run(populated, "show", "weather.radar", "--json")[1])
    assert info["latest"]["version"] == 2 and info["latest"]["partition_columns"] == ["date"]
    assert [f["name"] for f in info["latest"]["schema"]] == ["date", "station", "reflectivity", "quality"]


def test_versions(populated: str) -> None:
    code, out, _ = run(populated, "versions", "weather.radar")
    assert code == 0 and "prod" in out and "2026-03-03" in out
    versions = json.loads(run(populated, "versions", "weather.radar", "--json")[1])
    assert [(v["version"], v["row_count"], v["storage_version"], v["tags"]) for v in versions] == [
        (0, 100, 0, []),
        (1, 200, 1, ["prod"]),
        (2, 300, 2, []),
    ]


def test_type_names_and_user_text_are_not_rich_markup(catalog_url_or_served: str) -> None:
    catalog_url = catalog_url_or_served
    cat = open_catalog(catalog_url)
    cat.create_dataset("m.ds", format="delta", location="/x", description="[bold]not markup[/bold]")
    cat.publish("m.ds", VersionDraft("create", Schema((Field("ts", "timestamp[us, tz=UTC]"),)), 1))
    assert "timestamp[us, tz=UTC]" in run(catalog_url, "schema", "m.ds")[1]
    assert "[bold]not" in run(catalog_url, "ls")[1]


def test_schema(populated: str) -> None:
    code, out, _ = run(populated, "schema", "weather.radar", "--version", "prod")
    assert code == 0 and "float32[64, ?] (ndarray)" in out and "quality" not in out
    fields = json.loads(run(populated, "schema", "weather.radar", "--json")[1])["fields"]
    assert fields[2] == {
        "name": "reflectivity",
        "type": "binary",
        "nullable": True,
        "dtype": "float32",
        "shape": [64, None],
        "codec": "ndarray",
    }
    # a timestamp resolves to the version current then
    as_of = json.loads(run(populated, "schema", "weather.radar", "-v", "2026-03-02T12:00:00", "--json")[1])
    assert as_of["version"] == 1


def test_diff(populated: str) -> None:
    code, out, err = run(populated, "diff", "weather.radar", "0", "2")
    assert code == 0 and "+\tquality\t\tdouble" in out and "+200" in err  # tsv: the row count on stderr
    code, out, _ = run(populated, "diff", "weather.radar", "0", "2", "-o", "table")
    assert code == 0 and "quality" in out and "+200" in out
    d = json.loads(run(populated, "diff", "weather.radar", "prod", "2", "--json")[1])
    assert [f["name"] for f in d["added"]] == ["quality"] and d["removed"] == [] and d["changed"] == []
    assert d["row_count"] == {"old": 200, "new": 300}
    code, out, err = run(populated, "diff", "weather.radar", "0", "1")
    assert "unchanged" in err and out == "change\tcolumn\told\tnew\n"


def test_partitions(populated: str) -> None:
    code, out, _ = run(populated, "partitions", "weather.radar")
    assert code == 0 and "date=2026-03-03" in out
    p = json.loads(run(populated, "partitions", "weather.radar", "-v", "0", "--json")[1])
    assert p["partition_columns"] == ["date"]
    assert [(x["partition"], x["row_count"]) for x in p["partitions"]] == [("date=2026-03-01", 100)]


def test_tag_and_untag(populated: str) -> None:
    code, out, _ = run(populated, "tag", "weather.radar", "2", "2026-q1")
    assert code == 0 and "tagged version 2" in out
    code, _, err = run(populated, "tag", "weather.radar", "0", "prod")
    assert code == 1 and "--force" in err
    assert run(populated, "tag", "weather.radar", "0", "prod", "--force")[0] == 0
    assert json.loads(run(populated, "versions", "weather.radar", "--json")[1])[0]["tags"] == ["prod"]
    assert run(populated, "untag", "weather.radar", "prod")[0] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "weather.radr"), "did you mean 'weather.radar'"),
        (("versions", "nope.nothing"), "dataset 'nope.nothing' not found"),
        (("schema", "weather.radar", "-v", "17"), "version 17 of 'weather.radar' not found"),
        (("schema", "weather.radar", "-v", "prdo"), "did you mean 'prod'"),
        (("schema", "weather.radar", "-v", "2020-01-01"), "first version is from"),
        (("diff", "weather.radar", "0", "9"), "version 9"),
        (("partitions", "../etc/passwd"), "invalid dataset name"),
        (("show", "a b"), "invalid dataset name"),
        (("tag", "weather.radar", "1", "12"), "invalid tag"),
    ],
)
def test_user_mistakes_print_one_line(populated: str, args: tuple[str, ...], message: str) -> None:
    code, out, err = run(populated, *args)
    assert code == 1
    assert message in err
    assert err.startswith("dal: error: ") and err.count("\n") == 1 and "Traceback" not in err + out


def test_unreachable_catalog_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_CATALOG_RETRY_S", "0.5")  # nothing listens there: refused, retried, then given up
    code, _, err = run("postgresql+psycopg://nobody@127.0.0.1:1/none", "ls")
    assert code == 1 and err.startswith("dal: error: catalog") and err.count("\n") == 1
    assert "Connection refused" in err and "DAL_CATALOG_RETRY_S" in err
    code, _, err = run("nosuchdb://x", "ls")
    assert code == 1 and "no database driver" in err


def test_real_entry_point_and_env_url(populated: str) -> None:
    """The installed console script, configured only through DAL_CATALOG_URL."""
    exe = shutil.which("dal", path=os.path.dirname(sys.executable))
    assert exe, "the dal console script is not installed in this environment"
    env = {**os.environ, "DAL_CATALOG_URL": populated}
    proc = subprocess.run([exe, "ls", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [d["name"] for d in json.loads(proc.stdout)] == ["weather.obs", "weather.radar"]
    proc = subprocess.run([exe, "show", "weather.nope"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.startswith("dal: error:") and "Traceback" not in proc.stderr


def test_embedded_default_lives_in_the_data_dir(tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_HOME", str(tmp_path))
    status = json.loads(CliRunner().invoke(cli, ["db", "status", "--json"], env={"DAL_CATALOG_URL": None}).stdout)
    assert status["revision"] is None  # status reports, it does not create
    assert CliRunner().invoke(cli, ["ls"], env={"DAL_CATALOG_URL": None}).exit_code == 0  # first use creates
    result = CliRunner().invoke(cli, ["db", "status", "--json"], env={"DAL_CATALOG_URL": None})
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["url"] == f"sqlite:///{tmp_path}/catalog.db" and status["up_to_date"]
    assert os.path.exists(os.path.join(tmp_path, "catalog.db"))
