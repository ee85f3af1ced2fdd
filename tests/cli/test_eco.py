"""The CLI beside pyiceberg's: ``--log-level`` / ``-v``, ``dal files``, ``dal show --property``, catalog profiles from a
config file, and tables that fit 80 columns."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from catalog import Catalog
from dal.cli.app import cli


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def written(tmp_path: Path) -> str:
    """A real Delta dataset in two versions (two files in the second), on SQLite."""
    url = f"sqlite:///{tmp_path}/catalog.db"
    cat = Catalog(url)
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
    # -vv: debug, e.g. what planning pruned
    code, _, err = run("--catalog", written, "-vv", "head", "weather.obs", "--where", "date = '2026-03-01'")
    assert code == 0 and "dal: DEBUG: dal: weather.obs version 1: pruned 2 of 4 files" in err, err
    code, _, err = run("--catalog", written, "-v", "head", "weather.obs", "--where", "date = '2026-03-01'")
    assert code == 0 and "DEBUG" not in err
    code, _, err = run("--catalog", written, "--log-level", "loud", "ls")
    assert code == 2 and "'loud' is not one of" in err
    code, _, err = run("--catalog", written, "ls", env={"DAL_LOG_LEVEL": "debug"})
    assert code == 0
