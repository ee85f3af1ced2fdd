"""A catalog the user may read but not write (issue #22: "unreadable even with ?mode=ro&uri=true", as a WAL
database needs its ``-shm`` file and SQLite cannot create one in a folder the user cannot write): ``dal.open``,
``Catalog`` reads, ``dal ls``/``show`` and the explicit ``mode=ro`` URI all read it; writes are
``CatalogReadOnly``. Root ignores file permissions, so the reads run as ``nobody`` (a subprocess that imports
what it needs, then drops to uid 65534); as another user the folder is simply made read-only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog

NOBODY = 65534

READER = """
import os, sys
import dal
from dal.catalog import Catalog, lite
from dal.catalog.errors import CatalogReadOnly
from click.testing import CliRunner
from dal.cli.app import cli

url, warm = sys.argv[1], sys.argv[2]
# load every module a read needs while the interpreter's files (under /root) are still readable
import pyarrow as pa
dal.write(pa.table({"a": [1]}), "a.b", catalog=warm, path=os.path.dirname(warm[len("sqlite:///"):]) + "/data")
assert dal.open("a.b", catalog=warm).count() == 1
c = lite.connect(warm); c.close()
for args in (["ls"], ["show", "a.b"], ["versions", "a.b"]):
    assert CliRunner().invoke(cli, ["--catalog", warm, *args]).exit_code == 0
try:
    Catalog(warm).tag("a.b", 0, "prod")
except Exception:
    pass
if os.geteuid() == 0:
    os.setgid(NOBODY); os.setuid(NOBODY)
assert not os.access(os.path.dirname(url[len("sqlite:///"):]), os.W_OK)
print("ls", [d.name for d in Catalog(url).list_datasets()])
print("count", dal.open("a.b", catalog=url).count())
uri = "sqlite:///file:" + url[len("sqlite:///"):] + "?mode=ro&uri=true"
print("uri", [d.name for d in Catalog(uri).list_datasets()])
for args in (["ls"], ["show", "a.b"], ["versions", "a.b"]):
    r = CliRunner().invoke(cli, ["--catalog", url, *args, "-o", "plain"])  # plain: the versions' title names a.b
    print("cli", args[0], r.exit_code, "a.b" in r.output, r.output.strip()[:200].replace(chr(10), " "))
try:
    Catalog(url).tag("a.b", 0, "prod")
except CatalogReadOnly as e:
    print("write CatalogReadOnly")
""".replace("NOBODY", str(NOBODY))


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary folder another user can reach (pytest's own is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="dal-ro-"))
    os.chmod(path, 0o755)
    yield path
    for p in (path, *path.rglob("*")):
        if p.is_dir() and not p.is_symlink():
            os.chmod(p, 0o755)
    shutil.rmtree(path)


def test_a_catalog_in_a_folder_this_user_cannot_write_is_readable(open_tmp: Path) -> None:
    tmp_path = open_tmp
    folder = tmp_path / "shared"
    folder.mkdir()
    url = f"sqlite:///{folder}/catalog.db"
    cat = Catalog(url)
    dal.write(pa.table({"a": [1, 2, 3]}), "a.b", catalog=cat, path=str(tmp_path / "data"))
    cat.close()
    dal.api._catalogs.clear()
    assert sorted(p.name for p in folder.iterdir()) == ["catalog.db"]  # closed: no -wal, no -shm left
    (tmp_path / "warm").mkdir()
    warm = f"sqlite:///{tmp_path}/warm/warm.db"
    Catalog(warm).close()
    for p in (tmp_path, tmp_path / "data", *(tmp_path / "data").rglob("*")):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(folder / "catalog.db", 0o444)
    os.chmod(folder, 0o555)
    try:
        env = {**os.environ, "HOME": str(tmp_path), "OPENLINEAGE_DISABLED": "true"}
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(READER), url, warm],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip
    finally:
        os.chmod(folder, 0o755)
    out = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out[:3] == ["ls ['a.b']", "count 3", "uri ['a.b']"], out
    assert [line.split()[:4] for line in out[3:6]] == [["cli", c, "0", "True"] for c in ("ls", "show", "versions")]
    assert out[6] == "write CatalogReadOnly"
    assert sorted(p.name for p in folder.iterdir()) == ["catalog.db"]
