"""A new user runs an example twice on the same (default) catalog: the second run must work too and log the
versions it actually trained on (the MLflow example used to append a second time and crash on a shape error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mlflow_example_runs_twice_on_one_catalog(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    env = {k: v for k, v in os.environ.items() if k not in {"DAL_CATALOG_URL", "DAL_WAREHOUSE"}}
    env["DAL_HOME"] = str(tmp_path / "home")  # the default catalog, kept between the two runs
    runs = []
    for i in range(2):
        uri = f"sqlite:///{tmp_path / f'mlflow{i}.db'}"
        done = subprocess.run(
            [sys.executable, "examples/mlflow_read_log.py", "--tracking-uri", uri, "--artifacts", str(tmp_path / f"a{i}")],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = ([(r["dataset"], r["version"], r["filters"]) for r in run["reads"]] for run in runs)
    assert first == [("mlflow_demo.features", 1, None), ("mlflow_demo.features", 1, "station = 'YUL'"),
                     ("mlflow_demo.labels", 0, None)]  # fmt: skip
    assert second == [("mlflow_demo.features", 3, None), ("mlflow_demo.features", 3, "station = 'YUL'"),
                      ("mlflow_demo.labels", 1, None)]  # fmt: skip
    assert runs[0]["rmse"] == pytest.approx(runs[1]["rmse"]) and runs[1]["rmse"] < 0.2  # the same data again
