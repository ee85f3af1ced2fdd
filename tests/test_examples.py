"""The examples run as tests, on an isolated embedded catalog (a fresh DAL_HOME)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DAL_CATALOG_URL", "DAL_WAREHOUSE"}}
    env["DAL_HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


@pytest.mark.spark
def test_demo_registers_versions_and_browses_them(env: dict[str, str]) -> None:
    out = subprocess.run(["bash", "examples/demo.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "weather.sensor_features: version 2 (append)" in out.stdout
    assert "demo-prod" in out.stdout and "temp_mean_1h" in out.stdout
    assert "float32[16, 16] (ndarray)" in out.stdout and "uint8[16, 16, 3] (image/png)" in out.stdout
    assert "weather.radar_frames: version 0 -> 48 frames" in out.stdout
    # torch DDP on 2 ranks: equal, disjoint shares of the pinned version
    assert "rank 0/2 epoch 1" in out.stdout and "rank 1/2 epoch 1" in out.stdout
    assert "rows per rank [864, 864], rows seen by more than one rank: 0" in out.stdout
    # a checkpoint halfway through the last epoch (loader.state_dict()), a fresh loader resumes from it
    assert "rank 1/2 epoch 1: resumed from a checkpoint at step 7: 0 rows lost, 0 repeated" in out.stdout
    assert "batches per rank with ranks from torch.distributed: [14, 14]" in out.stdout  # 1728 rows / 2 ranks / 64
    # ranks from torch.distributed, spawned DataLoader workers: disjoint, covering shares by row id (issue #23)
    assert (
        "row ids per rank with ranks from torch.distributed (spawn workers): [864, 864], shared by ranks: 0, "
        "missing: 0, repeated: 0" in out.stdout
    )
    assert "did you mean 'weather.sensor_features'" in out.stderr
    assert f"sqlite:///{env['DAL_HOME']}/catalog.db" in out.stdout  # the embedded default, in the data dir
    versions = json.loads(
        subprocess.run(
            [sys.executable, "-m", "dal.cli", "versions", "weather.sensor_features", "--json"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    assert [(v["operation"], v["row_count"]) for v in versions] == [("create", 576), ("append", 1152), ("append", 1728)]
    assert versions[-1]["tags"] == ["demo-prod"] and versions[-1]["partition_columns"] == ["date"]

    # the other examples, on the same catalog
    tf_run = subprocess.run(
        [sys.executable, "examples/tf_train.py", "--epochs", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert tf_run.returncode == 0, tf_run.stderr[-3000:]
    assert "'temp_mean_1h': ([None], 'float64')" in tf_run.stdout and "trained on version 2" in tf_run.stdout
    ranks = [
        json.loads(subprocess.run([sys.executable, "examples/horovod_style.py", "--rank", str(r), "--size", "2"],
                                  cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout)
        for r in range(2)
    ]  # fmt: skip
    assert ranks[0]["rows"] == ranks[1]["rows"] == 576 // 2 and ranks[0]["steps"] == ranks[1]["steps"]
    assert not set(ranks[0]["keys"]) & set(ranks[1]["keys"])


def test_mlflow_example_logs_the_read_log_with_the_run(env: dict[str, str], tmp_path: Path) -> None:
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = subprocess.run(
        [sys.executable, "examples/mlflow_read_log.py", "--tracking-uri", uri, "--artifacts", str(tmp_path / "art")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    run = mlflow.MlflowClient(uri).get_run(result["run_id"])
    assert run.data.tags["dal.read.1"] == "mlflow_demo.features@1 WHERE station = 'YUL'"
    assert run.data.tags["dal.read.2"] == "mlflow_demo.labels@0" and run.data.metrics["rmse"] < 0.2
    saved = mlflow.MlflowClient(uri).download_artifacts(result["run_id"], "dal_read_log.json", str(tmp_path))
    reads = json.loads(Path(saved).read_text())["reads"]
    assert [(r["dataset"], r["version"], r["filters"]) for r in reads] == [
        ("mlflow_demo.features", 1, None),
        ("mlflow_demo.features", 1, "station = 'YUL'"),
        ("mlflow_demo.labels", 0, None),
    ]
    # the logged read reproduces the training rows, through the dal command
    head = subprocess.run(
        [sys.executable, "-m", "dal.cli", "head", "mlflow_demo.features", "--version", "1", "--where",
         reads[1]["filters"], "-n", "10000", "--json"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert len(json.loads(head.stdout)["rows"]) == int(run.data.params["rows"]) == 200
