"""The installed wheel migrates its own catalog and a user's mypy sees its types: fresh venv, pip install the
wheel, run from outside the repo. And dal's pandas/polars/duckdb tests on the current majors of those three
(pandas 3, polars 2, duckdb 2), which the extras admit (issue 37)."""

from __future__ import annotations

import email.parser
import os
import re
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

    # a user's mypy sees dal's types (py.typed), dal.catalog's included: a wrong annotation is an error, not Any
    (work / "user.py").write_text(
        "import dal\nfrom dal.catalog import VersionInfo\n"
        "ds: str = dal.open('x')\nv: VersionInfo = dal.open('x').version\nn: str = v.number\n"
    )
    checked = _run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable", str(py),
                    "user.py"], work, env)  # fmt: skip
    assert 'user.py:3: error: Incompatible types in assignment (expression has type "Dataset"' in checked.stdout, (
        checked.stdout + checked.stderr
    )
    assert "user.py:5: error: Incompatible types in assignment" in checked.stdout and "user.py:4" not in checked.stdout


# the newest major of each on PyPI today: the extras admit them (pandas<4, polars<3, duckdb<3)
CURRENT_MAJORS = {"pandas": "3", "polars": "2", "duckdb": "2"}
ADAPTER_TESTS = ["tests/adapters/test_polars_duckdb.py", "tests/adapters/test_dataset_terminals.py",
                 "tests/writes/test_pandas_tensors.py", "tests/hostile/test_dependencies.py",
                 "tests/petastorm/test_schema_changes.py"]  # fmt: skip


@pytest.mark.slow
def test_the_adapters_pass_on_the_current_majors(tmp_path: Path) -> None:
    """pandas 3, polars 2 and duckdb 2 (no dependencies: the rest is this environment's) in a folder ahead of
    this environment's on the path, and dal's pandas/polars/duckdb tests run on them. Under pandas 3 dal took a
    DataFrame for something else (its classes' module is ``pandas``, no longer ``pandas.core.frame``)."""
    majors = tmp_path / "majors"
    pins = [f"{name}=={major}.*" for name, major in CURRENT_MAJORS.items()]
    got = _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(majors), *pins], tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    # polars 2 is a front end over a runtime wheel (polars-runtime-32 == its version): install that too
    (meta,) = majors.glob("polars-*.dist-info/METADATA")
    runtimes = [r.split(";")[0].strip() for r in email.parser.Parser().parsestr(meta.read_text()).get_all(
        "Requires-Dist") or [] if re.match(r"polars-runtime-\d+\s*==", r) and "extra" not in r]  # fmt: skip
    assert runtimes, "polars names no runtime"
    got = _run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(majors), *runtimes], tmp_path
    )
    assert got.returncode == 0, got.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PYTHONPATH"] = os.pathsep.join([str(majors), str(REPO)])
    versions = _run([sys.executable, "-c", "import pandas, polars, duckdb; "
                     "print(pandas.__version__, polars.__version__, duckdb.__version__)"], REPO, env)  # fmt: skip
    assert versions.returncode == 0, versions.stderr
    assert [v.split(".")[0] for v in versions.stdout.split()] == list(CURRENT_MAJORS.values()), versions.stdout
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow and not spark",
                  *ADAPTER_TESTS], REPO, env)  # fmt: skip
    assert tests.returncode == 0 and " passed" in tests.stdout, tests.stdout[-5000:] + tests.stderr[-2000:]
