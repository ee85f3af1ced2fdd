"""Ray Data over a scan: a Ray ``Dataset`` whose read tasks run dal's own reader on the Ray workers.

The driver plans the scan once (the pinned version's files only, pruned by partitions and statistics,
sharded when the scan is) and hands each Ray read task a run of whole chunks of that plan (the chunks
the source's ``iter_chunks`` reads, so a shuffled scan permutes rows exactly as it does in one process). Each task
reads its chunks with dal's reader: the scan's projection and filters pushed into the Parquet reads, Delta
deletion vectors, column mapping and partition values from the log honoured. Ray's ``select_columns``
(and other projections Ray pushes into its reads) narrows the scan's columns before anything is read;
Ray's own ``filter`` runs on the rows read (use ``scan.filter`` to push a filter into the files).

Why not ``ray.data.read_parquet`` over the version's files: a Delta table's deletion vectors, column
mapping and partition values (in the log, not always in the directory names) and dal's NaN-safe filters
are not in the files; reading them as plain Parquet returns deleted rows, physical column names or wrong
partition columns. One read path keeps every format exact.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal.adapters.arrays import fixed_shape, matrix, nulls_error
from dal.errors import FilterError, check_int, require

if TYPE_CHECKING:
    import ray.data

    from dal.read.source import RowGroups
    from dal.read.tasks import ReadTask

__all__ = ["to_ray"]


def _ray() -> Any:
    require("ray", "ray")
    return require("ray.data", "ray")


def _stored_schema(scan: RowGroups) -> pa.Schema:
    schema = scan.arrow_schema
    return pa.schema([schema.field(n) for n in scan.output_names])


def _out_schema(scan: RowGroups) -> pa.Schema:
    """The blocks' schema: the scan's columns, a fixed-shape tensor column (``FixedSizeList``, nested for N-D)
    as Arrow's fixed-shape tensor type, which Ray's numpy batches turn into one (rows, *shape) array (a plain
    FixedSizeList would be an object array of nested lists)."""
    out = []
    for field in _stored_schema(scan):
        shape = fixed_shape(field.type)
        if shape is not None:
            value = field.type
            while pa.types.is_fixed_size_list(value):
                value = value.value_type
            field = pa.field(field.name, pa.fixed_shape_tensor(value, list(shape)), field.nullable, field.metadata)
        out.append(field)
    return pa.schema(out)


def _block(scan: RowGroups, chunk: pa.Table, schema: pa.Schema) -> pa.Table:
    """One chunk as a block of ``schema``: fixed-shape tensor columns converted as ``matrix`` does for torch
    (the values buffer viewed as (rows, *shape)); a null in one is refused, naming the column."""
    columns = []
    for field in schema:
        column = chunk.column(field.name)
        if isinstance(field.type, pa.FixedShapeTensorType):
            m = matrix(column)
            if m is None:
                raise nulls_error(scan.dataset.name, field.name, "Ray fixed-shape")
            columns.append(pa.FixedShapeTensorArray.from_numpy_ndarray(m))
        else:
            columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _read(scan: RowGroups, tasks: Sequence[ReadTask], schema: pa.Schema) -> Iterator[pa.Table]:
    """A Ray read task's body (on a Ray worker): the scan's rows of ``tasks`` (whole chunks of its plan)."""
    if not tasks:
        yield schema.empty_table()
        return
    stored = _stored_schema(scan)
    for chunk in scan.iter_chunks(tasks):
        yield _block(scan, chunk.cast(stored), schema)


def _groups(spans: Sequence[tuple[int, int]], rows: Sequence[int], parts: int) -> list[tuple[int, int]]:
    """Consecutive chunk spans joined into at most ``parts`` runs of about equal rows: ``[(first, end)]``
    task indices."""
    if not spans:
        return []
    total = sum(rows)
    target = max(1, math.ceil(total / max(1, parts)))
    out: list[tuple[int, int]] = []
    start, held = spans[0][0], 0
    for a, b in spans:
        held += sum(rows[a:b])
        if held >= target and len(out) < parts - 1:
            out.append((start, b))
            start, held = b, 0
    if start < spans[-1][1]:
        out.append((start, spans[-1][1]))
    return out


def _datasource(scan: RowGroups) -> Any:
    """A ``ray.data.Datasource`` reading ``scan`` (a class made on first use: Ray is an optional import)."""
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class DalDatasource(Datasource):  # type: ignore[misc]
        def __init__(self, scan: RowGroups) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.scan = scan
            self._projection_map: dict[str, str] | None = None  # Ray's pushed-down projection (None: all)

        def get_name(self) -> str:
            return "dal"

        def supports_projection_pushdown(self) -> bool:
            return True

        def _scan(self) -> RowGroups:
            """The scan narrowed to the columns Ray's projection keeps (in the scan's order)."""
            keep = self.get_projection_map()
            if keep is None:
                return self.scan
            names = [c for c in self.scan.output_names if c in keep]
            # no column at all (Ray's count): one column still, as Ray counts no rows in a block without columns
            return self.scan.with_columns(names or self.scan.output_names[:1])

        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(  # type: ignore[override]
            self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
        ) -> list[Any]:
            scan = self._scan()
            schema = _out_schema(scan)
            tasks = scan.plan()
            if not tasks:  # one task yielding no rows: the Dataset still knows its schema
                meta = BlockMetadata(num_rows=0, size_bytes=0, exec_stats=None, input_files=())
                return [ReadTask(partial(_read, scan, [], schema), meta, schema=schema)]
            rows = [t.length if t.length is not None else t.live_rows for t in tasks]
            exact = scan.condition is None  # with a filter, rows are known only once read
            out = []
            for a, b in _groups(scan.chunk_spans(tasks), rows, parallelism if parallelism > 0 else len(tasks)):
                part = tasks[a:b]
                meta = BlockMetadata(
                    num_rows=sum(rows[a:b]) if exact else None,
                    size_bytes=None,
                    exec_stats=None,
                    input_files=tuple(dict.fromkeys(t.uri for t in part)),
                )
                out.append(
                    ReadTask(
                        partial(_read, scan, part, schema),
                        meta,
                        schema=schema,
                        per_task_row_limit=per_task_row_limit,
                    )
                )
            return out

    return DalDatasource(scan)


def _check_read_args(rd: Any, read_args: dict[str, Any]) -> None:
    """``read_datasource``'s own keyword arguments only: Ray passes any other name on to the datasource,
    which ignores it, so a misspelt ``overide_num_blocks=8`` would silently do nothing."""
    params = inspect.signature(rd.read_datasource).parameters
    known = sorted(n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY)
    unknown = sorted(set(read_args) - set(known))
    if unknown:
        raise FilterError(f"to_ray: unknown argument(s) {', '.join(unknown)} (ray.data.read_datasource takes "
                          f"{', '.join(known)})")  # fmt: skip
    if read_args.get("override_num_blocks") is not None:
        check_int(read_args["override_num_blocks"], "override_num_blocks", minimum=1)
    if read_args.get("parallelism", -1) != -1:
        check_int(read_args["parallelism"], "parallelism (-1: Ray chooses)", minimum=1)
    if isinstance(read_args.get("concurrency"), int | float | str):
        check_int(read_args["concurrency"], "concurrency", minimum=1)


def to_ray(scan: RowGroups, **read_args: Any) -> ray.data.Dataset:
    """A Ray ``Dataset`` of ``scan`` (``read_args``: ``ray.data.read_datasource``'s, e.g.
    ``override_num_blocks``, ``concurrency``, ``ray_remote_args``). Nothing is read until Ray executes it;
    ``ray.init`` is Ray's (it starts a local Ray when none is running)."""
    rd = _ray()
    if "datasource" in read_args:
        raise FilterError("to_ray reads the scan itself; do not pass a datasource")
    _check_read_args(rd, read_args)
    if not scan.output_names:
        raise FilterError("to_ray needs at least one column (Ray counts no rows in blocks without columns)")
    scan.log_read()  # the read log records a filtered read now, as to_spark does
    dataset: ray.data.Dataset = rd.read_datasource(_datasource(scan), **read_args)
    return dataset
