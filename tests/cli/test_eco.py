"""The CLI beside pyiceberg's: ``--log-level`` / ``-v``, ``dal files``, ``dal show --property``, catalog profiles from a
config file, and tables that fit 80 columns."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from tests.conftest import open_catalog


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(params=["sqlite", "served"])
def written(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A real Delta dataset in two versions (two files in the second), on SQLite, and written through a
    ``dal serve`` catalog (a MANAGE token): the same CLI output and errors from each."""
    url = (
        f"sqlite:///{tmp_path}/catalog.db" if request.param == "sqlite" else str(request.getfixturevalue("served_url"))
    )
    cat = open_catalog(url)
    table = pa.table({"date": ["2026-03-01", "2026-03-02"] * 50, "x": list(range(100))})
    dal.write(table, "weather.obs", partition_by=["date"], path=str(tmp_path / "obs"), catalog=cat)
    dal.write(table.slice(0, 10), "weather.obs", catalog=cat)
    cat.update_dataset("weather.obs", properties={"team": "forecasting", "retention": "90d"})
    cat.close()
    return url


def test_log_level_and_verbose_print_dals_log_on_stderr(tmp_path: Path, written: str) -> None:
    code, _, err = run("--catalog", f"sqlite:///{tmp_path}/a.db", "db", "upgrade")
    assert code == 0 and "INFO" not in err  # default: warnings only
    code, _, err = run("--catalog", f"sqlite:///{tmp_path}/b.db", "--log-level", "info", "db", "upgrade")
    assert code == 0 and "dal: INFO: dal.catalog: upgraded the catalog " in err, err
    code, _, err = run("--catalog", f"sqlite:///{tmp_path}/c.db", "-v", "db", "upgrade")
    assert code == 0 and "dal: INFO: dal.catalog: upgraded the catalog " in err, err
    # -vv: debug, e.g. what planning pruned (head plans the files that hold its rows: the first, then two, …)
    code, _, err = run("--catalog", written, "-vv", "head", "weather.obs", "--where", "date = '2026-03-01'")
    assert code == 0 and re.search(r"dal: DEBUG: dal: weather\.obs version 1: pruned \d+ of \d+ files", err), err
    code, _, err = run("--catalog", written, "-v", "head", "weather.obs", "--where", "date = '2026-03-01'")
    assert code == 0 and "DEBUG" not in err
    code, _, err = run("--catalog", written, "--log-level", "loud", "ls")
    assert code == 2 and "'loud' is not one of" in err
    code, _, err = run("--catalog", written, "ls", env={"DAL_LOG_LEVEL": "debug"})
    assert code == 0


def test_files_lists_a_versions_data_files_like_delta_rs(written: str, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    code, out, err = run("--catalog", written, "files", "weather.obs", "--json")
    assert code == 0, err
    import json

    listed = json.loads(out)
    assert listed["version"] == 1
    reference = DeltaTable(str(tmp_path / "obs"), version=1)  # the independent reader of the same version
    expected = sorted(reference.file_uris())
    assert (
        sorted(f["path"] for f in listed["files"]) == [u.replace("file://", "") for u in expected]
        or sorted(f["path"] for f in listed["files"]) == expected
    )
    assert sum(f["rows"] for f in listed["files"]) == 110
    assert {f["partition"] for f in listed["files"]} == {"date=2026-03-01", "date=2026-03-02"}
    code, out, _ = run("--catalog", written, "files", "weather.obs", "0", "--json")
    assert code == 0 and len(json.loads(out)["files"]) == len(DeltaTable(str(tmp_path / "obs"), version=0).file_uris())
    code, out, _ = run("--catalog", written, "files", "weather.obs", "-o", "table")
    assert code == 0 and "weather.obs @ version 1:" in out and "date=2026-03-01/" in out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    code, _, err = run("--catalog", written, "files", "weather.obs", "7")
    assert code == 1 and err.startswith("dal: error: ") and "version 7" in err


def test_show_property_prints_one_value(written: str) -> None:
    code, out, _ = run("--catalog", written, "show", "weather.obs", "--property", "team")
    assert (code, out) == (0, "forecasting\n")
    code, out, _ = run("--catalog", written, "show", "weather.obs", "--property", "retention", "--json")
    import json

    assert code == 0 and json.loads(out) == {"dataset": "weather.obs", "property": "retention", "value": "90d"}
    code, _, err = run("--catalog", written, "show", "weather.obs", "--property", "teem")
    assert code == 1 and "has no property 'teem'; did you mean 'team'?" in err and len(err.splitlines()) == 1


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_profiles_from_a_config_file(written: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = f"sqlite:///{tmp_path}/other.db"
    Catalog(other).close()
    config = write_config(
        tmp_path / "config.toml",
        f'default = "main"\n\n[catalogs.main]\nurl = "{written}"\n\n[catalogs.other]\nurl = "{other}"\n\n'
        '[catalogs.team]\nurl = "postgresql+psycopg://ml:${DAL_TEST_PG_PASSWORD}@db.example:5432/catalog"\n',
    )
    monkeypatch.delenv("DAL_CATALOG_URL", raising=False)
    monkeypatch.delenv("DAL_PROFILE", raising=False)
    monkeypatch.setenv("DAL_CONFIG", str(config))
    assert "weather.obs" in run("ls")[1]  # the default profile
    assert "no datasets yet" in run("--profile", "other", "ls")[2]  # stdout not a terminal: the note on stderr
    assert "no datasets yet" in run("ls", env={"DAL_PROFILE": "other"})[2]
    assert "weather.obs" in run("--profile", "main", "ls", env={"DAL_CATALOG_URL": other})[1]  # typed beats env
    assert "weather.obs" in run("--catalog", written, "--profile", "other", "ls")[1]  # --catalog beats --profile
    code, _, err = run("--profile", "nope", "ls")
    assert code == 1 and "no catalog profile 'nope'" in err and "(profiles: main, other, team)" in err
    code, _, err = run("--profile", "team", "ls")
    assert code == 1 and "needs the environment variable DAL_TEST_PG_PASSWORD" in err
    # the library reads the same file: dal.open without catalog= uses the default profile
    assert dal.open("weather.obs").number == 1
    # listing profiles never prints a password, whether written in the file or taken from the environment
    write_config(config, config.read_text() + '\n[catalogs.inline]\nurl = "postgresql://ml:hunter2secret@db/x"\n')
    code, out, _ = run("profiles", env={"DAL_TEST_PG_PASSWORD": "envsecret"})
    assert code == 0 and "hunter2secret" not in out and "envsecret" not in out and "main" in out
    code, out, _ = run("profiles", "--json")
    assert code == 0 and "hunter2secret" not in out and '"default": "main"' in out
    code, out, err = run("--profile", "inline", "db", "status", env={"DAL_TEST_PG_PASSWORD": "x"})
    assert "hunter2secret" not in out + err
    write_config(config, "default = [")
    code, _, err = run("ls")
    assert code == 1 and "is not valid TOML" in err


def test_tables_fit_80_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/wide.db"
    cat = Catalog(url)
    long_name = "team.very_long_dataset_name_for_the_feature_store_v2"
    cat.create_dataset(long_name, format="delta", location="/nowhere/" + "x" * 90,
                       description="A long description " * 8)  # fmt: skip
    cat.close()
    for args in (["ls"], ["show", long_name], ["versions", long_name]):  # the table a terminal gets
        code, out, err = run("--catalog", url, *args, "-o", "table", env={"COLUMNS": "80"})
        assert code == 0, err
        assert all(len(line) <= 80 for line in out.splitlines()), "\n" + out
        if args[0] != "versions":  # folded onto several lines, never cut: the cells of a column join up again
            column = 1 if args[0] == "ls" else 2
            cells = "".join(line.split("│")[column].strip() for line in out.splitlines() if line.startswith("│"))
            assert long_name in cells, "\n" + out


def test_ls_json_has_the_row_count_and_size_the_api_has(written: str) -> None:
    import json

    code, out, _ = run("--catalog", written, "ls", "--json")
    assert code == 0
    (item,) = json.loads(out)
    version = open_catalog(written).version("weather.obs")
    assert (item["latest_row_count"], item["latest_size_bytes"]) == (version.row_count, version.size_bytes)
    assert item["latest_row_count"] == 110 and item["latest_size_bytes"] > 0  # 100 rows, then 10 appended
