"""Spark types as dal writes them: a DataFrame's Arrow schema (timestamps in UTC, nullability), and
the Spark types no dal format holds, named per column."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    pass


def arrow_schema(df: Any) -> pa.Schema:
    """The Arrow schema the executors write ``df`` with: Spark's, timestamps normalised to UTC (nested ones
    too), and fields inside a nullable struct nullable.

    Spark's ``struct<a: bigint not null>`` means "a is set whenever the struct is"; in Arrow, ``a`` is null
    under a null struct, and pyarrow refuses to write a non-nullable column that holds nulls.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    session_tz = df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    schema = to_arrow_schema(df.schema, timezone=session_tz)
    # a column's comment (StructField.metadata["comment"]) is its description in the catalog
    comments = {f.name: str(f.metadata["comment"]) for f in df.schema.fields if (f.metadata or {}).get("comment")}
    return pa.schema([
        f.with_type(_writable(f.type, f.nullable)).with_metadata({"comment": comments[f.name]} if f.name in comments else f.metadata)
        for f in schema
    ])  # fmt: skip


def _writable(t: pa.DataType, nullable_above: bool) -> pa.DataType:
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        return pa.struct(
            [f.with_type(_writable(f.type, nullable_above or f.nullable)).with_nullable(f.nullable or nullable_above)
             for f in fields]
        )  # fmt: skip
    if pa.types.is_list(t):
        f = t.value_field
        return pa.list_(f.with_type(_writable(f.type, f.nullable)))
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        return pa.map_(key.with_type(_writable(key.type, False)), item.with_type(_writable(item.type, item.nullable)))
    return t


def type_problems(schema: Any, title: str) -> list[str]:
    """Each column (path) of a Spark schema that a ``title`` table ("Delta") cannot hold, with its type and why."""
    from pyspark.sql import types as T

    stored = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType,
              T.StringType, T.BinaryType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType)  # fmt: skip
    out: list[str] = []

    def walk(path: str, t: Any) -> None:
        if isinstance(t, T.StructType):
            for f in t.fields:
                walk(f"{path}.{f.name}" if path else f.name, f.dataType)
        elif isinstance(t, T.ArrayType):
            walk(f"{path}[]", t.elementType)
        elif isinstance(t, T.MapType):
            walk(f"{path}.key", t.keyType)
            walk(f"{path}.value", t.valueType)
        elif not isinstance(t, stored) or isinstance(t, T.UserDefinedType):
            out.append(f"{path} ({t.simpleString()}): {_why_not(t, title)}")

    walk("", schema)
    return out


def _why_not(t: Any, title: str) -> str:
    from pyspark.sql import types as T

    if isinstance(t, T.UserDefinedType):
        return "a user-defined type; convert it to its SQL type first (e.g. pyspark.ml.functions.vector_to_array)"
    if isinstance(t, T.NullType):
        return "has no type (every value is null); cast it to the type it should have, e.g. F.lit(None).cast('string')"
    if isinstance(t, T.VariantType):
        return f"dal writes no {title} variant columns; store it as a JSON string (F.to_json)"
    if isinstance(t, T.CalendarIntervalType | T.DayTimeIntervalType | T.YearMonthIntervalType):
        return f"{title} has no interval type; store it as a count of a unit (bigint)"
    if type(t).__name__ == "TimeType":
        return f"{title} has no time-of-day type; store it as bigint microseconds or a string"
    return f"{title} has no such type"
