"""gc probes on real tables (the conformance corpus, copied to a temporary directory): ``--dry-run`` lists
exactly what the real gc then deletes, a second gc deletes nothing, and after every gc delta-rs reads every kept
version exactly as before. A table with V2 checkpoints (sidecars in ``_delta_log/_sidecars``): a deleted
checkpoint's sidecars go with it (they were left behind), those a remaining checkpoint names stay."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, QueryBuilder

import dal
from dal import lifecycle
from dal.catalog import Catalog
from dal.cli.app import cli
from tests.conformance.conftest import require_corpus


def _copy(src: Path, dst: Path, age_days: float) -> Path:
    shutil.copytree(src, dst)
    then = time.time() - age_days * 86400
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
        os.utime(p, (then, then))
    return dst


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _rows(location: Path, version: int) -> list[str]:
    table = DeltaTable(str(location), version=version)
    t = pa.table(QueryBuilder().register("t", table).execute("select * from t").read_all())
    return sorted(map(repr, zip(*t.to_pydict().values(), strict=True)))


def _dal_rows(name: str, version: int | None) -> list[str]:
    t = dal.open(name, version).to_arrow()
    return sorted(map(repr, zip(*t.to_pydict().values(), strict=True)))


@pytest.mark.parametrize("table", ["checkpoint-v2-table", "table_with_deletion_logs", "cdf-table-with-cdc-and-dvs"])
def test_dry_run_lists_exactly_what_gc_deletes_and_kept_versions_read_the_same(
    sqlite_env: Catalog, tmp_path: Path, table: str
) -> None:
    location = _copy(require_corpus() / "delta-rs" / table, tmp_path / "t", age_days=90)
    dal.register("probe.g", str(location))
    storage = {v.number: v.storage_version for v in sqlite_env.versions("probe.g")}
    before = {n: _rows(location, sv) for n, sv in storage.items() if sv is not None}
    for keep in (3, 1):
        env = {"DAL_CATALOG_URL": os.environ["DAL_CATALOG_URL"], "DAL_WAREHOUSE": os.environ["DAL_WAREHOUSE"]}
        dry = CliRunner().invoke(cli, ["gc", "probe.g", "--keep-last", str(keep), "--safe-age", "0s", "--dry-run",
                                       "--json"], env=env)  # fmt: skip
        assert dry.exit_code == 0, dry.output
        listed = set(json.loads(dry.stdout)["deleted_files"])
        present = _files(location)
        result = lifecycle.gc("probe.g", keep_last=keep, safe_age=timedelta(0))
        assert set(result.deleted) == listed == present - _files(location)  # the dry run's list, exactly
        for n in result.kept:
            assert _rows(location, storage[n]) == before[n], (keep, n)
            assert _dal_rows("probe.g", n) == before[n]
        again = lifecycle.gc("probe.g", keep_last=keep, safe_age=timedelta(0))
        assert again.deleted == () and again.expired == ()


def test_sidecars_of_deleted_v2_checkpoints_go_with_them(sqlite_env: Catalog, tmp_path: Path) -> None:
    location = _copy(require_corpus() / "delta-rs" / "checkpoint-v2-table", tmp_path / "v2", age_days=90)
    sidecars = sorted(p.name for p in (location / "_delta_log" / "_sidecars").iterdir())
    assert [s[:20] for s in sidecars] == [f"{6:020d}", f"{8:020d}"]  # named by the v2 checkpoints 6 and 8
    dal.register("probe.v2", str(location))
    first = lifecycle.gc("probe.v2", keep_last=3, safe_age=timedelta(0))  # oldest kept: 7; checkpoint 6 goes
    assert f"_delta_log/_sidecars/{sidecars[0]}" in first.deleted
    assert sorted(p.name for p in (location / "_delta_log" / "_sidecars").iterdir()) == [sidecars[1]]
    second = lifecycle.gc("probe.v2", keep_last=1, safe_age=timedelta(0))  # oldest kept: 9; checkpoint 8 goes
    assert f"_delta_log/_sidecars/{sidecars[1]}" in second.deleted
    assert not list((location / "_delta_log" / "_sidecars").iterdir())
    assert _rows(location, 9) == _dal_rows("probe.v2", None)
