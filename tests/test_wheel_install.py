"""The installed wheel migrates its own catalog: fresh venv, pip install the wheel, run from outside the repo."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from dal.catalog.revision import HEAD

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return proc


@pytest.mark.slow
def test_wheel_creates_and_upgrades_its_catalog(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)], tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("dal_catalog-*.whl")  # the distribution is dal-catalog; the import and command stay dal

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    installed = _run([str(py), "-m", "pip", "install", "-q", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stderr

    work = tmp_path / "elsewhere"  # not the repo: the checkout's dal/ must not be reachable
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["DAL_CATALOG_URL"] = f"sqlite:///{tmp_path}/wheel-catalog.db"
    where = _run([str(py), "-c", "import dal.catalog.migrate as m; print(m.script_location())"], work, env)
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(env_dir)), where.stdout

    dal = str(env_dir / "bin" / "dal")
    version = _run([dal, "--version"], work, env)
    assert version.returncode == 0 and version.stdout.startswith("dal, version "), version.stdout + version.stderr
    up = _run([dal, "db", "upgrade"], work, env)
    assert up.returncode == 0 and f"from revision none to {HEAD}" in up.stdout, up.stdout + up.stderr
    ls = _run([dal, "ls"], work, env)
    assert ls.returncode == 0 and "no datasets yet" in ls.stderr, ls.stdout + ls.stderr  # stdout a pipe: tsv

    # a user project with its own top-level `catalog` package (a Django app, say) imports and uses dal
    (work / "catalog").mkdir()
    (work / "catalog" / "__init__.py").write_text('APP = "the user\'s own catalog app"\n')
    beside = (
        "import catalog, dal\n"
        "from dal.catalog import Catalog\n"
        "from dal.errors import CatalogReadOnly\n"
        'assert catalog.APP == "the user\'s own catalog app", catalog.__file__\n'
        "print(len(Catalog(__import__('os').environ['DAL_CATALOG_URL']).list_datasets()))\n"
    )
    used = _run([str(py), "-c", beside], work, env)
    assert used.returncode == 0 and used.stdout.strip() == "0", used.stdout + used.stderr

    # an older catalog is refused with the command to run, and that command fixes it
    env["DAL_CATALOG_URL"] = f"sqlite:///{tmp_path}/old-catalog.db"
    old = (
        "from alembic import command; from dal.catalog import migrate; from dal.catalog.engine import make_engine\n"
        "e = make_engine(__import__('os').environ['DAL_CATALOG_URL'])\n"
        "with e.begin() as c: command.upgrade(migrate._config(c), '0001')\n"
    )
    assert _run([str(py), "-c", old], work, env).returncode == 0
    refused = _run([dal, "ls"], work, env)
    assert refused.returncode == 1 and "run `dal db upgrade`" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _run([dal, "db", "upgrade"], work, env).returncode == 0
    assert _run([dal, "ls"], work, env).returncode == 0
