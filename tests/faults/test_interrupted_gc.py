"""A destructive operation killed half-way is finished by the next one (issue #22): a gc killed after it marked
versions expired in the catalog (or after it deleted some of their files) leaves nothing behind once the next
gc ran — the same files as a gc that was never interrupted, on a twin dataset — and a ``drop --purge`` killed
after deleting the data is finished by the next purge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.ops import lifecycle
from tests.faults.conftest import SQLITE_ONLY, run_until_paused
from tests.faults.races import SCHEMA, data, files_below, ids_of

VERSIONS = 8


def _appends(name: str, fmt: str) -> None:
    """A history where every version holds every earlier row (Petastorm links them into each version's own
    directory, so expiring versions leave many files); the last writes overwrite, so Delta has garbage too."""
    extra = {"schema": SCHEMA} if fmt == "petastorm" else {}
    for k in range(VERSIONS):
        mode = "overwrite" if fmt == "delta" and k >= VERSIONS - 3 else "append"
        dal.write(data(fmt, [10 * k, 10 * k + 1]), name, format=fmt, mode=mode, **extra)


def _gc_code(name: str) -> str:
    return f"from dal.ops import lifecycle\nprint(lifecycle.gc({name!r}, keep_last=1))\n"


def _layout(root: Path) -> list[str]:
    """The files left, with the random parts of their names (write tokens, data file ids) taken out."""
    out = []
    for rel in files_below(root):
        parts = rel.split("/")
        parts[0] = re.sub(r"^(v\d+)-[0-9a-f]+$", r"\1", parts[0])
        if parts[-1].startswith("part-"):
            parts[-1] = "part"
        out.append("/".join(parts))
    return sorted(out)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["petastorm", "delta"])
@pytest.mark.parametrize("point", ["gc-expired", "gc-deleting"])
def test_the_gc_after_a_killed_one_leaves_what_an_uninterrupted_gc_leaves(
    cat: Catalog, tmp_path: Path, fmt: str, point: str
) -> None:
    _appends("half.ds", fmt)
    _appends("twin.ds", fmt)
    half, twin = (Path(cat.get_dataset(n).location) for n in ("half.ds", "twin.ds"))
    expected = ids_of("half.ds")
    clean = lifecycle.gc("twin.ds", keep_last=1)
    assert clean.expired == tuple(range(VERSIONS - 1)) and clean.deleted

    run_until_paused(_gc_code("half.ds"), point, tmp_path)  # killed: expired in the catalog, files (mostly) left
    assert [v.number for v in cat.versions("half.ds") if v.unavailable] == list(range(VERSIONS - 1))
    assert len(files_below(half)) > len(files_below(twin))

    healed = lifecycle.gc("half.ds", keep_last=1)
    assert _layout(half) == _layout(twin)
    assert healed.expired == () and healed.finished == tuple(range(VERSIONS - 1))
    assert ids_of("half.ds") == expected == ids_of("twin.ds")
    again = lifecycle.gc("half.ds", keep_last=1)  # finished: later gcs have nothing left to do
    assert again.deleted == () and again.finished == ()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["petastorm", "delta"])
def test_a_purge_killed_after_deleting_the_data_is_finished_by_the_next(cat: Catalog, tmp_path: Path, fmt: str) -> None:
    _appends("purged.ds", fmt)
    location = Path(cat.get_dataset("purged.ds").location)
    code = "from dal.ops import lifecycle\nlifecycle.drop('purged.ds', purge=True)\n"
    run_until_paused(code, "purge-data-deleted", tmp_path)
    left = files_below(location)
    assert left and all(
        r.startswith(("_dal_versions/", "_delta_log/")) or r in ("_common_metadata", "_dal_catalog.json") for r in left
    )
    assert cat.get_dataset("purged.ds")  # the catalog entry goes last
    env = {"DAL_CATALOG_URL": cat.url}
    done = CliRunner().invoke(cli, ["drop", "purged.ds", "--purge", "--yes", "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert not location.exists() and [d.name for d in cat.list_datasets()] == []


@pytest.mark.slow
@SQLITE_ONLY  # rewrites the catalog database as an older dal left it
def test_gc_finishes_versions_an_older_dal_expired_without_marking_them(cat: Catalog, tmp_path: Path) -> None:
    """A catalog from before this release has expired versions without the files-deleted mark: the first gc
    looks at them once (deleting what an interrupted older gc left) and marks them; later ones do not."""
    _appends("old.p", "petastorm")
    lifecycle.gc("old.p", keep_last=1)
    location = Path(cat.get_dataset("old.p").location)
    kept = sorted(p.name for p in location.iterdir())
    with cat._write() as s:  # what an older dal left: expired, never marked finished
        from sqlalchemy import select

        from dal.catalog.models import VersionRow

        for r in s.scalars(select(VersionRow)):
            r.properties = {k: v for k, v in (r.properties or {}).items() if k != "files_deleted_at"}
    assert lifecycle.gc("old.p", keep_last=1).finished == tuple(range(VERSIONS - 1))
    assert lifecycle.gc("old.p", keep_last=1).finished == ()
    assert sorted(p.name for p in location.iterdir()) == kept


def test_cli_gc_shows_finished_versions(cat: Catalog, tmp_path: Path) -> None:
    _appends("cli.p", "petastorm")
    run_until_paused(_gc_code("cli.p"), "gc-expired", tmp_path)
    done = CliRunner().invoke(cli, ["--catalog", cat.url, "gc", "cli.p", "--keep-last", "1", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["finished_versions"] == list(range(VERSIONS - 1))
