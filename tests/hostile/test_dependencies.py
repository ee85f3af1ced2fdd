"""Missing and broken optional dependencies (issues #22, #27 item 9): every missing extra is a
``MissingDependency`` naming the extra to install, and an installed package that fails to load says what
failed instead of "install it"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.errors import FormatError, MissingDependency, require
from tests.test_layers import uninstall

PANDAS = r"pandas is needed for this; install it with: pip install 'dal-catalog\[pandas\]'"


@pytest.fixture
def written(sqlite_env: Catalog) -> None:
    dal.write(pa.table({"a": [1, 2, 3]}), "d.x")
    schema = TensorSchema(
        "s", [TensorField("a", np.int64, (), ScalarCodec()), TensorField("m", np.float32, (2,), NdarrayCodec())]
    )
    dal.write({"a": np.arange(2), "m": np.zeros((2, 2), np.float32)}, "p.x", format="petastorm", schema=schema)


@pytest.mark.parametrize("name", ["d.x", "p.x"])
def test_to_pandas_without_pandas_names_the_extra(written: None, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    ds = dal.open(name)
    uninstall(monkeypatch, "pandas")
    with pytest.raises(MissingDependency, match=PANDAS):
        ds.to_pandas()
    with pytest.raises(MissingDependency, match=PANDAS):
        ds.scan().to_pandas()


def test_reading_delta_without_deltalake_names_the_extra(written: None, monkeypatch: pytest.MonkeyPatch) -> None:
    uninstall(monkeypatch, "deltalake")
    try:
        dal.open("d.x").to_arrow()
    except MissingDependency as e:
        assert "pip install 'dal-catalog[delta]'" in str(e)
    except FormatError as e:  # before: "delta-rs cannot load it", which reads like a damaged table
        pytest.fail(f"a missing extra reported as a damaged table: {e}")
    else:
        pytest.fail("read a Delta table without deltalake")


def _package(root: Path, name: str, body: str) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(body)


def test_an_installed_package_that_fails_to_load_says_what_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, "dal_broken_lib", 'raise ImportError("libfoo.so.3: cannot open shared object file")\n')
    _package(tmp_path, "dal_broken_dep", "import dal_no_such_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependency, match=r"dal_broken_lib is installed but fails to load: .*libfoo\.so\.3") as e:
        require("dal_broken_lib", "x")
    assert "is needed for this" not in str(e.value) and "dal-catalog[x]" in str(e.value)
    with pytest.raises(MissingDependency, match=r"installed but cannot be imported: it needs dal_no_such_module_xyz"):
        require("dal_broken_dep", "x")
    with pytest.raises(MissingDependency, match=r"dal_absent_pkg is needed for this; .*dal-catalog\[x\]"):
        require("dal_absent_pkg", "x")
    with pytest.raises(MissingDependency, match=r"dal_absent_pkg.sub is needed for this"):
        require("dal_absent_pkg.sub", "x")


@pytest.mark.parametrize(
    ("module", "extra", "named"),
    [("tensorflow", "tf", ("tensorflow-cpu", "pip install tensorflow")),
     ("cv2", "images", ("opencv-python-headless", "opencv-python"))],
)  # fmt: skip
def test_an_extra_with_variants_names_them_not_itself(
    monkeypatch: pytest.MonkeyPatch, module: str, extra: str, named: tuple[str, ...]
) -> None:
    """``[tf]`` and ``[images]`` install nothing (two variants of one import package overwrite each other): the
    error names the variants to choose from, never ``dal-catalog[tf]``, which would install nothing."""
    uninstall(monkeypatch, module)
    with pytest.raises(MissingDependency, match=f"{module} is needed for this") as e:
        require(module, extra)
    assert all(n in str(e.value) for n in named) and "dal-catalog[" not in str(e.value)
    assert "never two" in str(e.value)
