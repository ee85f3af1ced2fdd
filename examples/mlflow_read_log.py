"""Log what a model was trained on: dal's read log in the model's MLflow run.

    python examples/mlflow_read_log.py --tracking-uri sqlite:////tmp/mlruns/mlflow.db --artifacts /tmp/mlruns/a

Writes two small datasets (features in two versions, labels in one), trains a least-squares model on a
pinned, filtered version of the features joined with the labels, and logs to MLflow, beside the model's
parameters and metric, every (dataset, version, filters) the process read through dal (``dal.read_log()``):
as a JSON artifact ``dal_read_log.json`` and as run tags ``dal.read.<i>`` ("name@version WHERE filter"),
so ``dal open NAME VERSION`` reproduces the training data. Prints the run id and the reads as JSON.

MLflow 3's file store (``./mlruns``) is in maintenance mode (it refuses unless MLFLOW_ALLOW_FILE_STORE=true),
so the default here is a SQLite tracking store in a temporary directory. Needs ``pip install 'dal-catalog[mlflow]'``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

import dal
from dal.errors import require


def make_data() -> tuple[int, int]:
    """The features in two versions (a fresh one, then an append) and the labels; their version numbers
    (run again on the same catalog, the example writes new versions and trains on those)."""
    rng = np.random.default_rng(7)
    for start, mode in ((0, "overwrite"), (200, "append")):
        ids = np.arange(start, start + 200)
        x = rng.normal(size=(200, 3))
        written = dal.write(
            pa.table(
                {"id": ids, "station": np.where(ids % 2 == 0, "YUL", "YYZ"), **{f"x{i}": x[:, i] for i in range(3)}}
            ),
            "mlflow_demo.features",
            mode=mode,
        )
    ids = np.arange(400)
    feats = dal.open("mlflow_demo.features", written.number).to_arrow().sort_by("id")
    x = np.column_stack([feats.column(f"x{i}").to_numpy() for i in range(3)])
    y = x @ np.array([1.5, -2.0, 0.5]) + rng.normal(scale=0.1, size=400)
    labels = dal.write(pa.table({"id": ids, "y": y}), "mlflow_demo.labels", mode="overwrite")
    dal.lineage.clear_read_log()  # building the data is not training: start the log here
    return written.number, labels.number


def train(features_version: int, labels_version: int) -> tuple[np.ndarray, float, int]:
    """Least squares on the YUL rows of a pinned features version, joined with the labels."""
    features = dal.open("mlflow_demo.features", features_version).scan().filter("station = 'YUL'").to_arrow()
    labels = dal.open("mlflow_demo.labels", labels_version).to_arrow()
    y_by_id = dict(zip(labels.column("id").to_pylist(), labels.column("y").to_pylist(), strict=True))
    x = np.column_stack([features.column(f"x{i}").to_numpy() for i in range(3)])
    y = np.array([y_by_id[i] for i in features.column("id").to_pylist()])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    rmse = float(np.sqrt(np.mean((x @ coef - y) ** 2)))
    return coef, rmse, len(y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: a SQLite file in a temporary directory)")
    parser.add_argument("--artifacts", help="artifact directory of the experiment (default: beside the SQLite file)")
    parser.add_argument("--experiment", default="dal-read-log")
    args = parser.parse_args()
    mlflow = require("mlflow", "mlflow")

    where = Path(tempfile.mkdtemp(prefix="dal-mlflow-")) if not (args.tracking_uri and args.artifacts) else None
    uri = args.tracking_uri or f"sqlite:///{where / 'mlflow.db'}"
    artifacts = Path(args.artifacts) if args.artifacts else Path(str(where)) / "artifacts"
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    found = client.get_experiment_by_name(args.experiment)
    experiment = (
        found.experiment_id if found else client.create_experiment(args.experiment, artifacts.resolve().as_uri())
    )

    coef, rmse, rows = train(*make_data())
    reads = [{"dataset": r.dataset, "version": r.version, "filters": r.filters, "at": r.at} for r in dal.read_log()]
    with mlflow.start_run(experiment_id=experiment) as run:
        mlflow.log_params({"model": "least-squares", "rows": rows})
        mlflow.log_metric("rmse", rmse)
        mlflow.log_dict({"reads": reads}, "dal_read_log.json")
        for i, r in enumerate(reads):
            text = f"{r['dataset']}@{r['version']}" + (f" WHERE {r['filters']}" if r["filters"] else "")
            mlflow.set_tag(f"dal.read.{i}", text)
    print(
        json.dumps(
            {"run_id": run.info.run_id, "tracking_uri": uri, "rmse": rmse, "coef": coef.tolist(), "reads": reads}
        )
    )


if __name__ == "__main__":
    main()
