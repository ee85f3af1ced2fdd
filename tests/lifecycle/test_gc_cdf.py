"""gc of Delta change data (``_change_data/``, named by ``cdc`` actions; Delta's vacuum removes the change data of
expired versions): the change data files of versions before the oldest kept one go, and untracked ones older than
the safe age; those of kept versions stay. The reference is delta-rs's ``load_cdf``: over the kept versions it
reads exactly what it read before gc. ``--dry-run`` lists exactly what the real gc deletes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

import dal
from dal import lifecycle
from dal.catalog import Catalog
from dal.cli.app import cli
from tests.conformance.conftest import require_corpus

CDF = {"delta.enableChangeDataFeed": "true"}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _cdc_of(root: Path) -> dict[int, set[str]]:
    """The change data files each commit's ``cdc`` actions name (read from the log, independently of dal)."""
    out: dict[int, set[str]] = {}
    for commit in sorted((root / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            if line.strip() and "cdc" in (action := json.loads(line)):
                out.setdefault(int(commit.name[:20]), set()).add(action["cdc"]["path"])
    return out


def _feed(root: Path, start: int) -> list[str]:
    """delta-rs's change data feed from ``start`` on, as sorted row reprs."""
    t = pa.table(DeltaTable(str(root)).load_cdf(starting_version=start).read_all())
    t = t.drop_columns(["_commit_timestamp"])  # delta-rs reads it from file times: not a content check
    return sorted(map(repr, zip(*t.to_pydict().values(), strict=True)))


def _dry_then_real(name: str, root: Path, keep: int, safe_age: str) -> lifecycle.GcResult:
    env = {"DAL_CATALOG_URL": os.environ["DAL_CATALOG_URL"], "DAL_WAREHOUSE": os.environ["DAL_WAREHOUSE"]}
    dry = CliRunner().invoke(
        cli, ["gc", name, "--keep-last", str(keep), "--safe-age", safe_age, "--dry-run", "--json"], env=env
    )
    assert dry.exit_code == 0, dry.output
    listed = set(json.loads(dry.stdout)["deleted_files"])
    present = _files(root)
    result = lifecycle.gc(name, keep_last=keep, safe_age=lifecycle.parse_duration(safe_age))
    assert set(result.deleted) == listed == present - _files(root)  # the dry run's list, exactly
    return result


def test_gc_deletes_change_data_of_expired_versions_and_keeps_the_feed_of_kept_ones(
    cat: Catalog, tmp_path: Path
) -> None:
    root = tmp_path / "cdf"
    write_deltalake(str(root), pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), configuration=CDF)  # v0
    write_deltalake(str(root), pa.table({"id": [4, 5], "v": ["d", "e"]}), mode="append")  # v1
    DeltaTable(str(root)).update(updates={"v": "'z'"}, predicate="id = 2")  # v2: cdc
    DeltaTable(str(root)).delete("id = 4")  # v3: cdc
    src = pa.table({"id": [1, 9], "v": ["m", "n"]})
    (DeltaTable(str(root)).merge(src, predicate="s.id = t.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())  # v4: cdc  # fmt: skip
    write_deltalake(str(root), pa.table({"id": [7], "v": ["q"]}), mode="overwrite")  # v5: deletes = its removes
    cdc = _cdc_of(root)
    assert sorted(cdc) == [2, 3, 4] and all(p.startswith("_change_data/") for p in set().union(*cdc.values()))
    stray_young = root / "_change_data" / "stray-young.parquet"  # no commit names these (killed writers)
    stray_old = root / "_change_data" / "stray-old.parquet"
    for stray in (stray_young, stray_old):
        shutil.copy(root / sorted(cdc[2])[0], stray)
    then = time.time() - 10 * 86400
    os.utime(stray_old, (then, then))
    dal.register("cdf.t", str(root))
    storage = {v.number: v.storage_version for v in cat.versions("cdf.t")}
    feeds = {sv: _feed(root, sv) for sv in range(6)}

    first = _dry_then_real("cdf.t", root, keep=3, safe_age="1d")  # kept: 3, 4, 5
    assert sorted(storage[n] for n in first.kept) == [3, 4, 5]
    assert cdc[2] <= set(first.deleted)  # the expired version's change data
    assert "_change_data/stray-old.parquet" in first.deleted and stray_young.exists()
    assert {f"_change_data/{p.name}" for p in (root / "_change_data").iterdir()} == cdc[3] | cdc[4] | {
        "_change_data/stray-young.parquet"
    }
    for sv in (3, 4, 5):
        assert _feed(root, sv) == feeds[sv], sv  # every kept version's change feed, as before

    again = lifecycle.gc("cdf.t", keep_last=3, safe_age=timedelta(days=1))
    assert again.deleted == () and again.expired == ()

    last = _dry_then_real("cdf.t", root, keep=1, safe_age="0s")  # kept: 5 (an overwrite: no cdc files)
    assert (cdc[3] | cdc[4] | {"_change_data/stray-young.parquet"}) <= set(last.deleted)
    assert not any((root / "_change_data").rglob("*"))
    assert _feed(root, 5) == feeds[5]  # its deletes are read from the files it removed: those stay


def _copy(src: Path, dst: Path, age_days: float) -> Path:
    shutil.copytree(src, dst)
    then = time.time() - age_days * 86400
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
        os.utime(p, (then, then))
    return dst


def test_gc_on_a_spark_cdf_table_from_the_corpus(cat: Catalog, tmp_path: Path) -> None:
    """``cdf-table`` (Spark 3.5 / Delta 3.0, partitioned): change data files with Hadoop ``.crc`` twins."""
    root = _copy(require_corpus() / "delta-rs" / "cdf-table", tmp_path / "t", age_days=90)
    cdc = _cdc_of(root)
    assert sorted(cdc) == [1, 2, 3]
    feeds = {sv: _feed(root, sv) for sv in (2, 3)}
    dal.register("cdf.spark", str(root))
    result = _dry_then_real("cdf.spark", root, keep=2, safe_age="0s")  # kept: 2, 3
    left = {p for p in _files(root) if p.startswith("_change_data/")}
    assert left == cdc[2] | cdc[3] | {f"{p.rsplit('/', 1)[0]}/.{p.rsplit('/', 1)[1]}.crc" for p in cdc[2] | cdc[3]}
    assert cdc[1] <= set(result.deleted)
    for sv in (2, 3):
        assert _feed(root, sv) == feeds[sv], sv
    assert lifecycle.gc("cdf.spark", keep_last=2, safe_age=timedelta(0)).deleted == ()
