"""Spark reads: a pinned version (or a scan of it) as a Spark DataFrame.

With a format's native data source on the classpath, Spark reads the pinned version itself (``versionAsOf``);
otherwise Spark reads exactly the version's files, or (deletion vectors, column mapping, shards, stores
without a Hadoop connector) its executors read the planned tasks with dal's reader."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal.errors import DalError
from dal.storage import uris
from dal.storage.partitions import NULL_PARTITION

if TYPE_CHECKING:
    from dal.read.pinned import Pinned

from dal import expr as E
from dal.read.plan import as_datetime, window_expr
from dal.read.source import RowGroups
from dal.spark.session import get_spark, hadoop_reaches, native_source


def scan_to_spark(scan: RowGroups, spark: Any = None) -> Any:
    """The pinned version in Spark with the scan's filters and window as Spark predicates (so Spark pushes
    them into its Parquet scan) and its projection as a select.

    A sharded scan is read by Spark's executors task by task (``read_tasks``): the DataFrame holds exactly
    the rank's rows, as ``to_arrow`` would. Shuffling orders rows, and a DataFrame has no order: the rows
    are the same either way."""
    spark = get_spark(spark)
    if scan.shard is not None or (
        not uris.is_local(scan.dataset.location) and not hadoop_reaches(spark, scan.dataset.location)
    ):
        # sharded, or no Hadoop filesystem for this store (no hadoop-aws here): executors read the planned
        # tasks with pyarrow, applying the projection, filters and the shard's row ranges as they read
        return read_tasks(scan, spark)
    df = read_version(scan, spark)
    conditions = list(scan.filters)
    if scan.window is not None:
        conditions.append(window_expr(scan.window, scan.arrow_schema))
    floating = {f.name for f in scan.arrow_schema if pa.types.is_floating(f.type)}
    ntz = {f.name for f in df.schema.fields if f.dataType.typeName() == "timestamp_ntz"}
    for c in conditions:
        df = df.where(spark_condition(c, floating, ntz))
    if scan.columns is not None:
        df = df.select(*scan.columns)
    return df


def spark_condition(e: Any, floating: set[str], ntz: Collection[str] = ()) -> Any:
    """A bound filter (``dal.expr.bind``) as a Spark Column with the semantics ``to_arrow`` gives it.

    Spark orders NaN above every number and makes NaN = NaN true; dal compares NaN as IEEE 754 does (only
    ``<>`` is true), so comparisons on ``floating`` columns are guarded. Naive datetimes are UTC; compared with a
    ``timestamp_ntz`` column (``ntz``) they are wall-clock literals of that type (a zoned literal would make
    Spark read the column in the session's time zone). A NULL ``isin`` argument is kept out of ``isin`` (NULL
    unless the value matches, as in SQL).
    """
    return _SparkCondition(floating, ntz).visit(e)


class _SparkCondition(E.Visitor[Any]):
    def __init__(self, floating: set[str], ntz: Collection[str] = ()) -> None:
        from pyspark.sql import functions as F

        self.F = F
        self.floating = floating
        self.ntz = set(ntz)
        self.null = F.lit(None).cast("boolean")

    def lit(self, v: Any, column: str | None = None) -> Any:
        if isinstance(v, datetime) and column in self.ntz:  # a wall-clock literal of the column's type
            wall = v if v.tzinfo is None else v.astimezone(UTC).replace(tzinfo=None)
            return self.F.lit(wall.isoformat(sep=" ")).cast("timestamp_ntz")
        return self.F.lit(as_datetime(v, "a filter value") if isinstance(v, datetime) else v)  # naive = UTC

    def visit_and(self, e: E.And) -> Any:
        return self.visit(e.left) & self.visit(e.right)

    def visit_or(self, e: E.Or) -> Any:
        return self.visit(e.left) | self.visit(e.right)

    def visit_not(self, e: E.Not) -> Any:
        return ~self.visit(e.operand)

    def visit_is_null(self, e: E.IsNull) -> Any:
        return self.F.col(e.column.name).isNull()

    def visit_fixed(self, e: E.Fixed) -> Any:
        return self.F.when(self.F.col(e.column.name).isNull(), self.null).otherwise(self.F.lit(e.result))

    def visit_is_in(self, e: E.IsIn) -> Any:
        c = self.F.col(e.column.name)
        present = [self.lit(v.value, e.column.name) for v in e.values if v.value is not None]
        term = c.isin(present) if present else self.F.lit(False)
        if e.column.name in self.floating:
            term = term & ~self.F.isnan(c)
        if any(v.value is None for v in e.values):
            term = term | self.null  # x IN (..., NULL) is NULL unless x matches
        return term

    def visit_like(self, e: E.Like) -> Any:  # Spark's LIKE also takes '\' as the escape character
        c = self.F.col(e.column.name)
        return c.ilike(e.pattern) if e.case_insensitive else c.like(e.pattern)

    def visit_compare(self, e: E.Compare) -> Any:
        F = self.F
        if isinstance(e.left, E.StrFunc):
            a = (F.lower if e.left.name == "lower" else F.upper)(F.col(e.left.column.name))
            b = self.lit(e.right.value)  # type: ignore[union-attr]
            return _compared(e.op, a, b)
        if not isinstance(e.left, E.Col):
            raise DalError(f"cannot translate {e!r} to Spark")
        a = F.col(e.left.name)
        b = F.col(e.right.name) if isinstance(e.right, E.Col) else self.lit(e.right.value, e.left.name)
        term = _compared(e.op, a, b)
        if isinstance(e.right, E.Col):
            if e.left.name not in self.floating and e.right.name not in self.floating:
                return term
            return (
                F.when(a.isNull() | b.isNull(), self.null)
                .when(F.isnan(a) | F.isnan(b), F.lit(e.op == "!="))
                .otherwise(term)
            )
        if e.left.name not in self.floating:
            return term
        # Spark: NaN > 1 is true. And the isnan term keeps Spark from pushing a bare comparison (or its
        # negation) into Parquet statistics, which leave NaN out of min/max.
        return term | F.isnan(a) if e.op == "!=" else term & ~F.isnan(a)


def _compared(op: str, a: Any, b: Any) -> Any:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def read_version(scan: RowGroups, spark: Any = None) -> Any:
    """A Spark DataFrame of exactly the pinned version ``scan`` reads (all of it: the caller applies the scan's
    filters and projection)."""
    dataset = scan.dataset
    from dal.formats.registry import get_format

    spark = get_spark(spark)
    src = native_source(spark, get_format(dataset.info.format))
    if src is not None:
        reader = spark.read.format(src.name).option(src.version_option, dataset.version.storage_version)
        for k, v in dataset.storage_options.items():
            reader = reader.option(k, v)
        return reader.load(uris.to_uri(dataset.location, dataset.storage_options))
    return _read_files(scan, spark)


def rows_to_spark(table: pa.Table, spark: Any = None) -> Any:
    """Rows held in memory (a change read's: ``dal.read.changed``) as a Spark DataFrame, handed to Spark from
    the driver as Arrow: timestamps in microseconds (as Spark holds them), a tensor column as its storage (a
    list per row), naive timestamps as TimestampNTZType (``_spark_schema``)."""
    spark = get_spark(spark)
    columns, fields = [], []
    for f, column in zip(table.schema, table.columns, strict=True):
        if isinstance(f.type, pa.ExtensionType):  # fixed-shape tensors: Spark takes the flat list
            column = pa.chunked_array([c.storage for c in column.chunks], f.type.storage_type)
            f = f.with_type(f.type.storage_type)
        handed = _handed(f, False)
        columns.append(column.cast(handed.type, safe=False) if handed.type != f.type else column)
        fields.append(handed)
    # one chunk per column: pyspark's createDataFrame of an Arrow table whose columns are chunked differently
    # (a change read's are: slices of several reads) drops rows (pyspark 4.3, seen with a change read's table)
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields)).combine_chunks()
    return spark.createDataFrame(table, schema=_spark_schema(fields))


def _spark_schema(fields: list[pa.Field], zoned: Collection[str] = ()) -> Any:
    """Spark StructType of Arrow fields: tz-aware timestamps are TimestampType, naive ones (Delta's
    timestamp_ntz, dal's naive = wall-clock UTC) TimestampNTZType, so a session in another time zone shows the
    same wall-clock values; except the ``zoned`` columns (stored as INT96: Spark's instants)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    fields = [
        f.with_type(pa.timestamp(f.type.unit, "UTC"))
        if f.name in zoned and pa.types.is_timestamp(f.type) and f.type.tz is None
        else f
        for f in fields
    ]
    return from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=True)


def _handed(f: pa.Field, zoned: bool) -> pa.Field:
    """A top-level field as Spark's Arrow reader takes it: timestamps in microseconds, zoned ones in UTC."""
    if not pa.types.is_timestamp(f.type):
        return f
    return f.with_type(pa.timestamp("us", "UTC" if zoned or f.type.tz is not None else None))


def _zoned(dataset: Pinned) -> set[str]:
    """The naive-timestamp columns whose Parquet files store INT96 (Spark's legacy encoding of instants: Spark
    reads them as TimestampType only), from the footer of one data file."""
    naive = {f.name for f in dataset.arrow_schema() if pa.types.is_timestamp(f.type) and f.type.tz is None}
    files = dataset.files() if naive else []
    if not files:
        return set()
    import pyarrow.parquet as pq

    fs, path = uris.filesystem(files[0].uri, dataset.storage_options)
    schema = pq.ParquetFile(path, filesystem=fs).schema
    return {
        c.path.split(".")[0] for c in (schema.column(i) for i in range(len(schema))) if c.physical_type == "INT96"
    } & naive


def read_tasks(scan: RowGroups, spark: Any) -> Any:
    """The scan's planned ReadTasks read by Spark's executors with pyarrow (``mapInArrow``): a distributed
    read of exactly the pinned version that needs no Hadoop filesystem for the storage (e.g. S3 without
    hadoop-aws). The scan's projection and filter are applied as each task is read, and a sliced task
    (a shard's cut of a row group) yields exactly its rows."""

    tasks = scan.plan()
    columns = list(scan.columns) if scan.columns is not None else scan.arrow_schema.names
    out_schema = pa.schema([scan.arrow_schema.field(c) for c in columns])
    rows = [
        (
            t.uri,
            t.row_group,
            json.dumps(t.partition_values),
            t.offset,
            -1 if t.length is None else t.length,
            json.dumps(list(getattr(t, "deleted", ()))),
            bool(getattr(t, "exact", False)),
        )
        for t in tasks
    ]
    payload = (
        scan.dataset.location,
        dict(scan.dataset.storage_options),
        scan.arrow_schema,
        scan.query.physical,
        columns,
        scan.row_filter,
        scan.query.scan_filter,  # widened where Parquet statistics could lose NaN rows (dal.expr.pushdown)
        scan.query.exact_filter,  # then applied to the rows read (None: the scan filter is exact)
        scan.query.scan_columns(),
    )
    zoned = _zoned(scan.dataset) & set(columns)
    # Spark's timestamps are microseconds; INT96 columns are instants to Spark (TimestampType): handed over as UTC
    # timestamps, not naive ones
    handed = pa.schema([_handed(f, f.name in zoned) for f in out_schema])
    convert = handed != out_schema

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dal.formats import fragments as frag
        from dal.read.sharding import slice_rows
        from dal.storage import uris as dio

        location, options, schema, physical, cols, row_filter, scan_filter, exact_filter, scan_cols = payload

        def refine(read: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in read:
                yield b.filter(exact_filter).select(cols)

        fs, _ = dio.filesystem(location, options)
        fmt = frag.parquet_format()
        for batch in batches:
            for uri, rg, values, offset, length, deleted, exact in zip(
                *(batch.column(i).to_pylist() for i in range(7)), strict=True
            ):
                parts = [tuple(v) for v in json.loads(values)]
                path = dio.filesystem(uri, options)[1]
                if exact:  # deletion vectors / column mapping: read whole, then filter
                    table = frag.read_exact(path, fs, rg, schema, physical, parts, json.loads(deleted))  # type: ignore[attr-defined]
                    if row_filter is not None:
                        table = table.filter(row_filter)
                    read: Iterator[pa.RecordBatch] = iter(table.select(cols).to_batches())
                else:
                    fragment = fmt.make_fragment(
                        path,
                        filesystem=fs,
                        partition_expression=frag.partition_expression(parts, schema),
                        row_groups=[rg],
                    )
                    read = fragment.to_batches(schema=schema, columns=scan_cols or cols, filter=scan_filter)
                    if exact_filter is not None:
                        read = refine(read)
                for b in slice_rows(read, offset, None if length < 0 else length):
                    yield b.cast(handed, safe=False) if convert else b  # ns -> us truncates, as Spark does

    task_schema = (
        "uri string, row_group int, partition_values string, offset long, length long, deleted string, exact boolean"
    )
    spark_schema = _spark_schema(list(handed), zoned)
    if not rows:
        return spark.createDataFrame([], spark_schema)
    frame = spark.createDataFrame(rows, task_schema).repartition(min(len(rows), spark.sparkContext.defaultParallelism))
    return frame.mapInArrow(run, spark_schema)


def _read_files(scan: RowGroups, spark: Any) -> Any:
    from pyspark.sql import functions as F

    dataset = scan.dataset
    files = dataset.files()
    arrow = dataset.arrow_schema()
    # deletion vectors / column mapping: plain Parquet reads would be wrong; nanosecond timestamps (pandas' and
    # pyarrow's Parquet): Spark's reader refuses them. The planned tasks read them exactly (in microseconds).
    nanos = any(pa.types.is_timestamp(f.type) and f.type.unit == "ns" for f in arrow)
    if any(f.deleted_rows for f in files) or dataset.physical_schema() or nanos:
        return read_tasks(RowGroups(pinned=dataset), spark)  # the whole version
    parts = list(dataset.version.partition_columns)
    zoned = _zoned(dataset)
    data_schema = _spark_schema([f for f in arrow if f.name not in parts], zoned)
    if not files:
        return spark.createDataFrame([], _spark_schema(list(arrow)))
    if parts and all(_hive_path(dataset.location, f.uri, f.partition_values) for f in files):
        # Spark's own partition discovery restores the columns; the full schema fixes their types
        full = _spark_schema([f for f in arrow if f.name not in parts] + [arrow.field(c) for c in parts], zoned)
        so = dataset.storage_options
        frame = spark.read.schema(full).option("basePath", uris.to_uri(dataset.location, so))
        return frame.parquet(*(uris.to_uri(f.uri, so) for f in files)).select(*arrow.names)
    # otherwise: group files by partition, each group gets its values as literal columns
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for f in files:
        groups.setdefault(f.partition_values, []).append(uris.to_uri(f.uri, dataset.storage_options))
    frames = []
    for values, paths in groups.items():
        frame = spark.read.schema(data_schema).parquet(*paths)
        for col, value in values:
            typ = _spark_schema([arrow.field(col)])[col].dataType
            frame = frame.withColumn(col, F.lit(value).cast(typ))
        frames.append(frame)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out.select(*arrow.names)


_PLAIN = re.compile(r"[A-Za-z0-9_.:-]+")  # fullmatch: '$' would accept a value ending in a newline


def _hive_path(root: str, uri: str, values: tuple[tuple[str, str | None], ...]) -> bool:
    """True when the file sits in plain ``col=value`` directories that Spark's discovery parses back exactly."""
    expected = "/".join(f"{c}={NULL_PARTITION if v is None else v}" for c, v in values)
    plain = all(v is None or _PLAIN.fullmatch(v) for _, v in values)
    return bool(plain) and uri.startswith(uris.join(root, expected) + "/")
