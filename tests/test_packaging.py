"""What PyPI and pip see of the wheel: the license text, classifiers and project URLs, absolute image links in the
description, and extras that declare version ranges (so ``pip install 'dal-catalog[torch]'`` installs beside the
torch a team already has), resolved by pip itself in a fresh venv."""

from __future__ import annotations

import email.parser
import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
PREVIOUS_TORCH = "2.12.0"  # the minor before the one CI tests (2.13): what a team may already have

pytestmark = pytest.mark.slow  # builds the wheel (pip wheel runs the build backend in a subprocess)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    dist = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (found,) = dist.glob("dal_catalog-*.whl")
    yield found


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(name).decode())


def test_the_wheel_carries_the_apache_license_text(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        licenses = [n for n in z.namelist() if re.search(r"\.dist-info/licenses/LICENSE$", n)]
        assert licenses, z.namelist()
        text = z.read(licenses[0]).decode()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]


def test_one_top_level_package_typed_with_its_migrations(wheel: Path) -> None:
    """`dal` is the only import package: a user's own `catalog` package (a Django app) cannot shadow dal's, and
    py.typed covers dal.catalog too, so a user's mypy sees `VersionInfo`, not Any."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"dal"}, tops
    assert "dal/py.typed" in names
    assert "dal/catalog/types.py" in names and "dal/catalog/_alembic/env.py" in names


def test_classifiers_urls_and_an_absolute_image_link(wheel: Path) -> None:
    meta = _metadata(wheel)
    classifiers = meta.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert any(c.startswith("Development Status ::") for c in classifiers)
    assert any(c.startswith("Topic ::") for c in classifiers)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values()), urls
    # PyPI shows the README without the repository beside it: every image must be an absolute URL
    description = meta.get_payload()
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", description) + re.findall(r'<img[^>]+src="([^"]+)"', description)
    assert images, "the README shows the UI"
    assert all(i.startswith("https://") for i in images), images


def test_every_extra_declares_a_range_not_a_pin(wheel: Path) -> None:
    meta = _metadata(wheel)
    extras = set(meta.get_all("Provides-Extra") or [])
    assert {"torch", "tf", "spark", "all"} <= extras
    checked = 0
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        marker = str(req.marker or "").replace('"', "'")
        if "extra ==" not in marker or "extra == 'dev'" in marker:
            continue  # the core dependencies, and the test tools (dev is not for users)
        ops = {s.operator for s in req.specifier}
        assert "==" not in ops and "===" not in ops, f"{line}: an extra must accept a range, not one release"
        assert ops & {">=", ">", "~="}, f"{line}: no lower bound"
        assert ops & {"<", "<=", "~="}, f"{line}: no upper bound (the next major may break dal)"
        checked += 1
    assert checked >= 15
    reqs = [Requirement(x) for x in meta.get_all("Requires-Dist") or []]
    torch = [r for r in reqs if r.name == "torch" and r.marker is not None and r.marker.evaluate({"extra": "torch"})]
    assert torch and torch[0].specifier.contains(PREVIOUS_TORCH) and torch[0].specifier.contains("2.13.0")


def test_ci_still_installs_the_torch_it_tests() -> None:
    """The range is for users; the Makefile's install line pins the build CI tests (on this machine's disk)."""
    install = [
        line for line in (REPO / "Makefile").read_text().splitlines() if "pip install" in line and ".[dev]" in line
    ]
    assert install and all('"torch==2.13.0"' in line for line in install), install


def test_all_resolves_beside_the_previous_torch_minor(wheel: Path, tmp_path: Path) -> None:
    """``pip install '<wheel>[all]' torch==2.12.0`` in a fresh venv: pip's resolver finds a set (a dry run reads
    the packages' metadata; nothing is installed). With ``torch==2.13.0`` in the extra this was
    ResolutionImpossible."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    proc = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
         "--report", str(report), f"{wheel}[all]", f"torch=={PREVIOUS_TORCH}"],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    chosen = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
              for i in json.loads(report.read_text())["install"]}  # fmt: skip
    assert chosen["torch"] == PREVIOUS_TORCH
    assert chosen["dal-catalog"] == "0.1.0"
    for extra_package in ("deltalake", "pyspark", "tensorflow-cpu", "pandas", "starlette", "psycopg", "duckdb"):
        assert extra_package in chosen, extra_package
