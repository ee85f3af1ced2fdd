"""TransformSpec: the cost of a transform per chunk, numpy vs pandas ``batch_format``, and rows/s of
``to_torch`` / ``to_tf`` with and without one.

    python benchmarks/transform_bench.py            # 20,000 rows, ~1 min; --rows N; --rounds R

Data: a Petastorm dataset written by dal (id int64, img uint8 (32, 32, 3) PNG, vec float32 (64,) ndarray),
one chunk. Per chunk: ``dal.read.transform.Bound.apply`` on the whole table (decode + function + output checks),
best of ``--rounds``; "decode only" is ``Dataset.decode`` of the same columns. The functions do the same
work in both formats: numpy on stacked (rows, *shape) arrays, pandas cell by cell (Series.map), as a
Petastorm ``make_batch_reader`` TransformSpec is written.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402


def best(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="dal-transform-bench-")
    os.environ["DAL_HOME"] = home
    import dal
    from dal import ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema, TransformSpec
    from dal.catalog import Catalog
    from dal.read.transform import bind

    catalog = Catalog(f"sqlite:///{home}/catalog.db")
    schema = TensorSchema("Bench", [
        TensorField("id", np.int64, (), ScalarCodec()),
        TensorField("img", np.uint8, (32, 32, 3), ImageCodec("png")),
        TensorField("vec", np.float32, (64,), NdarrayCodec()),
    ])  # fmt: skip
    rng = np.random.default_rng(0)
    rows = [
        {"id": i, "img": rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), "vec": rng.normal(size=64).astype(np.float32)}
        for i in range(args.rows)
    ]  # fmt: skip
    dal.write(rows, "bench.frames", format="petastorm", schema=schema, catalog=catalog)
    ds = dal.open("bench.frames", catalog=catalog)

    def vec_numpy(b: dict[str, Any]) -> dict[str, Any]:
        b["vec"] = b["vec"] * 2
        b["norm"] = np.linalg.norm(b["vec"], axis=1).astype(np.float32)
        return b

    def vec_pandas(df: Any) -> Any:
        df["vec"] = df["vec"].map(lambda v: v * 2)
        df["norm"] = df["vec"].map(lambda v: np.float32(np.linalg.norm(v))).astype(np.float32)
        return df

    def img_numpy(b: dict[str, Any]) -> dict[str, Any]:
        b["img"] = b["img"].astype(np.float32) / 255
        return b

    def img_pandas(df: Any) -> Any:
        df["img"] = df["img"].map(lambda x: x.astype(np.float32) / 255)
        return df

    vec_fields = [("vec", np.float32, (64,), False), ("norm", np.float32, (), False)]
    img_fields = [("img", np.float32, (32, 32, 3), False)]
    print(f"per {args.rows:,}-row chunk (decode + function + checks), best of {args.rounds}:")
    print("| columns | numpy | pandas | no function | decode only |")
    print("|---|---|---|---|---|")
    for cols, fields, np_fn, pd_fn in [
        (("id", "vec"), vec_fields, vec_numpy, vec_pandas),
        (("id", "img"), img_fields, img_numpy, img_pandas),
    ]:
        scan = ds.select(*cols)
        table = scan.to_arrow()
        cells = []
        for spec in (
            TransformSpec(np_fn, fields),
            TransformSpec(pd_fn, fields, batch_format="pandas"),
            TransformSpec(selected_fields=list(cols)),
        ):
            bound = bind(spec, None, scan)
            cells.append(best(lambda bound=bound, table=table: bound.apply(table), args.rounds))
        cells.append(best(lambda table=table: ds.decode(table), args.rounds))
        print(f"| {', '.join(cols)} | " + " | ".join(f"{c * 1000:,.1f} ms" for c in cells) + " |")

    both = TransformSpec(lambda b: img_numpy(vec_numpy(b)), vec_fields + img_fields)
    print("\nrows/s end to end (batches of 256), best of rounds:")
    print("| path | rows/s |")
    print("|---|---|")
    for name, make in [
        ("to_torch", lambda: ds.to_torch(256)),
        ("to_torch + TransformSpec (numpy)", lambda: ds.to_torch(256, transform=both)),
        ("to_tf", lambda: ds.to_tf(256)),
        ("to_tf + TransformSpec (numpy)", lambda: ds.to_tf(256, transform=both)),
    ]:

        def run(make: Callable[[], Any] = make) -> None:
            n = sum(len(b["id"]) for b in make())
            assert n == args.rows

        print(f"| {name} | {args.rows / best(run, args.rounds):,.0f} |")


if __name__ == "__main__":
    main()
