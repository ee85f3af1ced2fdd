"""Spark side of ``dal.convert`` and of Spark writes: MLlib vectors as float arrays, float precision, the
cache key of a DataFrame, the Arrow batch size that sets the row-group size, and TensorSchema inference.

Everything here is a DataFrame transformation or a look at the DataFrame's plan: the writing itself is
``dal.write``'s (``dal.spark``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dal.errors import DalError, SchemaMismatch

if TYPE_CHECKING:
    from dal.tensors.schema import TensorSchema

FloatDtype = Literal["float32", "float64"] | None
CACHE_DIR_CONF = "spark.dal.cacheDir"
BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"

# leaves whose data (or code) is not spelled out in the plan's text: such a plan names the same data only
# inside the Spark application that built it (expression ids are per JVM), so its key is scoped to it
_PROCESS_LOCAL = (
    "LogicalRDD",
    "LocalRelation",
    "ExternalRDD",
    "InMemoryRelation",
    "Python",  # PythonUDF, BatchEvalPython, ArrowEvalPython, *InPandas, PythonDataSource…
    "MapInArrow",
    "MapInPandas",
    "InPandas",
    "AttachDistributedSequence",
    "StreamingRelation",
)


def _vector_types() -> tuple[type, ...]:
    from pyspark.ml.linalg import VectorUDT

    try:
        from pyspark.mllib.linalg import VectorUDT as OldVectorUDT

        return (VectorUDT, OldVectorUDT)
    except ImportError:  # pragma: no cover - mllib ships with pyspark
        return (VectorUDT,)


def quoted(name: str) -> str:
    """A column name as Spark resolves it literally (dots and backquotes included)."""
    return "`" + name.replace("`", "``") + "`"


def vector_array(c: Any, dtype: str = "float64") -> Any:
    """An MLlib vector column as a dense array of ``dtype``; a null vector stays a null array (Spark's
    ``vector_to_array`` fails the task on a null, with a Java stack trace)."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    return F.when(c.isNotNull(), vector_to_array(c, dtype))


def has_vectors(df: Any) -> bool:
    """Whether any top-level column of ``df`` is an MLlib vector (ml or mllib ``VectorUDT``)."""
    vector = _vector_types()
    return any(isinstance(f.dataType, vector) for f in df.schema.fields)


def prepare(df: Any, dtype: FloatDtype = None) -> Any:
    """``df`` with MLlib vectors (dense or sparse) as dense float arrays and, when ``dtype`` is given, every
    floating column (scalars and arrays of them, at any depth of arrays) cast to that precision.

    ``dtype=None`` keeps each column's precision (vectors become ``array<double>``). Returns ``df`` itself
    when nothing changes, so its plan (and cache key) stays the same.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if dtype not in (None, "float32", "float64"):
        raise DalError(f"dtype must be 'float32', 'float64' or None, not {dtype!r}")
    vector = _vector_types()
    target = {"float32": T.FloatType(), "float64": T.DoubleType(), None: None}[dtype]

    def cast_floats(t: Any) -> Any:
        if isinstance(t, T.FloatType | T.DoubleType):
            return target if target is not None else t
        if isinstance(t, T.ArrayType):
            return T.ArrayType(cast_floats(t.elementType), t.containsNull)
        return t

    changed = False
    columns = []
    for f in df.schema.fields:
        c = F.col(quoted(f.name))
        if isinstance(f.dataType, vector):
            c, changed = vector_array(c, dtype or "float64").alias(f.name), True
        else:
            new = cast_floats(f.dataType)
            if new != f.dataType:
                c, changed = c.cast(new).alias(f.name), True
        columns.append(c)
    return df.select(*columns) if changed else df


def cache_dir_conf(df: Any) -> str | None:
    """The session's ``spark.dal.cacheDir`` (None when unset or not readable)."""
    try:
        value = df.sparkSession.conf.get(CACHE_DIR_CONF, None)
    except Exception:
        return None
    return str(value) if value else None


def plan_key(df: Any) -> str:
    """A key naming the data ``df`` computes: the same DataFrame (or one built the same way over the same
    files) gives the same key.

    Plans over files or ranges are keyed by their canonical plan (expression ids normalised), the column
    names and types, and the input files with their sizes and modification times, so another process
    converting the same query shares the result. Plans over in-memory data or Python code (whose content
    the plan's text does not show) are keyed by the analysed plan within this Spark application only.
    """
    schema = df.schema.json()
    try:
        analyzed = df._jdf.queryExecution().analyzed()
        canonical = str(analyzed.canonicalized().toString())
        text = str(analyzed.toString())
    except Exception as e:  # Spark Connect: no JVM plan here
        raise DalError(
            f"dal.convert needs a classic (JVM) Spark session to key the DataFrame's plan ({type(e).__name__})"
        ) from None
    if any(token in canonical for token in _PROCESS_LOCAL):
        app = str(df.sparkSession.sparkContext.applicationId)
        parts = ["local", app, text, schema]
    else:
        parts = ["shared", canonical, schema, *_input_files(df)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _input_files(df: Any) -> list[str]:
    out = []
    for uri in sorted(df.inputFiles()):
        path = uri[len("file:") :] if uri.startswith("file:") else uri
        while path.startswith("//"):
            path = path[1:]
        try:
            st = os.stat(path)
            out.append(f"{uri}|{st.st_size}|{st.st_mtime_ns}")
        except OSError:
            out.append(uri)
    return out


def rows_per_row_group(df: Any, row_group_bytes: int, sample_rows: int = 256) -> int:
    """Rows per Arrow batch (each batch is one Parquet row group of the write) so that a row group holds
    about ``row_group_bytes`` of uncompressed data, estimated from the first ``sample_rows`` rows."""
    sample = df.limit(sample_rows).toArrow()
    per_row = max(1, sample.nbytes // max(1, sample.num_rows))
    return int(max(1, min(row_group_bytes // per_row, 10_000_000)))


@contextmanager
def batch_rows(spark: Any, rows: int | None) -> Iterator[None]:
    """Within the block, Spark hands Python workers Arrow batches of at most ``rows`` rows."""
    if rows is None:
        yield
        return
    before = spark.conf.get(BATCH_CONF, None)
    spark.conf.set(BATCH_CONF, str(rows))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(BATCH_CONF)
        else:
            spark.conf.set(BATCH_CONF, before)


def infer_tensor_schema(
    df: Any, name: str = "Schema", shapes: Mapping[str, tuple[int | None, ...]] | None = None
) -> TensorSchema:
    """A TensorSchema for ``df`` as petastorm's converter would make: scalar columns get a ScalarCodec,
    MLlib vectors and (nested) numeric arrays an NdarrayCodec with the shape given in ``shapes`` or found in
    the data (a dimension whose length varies between rows is ``None``).

    Raises ``SchemaMismatch`` naming a column no codec holds (structs, maps, arrays of strings…).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from dal.tensors.codecs import NdarrayCodec, ScalarCodec
    from dal.tensors.schema import TensorField, TensorSchema

    shapes = dict(shapes or {})
    unknown = sorted(set(shapes) - set(df.columns))
    if unknown:
        raise SchemaMismatch(f"shapes= names columns the DataFrame does not have: {unknown}")
    vector = _vector_types()
    scalars = {
        T.ByteType: np.int8, T.ShortType: np.int16, T.IntegerType: np.int32, T.LongType: np.int64,
        T.FloatType: np.float32, T.DoubleType: np.float64, T.BooleanType: np.bool_, T.StringType: np.str_,
        T.BinaryType: np.bytes_,
    }  # fmt: skip
    numeric = {k: v for k, v in scalars.items() if v not in (np.str_, np.bytes_)}

    fields: list[Any] = []
    to_measure: dict[str, int] = {}  # column -> array depth
    for f in df.schema.fields:
        t = f.dataType
        if isinstance(t, vector):
            fields.append((f.name, np.float64, 1, f.nullable))
            to_measure[f.name] = 1
            continue
        depth = 0
        while isinstance(t, T.ArrayType):
            t, depth = t.elementType, depth + 1
        kind = next((v for k, v in (numeric if depth else scalars).items() if isinstance(t, k)), None)
        typed = None if depth else _typed_scalar(t)
        if typed is not None:  # dates, timestamps, decimals: petastorm's dtypes, stored as their Arrow type
            fields.append((f.name, typed, 0, f.nullable))
            continue
        if kind is None:
            raise SchemaMismatch(
                f"cannot infer a petastorm codec for column {f.name!r} ({f.dataType.simpleString()}): "
                "pass schema=TensorSchema(...) for it"
            )
        fields.append((f.name, kind, depth, f.nullable))
        if depth:
            to_measure[f.name] = depth
    measured = _measure_shapes(df, {c: d for c, d in to_measure.items() if c not in shapes}, vector, F)
    out = []
    for col, kind, depth, nullable in fields:
        if isinstance(kind, tuple):
            dtype, storage = kind
            out.append(TensorField(col, dtype, (), ScalarCodec(storage), nullable))
            continue
        if depth == 0:
            out.append(TensorField(col, kind, (), ScalarCodec(), nullable))
            continue
        shape = tuple(shapes[col]) if col in shapes else measured[col]
        if len(shape) != depth:
            raise SchemaMismatch(f"shapes[{col!r}] has {len(shape)} dimension(s); the column has {depth}")
        out.append(TensorField(col, kind, shape, NdarrayCodec(), nullable))
    return TensorSchema(name, out)


def _typed_scalar(t: Any) -> tuple[Any, Any] | None:
    """(dtype, Arrow storage type) of a Spark date, timestamp or decimal scalar, as petastorm's make_reader
    gives them back: ``np.datetime64`` (a date as ``datetime64[D]``, a timestamp as ``datetime64[us]``) and
    ``Decimal``; stored as the Arrow type Spark hands the executors (timestamps as UTC instants, as dal's
    Spark writes store them; ``timestamp_ntz`` without a time zone). None for any other type."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(t, T.DateType):
        return np.datetime64, pa.date32()
    if isinstance(t, T.TimestampNTZType):
        return np.datetime64, pa.timestamp("us")
    if isinstance(t, T.TimestampType):
        return np.datetime64, pa.timestamp("us", tz="UTC")
    if isinstance(t, T.DecimalType):
        from decimal import Decimal

        return Decimal, pa.decimal128(t.precision, t.scale)
    return None


def _measure_shapes(
    df: Any, depths: dict[str, int], vector: tuple[type, ...], F: Any
) -> dict[str, tuple[int | None, ...]]:
    """Per array column, the length of each dimension when it is the same in every row (else None): one
    aggregation job over the DataFrame."""
    if not depths:
        return {}
    aggs = []
    for i, (col, depth) in enumerate(depths.items()):
        c = F.col(quoted(col))
        if isinstance(df.schema[col].dataType, vector):
            c = vector_array(c)
        for d in range(depth):
            # lengths at depth d: of the array itself (d=0), else of its arrays d levels down, flattened
            if d == 0:
                sizes = F.when(c.isNotNull(), F.array(F.size(c)))
            else:
                sizes = F.transform(_nest(c, d - 1, F), lambda a: F.size(a))
            aggs += [
                F.min(F.array_min(sizes)).alias(f"m{i}_{d}_min"),
                F.max(F.array_max(sizes)).alias(f"m{i}_{d}_max"),
            ]
    row = df.agg(*aggs).collect()[0].asDict()
    out: dict[str, tuple[int | None, ...]] = {}
    for i, (col, depth) in enumerate(depths.items()):
        dims: list[int | None] = []
        for d in range(depth):
            lo, hi = row[f"m{i}_{d}_min"], row[f"m{i}_{d}_max"]
            dims.append(int(lo) if lo is not None and lo == hi and lo >= 0 else None)
        out[col] = tuple(dims)
    return out


def _nest(c: Any, times: int, F: Any) -> Any:
    """The array elements ``times`` levels below the top, flattened into one array."""
    for _ in range(times):
        c = F.flatten(c)
    return c
