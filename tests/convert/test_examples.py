"""The Spark-launched training examples, run in this test session's Spark: TorchDistributor (2 torchrun
processes) and barrier mode (2 barrier tasks), each rank reading a disjoint, equal share of the version
the driver pinned."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import dal
from dal.catalog import Catalog

pytestmark = [pytest.mark.spark, pytest.mark.slow]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> ModuleType:
    """The example loaded from its file, not registered in sys.modules: cloudpickle ships its functions
    by value to torchrun's processes and Spark's workers (as it does for a script's own functions)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torchdistributor_ranks_train_on_disjoint_equal_shares(spark: Any, sqlite_env: Catalog) -> None:
    pytest.importorskip("torch")
    out = example("torchdistributor_train").run(spark, "ex.td", rows=301, num_processes=2, epochs=1, batch_size=50)
    assert out["version"] == 0 and out["world"] == 2
    assert out["rows_per_rank"] == [150, 150] and out["rows_seen_twice"] == 0  # 301 rows, "drop": one unused
    assert dal.open("ex.td").arrow_schema().field("features").type.value_type.bit_width == 32  # float32 vectors


def test_barrier_ranks_train_on_disjoint_equal_shares(spark: Any, sqlite_env: Catalog) -> None:
    out = example("spark_barrier_train").run(spark, "ex.barrier", rows=201, world=2, epochs=1, batch_size=40)
    assert out["version"] == 0 and out["world"] == 2
    assert out["rows_per_rank"] == [100, 100] and out["rows_seen_twice"] == 0
    assert out["same_weights"] and out["gpus"] == [[], []]  # no GPU resources configured here
