"""Fuzz the public Python API with hostile arguments: every failure must be a ``DalError``.

Seeded and time-bounded (see ``hostile.BUDGET_S``): dal.open / write / register / sync, the Scan builder and
its terminals, Dataset methods and the Catalog's methods. Any other exception (TypeError, OverflowError,
ArrowInvalid, OSError, …) is collected and the test fails listing each distinct one with the call that raised it.
"""

from __future__ import annotations

import itertools
import os
import random
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError
from dal.tensors.codecs import NdarrayCodec, ScalarCodec
from dal.tensors.schema import TensorField, TensorSchema
from tests.conftest import use_catalog
from tests.fuzz.hostile import SEED, budget, describe, hostile, hostile_str

Case = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def table(n: int = 20, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "s": [f"row{i}" for i in ids],
            "ts": pa.array((ids * 3600 * 10**6).astype("datetime64[us]"), pa.timestamp("us", "UTC")),
            "part": [f"p{i % 3}" for i in ids],
        }
    )


TENSORS = TensorSchema(
    "Fuzz", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2, 3), NdarrayCodec())]
)


@pytest.fixture
def world(sqlite_env: Catalog, tmp_path: Path) -> dict[str, Any]:
    return make_world(sqlite_env, tmp_path)


@pytest.fixture
def pg_world(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The same world on the real PostgreSQL (NUL bytes, 64-bit overflow and long text behave differently)."""
    return make_world(use_catalog(pg_url, tmp_path, monkeypatch), tmp_path)


def make_world(catalog: Catalog, tmp_path: Path) -> dict[str, Any]:
    dal.write(table(), "ds", partition_by=["part"], time_column="ts", tags=["prod"], description="fuzz")
    dal.write(table(10, 100), "ds")
    rows = {"id": np.arange(6), "x": [np.full((2, 3), i, np.float32) for i in range(6)]}
    dal.write(rows, "pt", format="petastorm", schema=TENSORS, time_column="id")
    return {"catalog": catalog, "root": f"{tmp_path}/a/b/c/loc", "ds": dal.open("ds"), "pt": dal.open("pt")}


def name(rng: random.Random) -> Any:
    return rng.choice(["ds", "ds", "pt", "fresh", "fresh.sub", hostile(rng)])


def location(rng: random.Random, root: str) -> Any:
    """Only places under the test's tmp dir or in memory/remote URLs (the tests run as root: never '/')."""
    pick = rng.random()
    if pick < 0.5:
        return f"{root}/{hostile_str(rng)}"
    if pick < 0.7:
        return f"memory://fuzz-bucket/{hostile_str(rng)}"
    if pick < 0.85:
        return rng.choice(["s3://AKID:secret@bucket/x", "memory://b/x?secret=abc", "nosuch://x/y", "az://c/x?sig=s"])
    return rng.choice([None, 0, b"/tmp", ["x"], ""])


def data(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.4:
        return table(rng.randint(0, 5), 1000 + rng.randint(0, 100))
    if pick < 0.55:
        return table(3).to_pandas()
    if pick < 0.65:
        return table(3).drop(["s"])
    if pick < 0.75:
        return pa.table({"id": ["not", "an", "int"]})
    if pick < 0.85:
        return rng.choice([{"id": np.arange(2), "x": [np.zeros((2, 3), np.float32)] * 2},
                           {"id": np.arange(2), "x": [np.zeros((3, 2), np.float64)] * 2},
                           [{"id": 1, "x": hostile(rng)}], {"id": hostile(rng)}])  # fmt: skip
    return hostile(rng)


def api_case(rng: random.Random, w: dict[str, Any]) -> Case:
    op = rng.randrange(4)
    if op == 0:
        return dal.open, (name(rng), rng.choice([None, hostile(rng)])), {}
    if op == 1:
        kwargs: dict[str, Any] = {}
        for key, gen in (
            ("mode", lambda: rng.choice(["append", "overwrite", hostile(rng)])),
            ("partition_by", lambda: rng.choice([["part"], ["nope"], hostile(rng)])),
            ("time_column", lambda: rng.choice(["ts", "id", hostile(rng)])),
            ("description", lambda: hostile(rng)),
            ("tags", lambda: rng.choice([["t1"], [hostile(rng)], hostile(rng)])),
            ("path", lambda: location(rng, w["root"])),
            ("format", lambda: rng.choice(["delta", "petastorm", "parquet", hostile(rng)])),
            ("schema", lambda: rng.choice([TENSORS, hostile(rng)])),
            ("schema_mode", lambda: rng.choice(["merge", hostile(rng)])),
            ("storage_options", lambda: rng.choice([{"x": hostile_str(rng)}, hostile(rng)])),
        ):
            if rng.random() < 0.3:
                kwargs[key] = gen()
        return dal.write, (data(rng), name(rng)), kwargs
    if op == 2:
        kwargs = {k: v for k, v in (("format", rng.choice(["delta", "petastorm", "parquet", hostile(rng)])),
                                     ("description", hostile(rng)), ("time_column", hostile(rng)))
                  if rng.random() < 0.5}  # fmt: skip
        return dal.register, (name(rng), location(rng, w["root"])), kwargs
    return dal.sync, (name(rng),), rng.choice([{}, {"storage_options": hostile(rng)}, {"catalog": hostile(rng)}])


class Lazy:
    """An argument built when the case runs (building a ``dal.col`` expression may itself raise)."""

    def __init__(self, build: Callable[[], Any], text: str) -> None:
        self.build, self.text = build, text

    def __repr__(self) -> str:
        return self.text


def expression(rng: random.Random) -> Lazy:
    """A ``dal.col`` expression with hostile column names and literals."""
    column = rng.choice(["id", "s", "part", "ts", hostile(rng)])
    value, other = hostile(rng), rng.choice([1, "p1", hostile(rng)])
    op = rng.choice(["==", "!=", "<", ">=", "isin", "is_null", "&", "|", "~"])

    def build() -> Any:
        c = dal.col(column)
        if op == "isin":
            return c.isin(value)
        if op == "is_null":
            return c.is_null()
        if op in ("&", "|"):
            left = c == other
            return (left & dal.col("id").__eq__(value)) if op == "&" else (left | value)
        if op == "~":
            return ~(c == value)
        return {"==": c.__eq__, "!=": c.__ne__, "<": c.__lt__, ">=": c.__ge__}[op](value)

    return Lazy(build, f"dal.col({column!r:.40}) {op} {value!r:.40}")


SCAN_METHODS: dict[str, Callable[[random.Random], tuple[Any, ...]]] = {
    "select": lambda r: tuple(r.choice(["id", "s", "part", hostile(r)]) for _ in range(r.randint(0, 3))),
    "filter": lambda r: (r.choice(["id > 3", "part = 'p1'", "s = 'row1' and id < 5", hostile(r), expression(r)]),),
    "window": lambda r: (hostile(r), hostile(r), r.choice([None, "ts", "id", hostile(r)])),
    "shard": lambda r: (r.choice([0, 1, hostile(r)]), r.choice([2, hostile(r)]), r.choice(["pad", hostile(r)])),
    "shuffle": lambda r: (r.choice([7, hostile(r)]), r.choice([10, hostile(r)])),
    "set_epoch": lambda r: (hostile(r),),
}
TERMINALS: dict[str, Callable[[random.Random], tuple[Any, ...]]] = {
    "count": lambda r: (),
    "to_arrow": lambda r: (),
    "plan": lambda r: (),
    "iter_batches": lambda r: (r.choice([4, hostile(r)]),),
    "split": lambda r: (hostile(r), hostile(r)),
    "sequences": lambda r: (r.choice([2, hostile(r)]), r.choice([1, hostile(r)])),
    "to_numpy": lambda r: (),
    "bytes_planned": lambda r: (),
}


def scan_case(rng: random.Random, w: dict[str, Any]) -> Case:
    steps = []
    for _ in range(rng.randint(1, 3)):
        method = rng.choice(list(SCAN_METHODS))
        steps.append((method, SCAN_METHODS[method](rng)))
    terminal = rng.choice(list(TERMINALS))
    steps.append((terminal, TERMINALS[terminal](rng)))

    which = rng.choice(["ds", "pt"])

    def chain() -> Any:
        scan = w[which].scan()
        for method, arguments in steps:
            scan = getattr(scan, method)(*(a.build() if isinstance(a, Lazy) else a for a in arguments))
        return scan

    chain.__qualname__ = f"{which}.scan()." + ".".join(f"{m}({', '.join(repr(a)[:40] for a in a_)})" for m, a_ in steps)
    return chain, (), {}


def dataset_case(rng: random.Random, w: dict[str, Any]) -> Case:
    d = w[rng.choice(["ds", "pt"])]
    method = rng.choice(["to_arrow", "iter_batches", "to_numpy", "iter_numpy", "to_pandas", "select", "filter",
                         "window", "shard", "shuffle", "sequences"])  # fmt: skip
    args = {
        "to_arrow": lambda: (hostile(rng),),
        "iter_batches": lambda: (hostile(rng), rng.choice([None, hostile(rng)])),
        "to_numpy": lambda: (rng.choice([None, ["id"], hostile(rng)]),),
        "iter_numpy": lambda: (hostile(rng),),
        "to_pandas": lambda: (rng.choice([None, hostile(rng)]),),
    }.get(method, lambda: (SCAN_METHODS.get(method) or TERMINALS[method])(rng))()
    return getattr(d, method), args, {}


def catalog_case(rng: random.Random, w: dict[str, Any]) -> Case:
    cat: Catalog = w["catalog"]
    ref = lambda: rng.choice([None, 0, 1, "prod", hostile(rng)])  # noqa: E731
    options: list[Case] = [
        (cat.get_dataset, (name(rng),), {}),
        (cat.version, (name(rng), ref()), {}),
        (cat.versions, (name(rng),), {}),
        (cat.schema, (name(rng), ref()), {}),
        (cat.tags, (name(rng),), {}),
        (cat.tag, (name(rng), ref(), rng.choice(["t2", hostile(rng)])), {"force": rng.choice([False, hostile(rng)])}),
        (cat.untag, (name(rng), rng.choice(["prod", hostile(rng)])), {}),
        (cat.diff, (name(rng), ref(), ref()), {}),
        (cat.partitions, (name(rng), ref()), {}),
        (cat.list_datasets, (rng.choice([None, "d*", hostile(rng)]),), {}),
        (cat.update_dataset, (name(rng),), {"description": hostile(rng), "time_column": hostile(rng)}),
        (
            cat.create_dataset,
            (hostile(rng),),
            {
                "format": rng.choice(["delta", hostile(rng)]),
                "location": location(rng, w["root"]),
                "description": hostile(rng),
            },
        ),
    ]
    return rng.choice(options)


def where(e: BaseException) -> str:
    """The exception type and the innermost frame of dal's own code it passed through (one entry per bug)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f"{os.sep}dal{os.sep}" in f.filename
              or f"{os.sep}catalog{os.sep}" in f.filename]  # fmt: skip
    site = f"{Path(frames[-1].filename).name}:{frames[-1].name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(e).__module__}.{type(e).__name__} at {site}"


def _consume(result: Any) -> None:
    if isinstance(result, Iterator):
        for _ in itertools.islice(result, 3):
            pass


def fuzz(world: dict[str, Any], make: Callable[[random.Random, dict[str, Any]], Case], seed: int) -> None:
    rng = random.Random(seed)
    failures: dict[str, str] = {}
    ran = succeeded = 0
    for _ in budget():
        fn, args, kwargs = make(rng, world)
        ran += 1
        try:
            _consume(fn(*(a.build() if isinstance(a, Lazy) else a for a in args), **kwargs))
            succeeded += 1
        except DalError as e:
            assert str(e), f"{describe(fn, args, kwargs)} raised an empty {type(e).__name__}"
        except Exception as e:  # the point of the test: anything else is a failure
            failures.setdefault(
                where(e), f"{type(e).__name__}: {str(e)[:150]!r}\n    from {describe(fn, args, kwargs)}"
            )
    print(f"{make.__name__}: {ran} cases, {succeeded} succeeded, {len(failures)} distinct failures")
    assert succeeded >= ran // 20, "the fuzzer hardly ever gets past argument checks: it tests little"
    assert not failures, f"{len(failures)} non-DalError failure(s) in {ran} cases:\n" + "\n".join(
        f"  {k}: {v}" for k, v in sorted(failures.items())
    )


def test_fuzz_open_write_register_sync(world: dict[str, Any]) -> None:
    fuzz(world, api_case, SEED)


def test_fuzz_scan_builder_and_terminals(world: dict[str, Any]) -> None:
    fuzz(world, scan_case, SEED + 1)


def test_fuzz_dataset_methods(world: dict[str, Any]) -> None:
    fuzz(world, dataset_case, SEED + 2)


def test_fuzz_catalog_methods(world: dict[str, Any]) -> None:
    fuzz(world, catalog_case, SEED + 3)


@pytest.mark.postgres
def test_fuzz_catalog_and_api_on_postgres(pg_world: dict[str, Any]) -> None:
    fuzz(pg_world, lambda rng, w: rng.choice([catalog_case, api_case])(rng, w), SEED + 4)
