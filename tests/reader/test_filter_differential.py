"""Differential test of the whole filter language against DuckDB.

Random filters (comparisons with literals and with other columns, IN lists with NULL, IS NULL,
BETWEEN, [NOT] LIKE / ILIKE, abs / lower / upper compared with literals, AND / OR / NOT) over typed columns with NULLs (ints of four widths, float32/float64 with NaN,
±inf and -0.0, decimals, strings with quotes, booleans, dates, timestamps), written as ``dal.col`` trees
AND as SQL strings, are run through every terminal (to_arrow, count, shard, split, to_torch, to_spark)
on unpartitioned Parquet, hive-partitioned Parquet and a partitioned Delta table (small row groups, so
partition and statistics pruning decide many rows), and compared with DuckDB on the same rows.

The reference spells out dal's documented semantics in DuckDB's SQL: SQL's three-valued logic, literals
compared exactly as numbers (``dal.expr``), a float column compared as DOUBLE with the literal as DOUBLE,
and NaN as IEEE 754 (DuckDB orders NaN above every number and makes NaN = NaN true).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dal
from dal import col
from dal.catalog import Catalog

duckdb = pytest.importorskip("duckdb")  # in the dev group; CI installs it (skipping fails the run there)

ROWS = 240
# examples of the main property; DAL_DIFF_EXAMPLES=5000 searches deeper (minutes), the default is CI's
EXAMPLES = int(os.environ.get("DAL_DIFF_EXAMPLES", "100"))
ROW_GROUP = 16
DAY0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = {"derandomize": True, "deadline": None, "suppress_health_check": list(HealthCheck), "database": None}

# column -> kind; p_s and p_i are the partition columns of the partitioned variants
KINDS = {
    "i8": "int", "i16": "int", "i32": "int", "i64": "int",
    "f32": "float", "f64": "float", "dec": "dec",
    "s": "str", "b": "bool", "d": "date", "ts": "ts",
    "p_s": "str", "p_i": "int",
}  # fmt: skip
TYPES = {
    "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
    "f32": pa.float32(), "f64": pa.float64(), "dec": pa.decimal128(7, 2),
    "s": pa.string(), "b": pa.bool_(), "d": pa.date32(), "ts": pa.timestamp("us", tz="UTC"),
    "p_s": pa.string(), "p_i": pa.int64(),
}  # fmt: skip
BOUNDS = {"i8": 2**7, "i16": 2**15, "i32": 2**31, "i64": 2**63, "p_i": 2**63}
STRINGS = ["YUL", "YYZ", "o'k", "", "é", "YUL ", "a"]
# LIKE patterns (no backslash: DuckDB's LIKE has no default escape, dal's and Spark's take '\\') and cased literals
PATTERNS = ["Y%", "%L", "_U_", "%", "", "o'%", "é", "y%", "%l ", "YU_", "_", "%Y%", "A", "%É%"]
CASED = ["yul", "YUL", "o'k", "O'K", "é", "É", "", "a", "A", "yul ", "yyz", "B"]


def make_table() -> pa.Table:
    rng = np.random.default_rng(7)

    def nulls(values: list[Any], p: float = 0.15) -> list[Any]:
        return [None if rng.random() < p else v for v in values]

    n = ROWS
    i = np.arange(n)
    floats = [-0.0, 0.0, math.nan, math.inf, -math.inf, 0.1, 0.5, 1.5, -2.25, 1e39, 3.0]
    cols: dict[str, list[Any]] = {
        "i8": nulls([int(x) for x in rng.integers(-128, 128, n)]),
        "i16": nulls([int(x) for x in (i * 97 % 4001) - 2000]),  # spread: row-group statistics narrow
        "i32": nulls([int(x) for x in rng.integers(-5, 6, n)]),
        "i64": nulls([int(x) for x in i * 3 - 300]),  # sorted: pruning decides whole row groups
        "f32": nulls([floats[int(x)] if x < len(floats) else float(x) / 4 for x in rng.integers(0, 20, n)]),
        "f64": nulls([floats[int(x)] if x < len(floats) else float(x) / 8 - 1 for x in rng.integers(0, 30, n)]),
        "dec": nulls([Decimal(int(x)).scaleb(-2) for x in rng.integers(-500, 500, n)]),
        "s": nulls([STRINGS[int(x)] for x in rng.integers(0, len(STRINGS), n)]),
        "b": nulls([bool(x) for x in rng.integers(0, 2, n)]),
        "d": nulls([(DAY0 + timedelta(days=int(x))).date() for x in rng.integers(0, 6, n)]),
        "ts": nulls([DAY0 + timedelta(hours=int(x), microseconds=int(y)) for x, y in rng.integers(0, 48, (n, 2))]),
        "p_s": nulls([["a", "b"][int(x)] for x in rng.integers(0, 2, n)], 0.1),
        "p_i": nulls([int(x) for x in rng.integers(0, 3, n)], 0.1),
    }
    # row groups whose only non-NaN value is one number (Parquet statistics leave NaN out, so min == max
    # there, and pyarrow substitutes that value for the column in the filter): the first row group of the
    # flat file in f64, and every file of one partition in f32
    cols["f64"][:ROW_GROUP] = [[math.nan, 1.5, None][int(x)] for x in rng.integers(0, 3, ROW_GROUP)]
    for k in range(n):
        if cols["p_s"][k] == "b" and cols["p_i"][k] == 1:
            cols["f32"][k] = [math.nan, 0.5, 0.5][int(rng.integers(0, 3))]
    arrays = {"id": pa.array(i, pa.int64())} | {k: pa.array(v, TYPES[k]) for k, v in cols.items()}
    return pa.table(arrays)


TABLE = make_table()


# -- the filter AST of this test: rendered as dal.col trees, dal SQL and DuckDB SQL ----------------------


@dataclass(frozen=True)
class Cmp:
    column: str
    op: str  # ==, !=, <, <=, >, >=
    value: Any  # a literal, or ColRef
    flipped: bool = False  # written as "literal op column"


@dataclass(frozen=True)
class ColRef:
    name: str


@dataclass(frozen=True)
class In:
    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Null:
    column: str


@dataclass(frozen=True)
class Between:
    column: str
    low: Any
    high: Any


@dataclass(frozen=True)
class Like:
    column: str
    pattern: str
    ignore_case: bool
    negate: bool


@dataclass(frozen=True)
class Func:
    fn: str  # abs, lower, upper
    column: str
    op: str
    value: Any
    flipped: bool = False


@dataclass(frozen=True)
class Bool:
    op: str  # and, or, not
    args: tuple[Any, ...]


SQL_OPS = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def dal_sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, date):
        return f"DATE '{v.isoformat()}'"
    if isinstance(v, float):
        return repr(v)
    return str(v)  # int, Decimal


def to_sql(e: Any) -> str:
    """The filter as a dal SQL WHERE string."""
    if isinstance(e, Cmp):
        right = e.value.name if isinstance(e.value, ColRef) else dal_sql_literal(e.value)
        if e.flipped:
            return f"{right} {SQL_OPS[FLIP[e.op]]} {e.column}"
        return f"{e.column} {SQL_OPS[e.op]} {right}"
    if isinstance(e, In):
        return f"{e.column} IN ({', '.join(dal_sql_literal(v) for v in e.values)})"
    if isinstance(e, Null):
        return f"{e.column} IS NULL"
    if isinstance(e, Between):
        return f"{e.column} BETWEEN {dal_sql_literal(e.low)} AND {dal_sql_literal(e.high)}"
    if isinstance(e, Like):
        return f"{e.column} {'NOT ' if e.negate else ''}{'ILIKE' if e.ignore_case else 'LIKE'} {dal_sql_literal(e.pattern)}"
    if isinstance(e, Func):
        if e.flipped:
            return f"{dal_sql_literal(e.value)} {SQL_OPS[FLIP[e.op]]} {e.fn}({e.column})"
        return f"{e.fn}({e.column}) {SQL_OPS[e.op]} {dal_sql_literal(e.value)}"
    if e.op == "not":
        return f"NOT ({to_sql(e.args[0])})"
    return "(" + f" {e.op.upper()} ".join(to_sql(a) for a in e.args) + ")"


def to_col(e: Any) -> Any:
    """The filter as a dal.col expression."""
    if isinstance(e, Cmp):
        right = col(e.value.name) if isinstance(e.value, ColRef) else e.value
        ops: dict[str, Callable[[Any, Any], Any]] = {
            "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
        }  # fmt: skip
        if e.flipped and not isinstance(e.value, ColRef):
            return ops[FLIP[e.op]](right, col(e.column))  # e.g. 5 > col("x"): Python reflects it
        return ops[e.op](col(e.column), right)
    if isinstance(e, In):
        return col(e.column).isin(list(e.values))
    if isinstance(e, Null):
        return col(e.column).is_null()
    if isinstance(e, Between):
        return col(e.column).between(e.low, e.high)
    if isinstance(e, Like):
        like = col(e.column).ilike(e.pattern) if e.ignore_case else col(e.column).like(e.pattern)
        return ~like if e.negate else like
    if isinstance(e, Func):
        operand = getattr(col(e.column), e.fn)()
        if e.flipped:
            return FUNC_OPS[FLIP[e.op]](e.value, operand)  # e.g. 5 > col("x").abs(): Python reflects it
        return FUNC_OPS[e.op](operand, e.value)
    if e.op == "not":
        return ~to_col(e.args[0])
    out = to_col(e.args[0])
    for a in e.args[1:]:
        out = (out & to_col(a)) if e.op == "and" else (out | to_col(a))
    return out


FUNC_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}  # fmt: skip


def exact(v: Any) -> str:
    """A number's exact decimal spelling (a float as it prints: dal reads 0.1 as 0.1 on exact columns)."""
    d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    return format(d, "f")


def duck_literal(v: Any, kind: str) -> str:
    """A literal typed for DuckDB so that it compares as dal says it does with a column of ``kind``."""
    if v is None:
        return "NULL"
    if kind in ("int", "dec"):
        text = exact(v)
        scale = len(text.split(".")[1]) if "." in text else 0
        return f"CAST('{text}' AS DECIMAL(38, {scale}))"
    if kind == "float":
        return f"CAST('{exact(v) if not isinstance(v, float) else repr(v)}' AS DOUBLE)"
    if isinstance(v, datetime):
        return f"TIMESTAMPTZ '{v.isoformat(sep=' ')}'"
    return dal_sql_literal(v)


def duck_column(name: str, against: Any = None) -> str:
    kind = KINDS[name]
    if kind == "float":
        return f"CAST({name} AS DOUBLE)"
    if kind == "date" and isinstance(against, datetime):
        return f"CAST({name} AS TIMESTAMPTZ)"  # a date is its day's midnight (UTC)
    return name


def to_duck(e: Any) -> str:
    """The reference: the same filter in DuckDB's SQL with dal's semantics spelled out."""
    if isinstance(e, Cmp):
        op = SQL_OPS[e.op]
        if isinstance(e.value, ColRef):
            a, b = e.column, e.value.name
            term = f"({duck_column(a)} {op} {duck_column(b)})"
            floats = [c for c in (a, b) if KINDS[c] == "float"]
            if not floats:
                return term
            nan = " OR ".join(f"isnan({c})" for c in floats)
            return (
                f"(CASE WHEN {a} IS NULL OR {b} IS NULL THEN NULL WHEN {nan} THEN {str(e.op == '!=').upper()} "
                f"ELSE {term} END)"
            )
        kind = KINDS[e.column]
        term = f"({duck_column(e.column, e.value)} {op} {duck_literal(e.value, kind)})"
        if kind == "float":
            return f"(CASE WHEN isnan({e.column}) THEN {str(e.op == '!=').upper()} ELSE {term} END)"
        return term
    if isinstance(e, In):
        kind = KINDS[e.column]
        against = next((v for v in e.values if isinstance(v, datetime)), None)
        # NaN IN (...) is never true: DuckDB's NaN = NaN does not matter, no literal is NaN
        return f"({duck_column(e.column, against)} IN ({', '.join(duck_literal(v, kind) for v in e.values)}))"
    if isinstance(e, Null):
        return f"({e.column} IS NULL)"
    if isinstance(e, Between):
        return to_duck(Bool("and", (Cmp(e.column, ">=", e.low), Cmp(e.column, "<=", e.high))))
    if isinstance(e, Like):  # the patterns hold no backslash: DuckDB's LIKE has no default escape
        return f"({'NOT ' if e.negate else ''}({e.column} {'ILIKE' if e.ignore_case else 'LIKE'} {dal_sql_literal(e.pattern)}))"
    if isinstance(e, Func):
        op = SQL_OPS[e.op]
        if e.fn in ("lower", "upper"):
            return f"({e.fn}({e.column}) {op} {dal_sql_literal(e.value)})"
        kind = KINDS[e.column]
        if kind == "int":  # HUGEINT: abs(-128::TINYINT) overflows in DuckDB, dal compares it exactly
            return f"(abs(CAST({e.column} AS HUGEINT)) {op} {duck_literal(e.value, kind)})"
        term = f"(abs({duck_column(e.column)}) {op} {duck_literal(e.value, kind)})"
        if kind == "float":
            return f"(CASE WHEN isnan({e.column}) THEN {str(e.op == '!=').upper()} ELSE {term} END)"
        return term
    if e.op == "not":
        return f"(NOT {to_duck(e.args[0])})"
    return "(" + f" {e.op.upper()} ".join(to_duck(a) for a in e.args) + ")"


# -- strategies ----------------------------------------------------------------------------------------


def column_values(name: str) -> list[Any]:
    """The values of a column that a SQL literal can spell (no NULL, NaN or ±inf)."""
    return [
        v
        for v in TABLE.column(name).to_pylist()
        if v is not None and not (isinstance(v, float) and not math.isfinite(v))
    ]


def literals(name: str) -> st.SearchStrategy[Any]:
    """Literals for column ``name``: values it holds, neighbours, fractions, the type's edges, far out."""
    kind, seen = KINDS[name], column_values(name)
    if kind == "int":
        edge = BOUNDS[name]
        return st.one_of(
            st.sampled_from(seen),
            st.sampled_from(seen).map(lambda v: v + 1),
            st.sampled_from(seen).map(lambda v: v + 0.5),
            st.sampled_from(seen).map(lambda v: Decimal(v) - Decimal("0.5")),
            st.sampled_from([edge - 1, edge, -edge, -edge - 1, 10**20, 1e20, -1e20, 2.0, 99999999999999999999999]),
        )
    if kind == "float":
        return st.one_of(
            st.sampled_from(seen),
            st.sampled_from([0.1, 0.5, -0.0, 1e39, -1e39, 3, -2, Decimal("0.1"), Decimal("1.5"), 2**53 + 1]),
            st.sampled_from(seen).map(lambda v: v + 0.25 if math.isfinite(v) else v),
        )
    if kind == "dec":
        return st.one_of(
            st.sampled_from(seen),
            st.sampled_from(seen).map(lambda v: v + Decimal("0.005")),
            st.sampled_from([Decimal("0.125"), 1, -3, 0.5, 1e10, Decimal("99999.99"), Decimal("100000")]),
        )
    if kind == "str":
        return st.sampled_from([*STRINGS, "zz", "YU", "a", "b", "c"])
    if kind == "bool":
        return st.booleans()
    if kind == "date":
        days = [(DAY0 + timedelta(days=k)).date() for k in range(-1, 8)]
        moments = [DAY0 + timedelta(days=k, hours=h) for k in range(0, 6) for h in (0, 12)]
        return st.one_of(st.sampled_from(days), st.sampled_from(moments))
    return st.one_of(
        st.sampled_from(seen),
        st.sampled_from(seen).map(lambda v: v + timedelta(microseconds=1)),
        st.sampled_from([DAY0, DAY0 + timedelta(days=1), DAY0 + timedelta(hours=30, minutes=30)]),
    )


COMPARABLE = {
    "int": ["int", "float"], "float": ["int", "float"], "dec": [], "str": ["str"], "bool": ["bool"],
    "date": ["date"], "ts": ["ts"],
}  # fmt: skip


@st.composite
def leaves(draw: st.DrawFn, columns: tuple[str, ...]) -> Any:
    name = draw(st.sampled_from(columns))
    kind = KINDS[name]
    shape = draw(st.sampled_from(["cmp", "cmp", "cmp", "colcmp", "in", "null", "between", "func"]))
    if shape == "func":
        if kind == "str":
            if draw(st.booleans()):
                return Like(name, draw(st.sampled_from(PATTERNS)), draw(st.booleans()), draw(st.booleans()))
            fn = draw(st.sampled_from(["lower", "upper"]))
            return Func(
                fn, name, draw(st.sampled_from(list(SQL_OPS))), draw(st.sampled_from(CASED)), draw(st.booleans())
            )
        if kind in ("int", "float", "dec"):
            value = draw(literals(name).filter(lambda v: not isinstance(v, str)))
            if draw(st.booleans()):
                value = -value
            return Func("abs", name, draw(st.sampled_from(list(SQL_OPS))), value, draw(st.booleans()))
        shape = "cmp"
    if shape == "colcmp":
        others = [c for c in columns if KINDS[c] in COMPARABLE[kind] and c != name]
        if others:
            return Cmp(name, draw(st.sampled_from(list(SQL_OPS))), ColRef(draw(st.sampled_from(others))))
        shape = "cmp"
    if shape == "cmp":
        return Cmp(name, draw(st.sampled_from(list(SQL_OPS))), draw(literals(name)), draw(st.booleans()))
    if shape == "in":
        values = draw(st.lists(literals(name), min_size=1, max_size=4))
        if draw(st.integers(0, 4)) == 0:
            values.append(None)
        return In(name, tuple(values))
    if shape == "null":
        return Null(name)
    low, high = sorted([draw(literals(name)), draw(literals(name))], key=sort_key)
    return Between(name, low, high)


def sort_key(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.timestamp()
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day, tzinfo=UTC).timestamp()
    if isinstance(v, str | bool):
        return v
    return float(v)


def filters(columns: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves(columns),
        lambda inner: st.one_of(
            st.tuples(inner).map(lambda a: Bool("not", a)),
            st.tuples(st.sampled_from(["and", "or"]), st.lists(inner, min_size=2, max_size=3)).map(
                lambda t: Bool(t[0], tuple(t[1]))
            ),
        ),
        max_leaves=5,
    )


ALL_COLUMNS = tuple(KINDS)


# -- datasets ----------------------------------------------------------------------------------------------


def write_hive(root: Path, table: pa.Table, by: list[str]) -> None:
    keys = table.select(by).to_pylist()
    groups: dict[tuple[Any, ...], list[int]] = {}
    for k, row in enumerate(keys):
        groups.setdefault(tuple(row[c] for c in by), []).append(k)
    for values, rows in groups.items():
        parts = "/".join(
            f"{c}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}" for c, v in zip(by, values, strict=True)
        )
        (root / parts).mkdir(parents=True)
        piece = table.take(pa.array(rows)).drop_columns(by)
        pq.write_table(piece, root / parts / "part-0.parquet", row_group_size=ROW_GROUP)


class Datasets(dict[str, dal.Dataset]):
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example
        return f"Datasets({', '.join(self)})"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Datasets:
    """The same rows three ways (read-only, built once for the module)."""
    root = tmp_path_factory.mktemp("differential")
    cat = Catalog(f"sqlite:///{root}/catalog.db")
    (root / "flat").mkdir()
    pq.write_table(TABLE, root / "flat" / "part-0.parquet", row_group_size=ROW_GROUP)
    dal.register("diff.flat", str(root / "flat"), format="parquet", catalog=cat)
    write_hive(root / "hive", TABLE, ["p_s", "p_i"])
    dal.register("diff.hive", str(root / "hive"), format="parquet", catalog=cat)
    batches = TABLE.to_batches(max_chunksize=ROWS // 3)  # three commits: several files per partition
    for k, batch in enumerate(batches):
        dal.write(
            pa.Table.from_batches([batch]),
            "diff.delta",
            partition_by=["p_s", "p_i"] if k == 0 else None,
            path=str(root / "delta"),
            catalog=cat,
        )
    out = Datasets({name: dal.open(f"diff.{name}", catalog=cat) for name in ("flat", "hive", "delta")})
    for name, ds in out.items():
        got = pa.schema([ds.arrow_schema().field(c) for c in TABLE.column_names])
        assert got.equals(TABLE.schema), (name, got)
    return out


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", TABLE)
    return con


def reference(duck: Any, e: Any) -> list[int]:
    return sorted(r[0] for r in duck.execute(f"SELECT id FROM t WHERE {to_duck(e)}").fetchall())


def ids(scan: dal.Scan) -> list[int]:
    return sorted(scan.select("id").to_arrow().column("id").to_pylist())


def describe(e: Any) -> str:
    return f"\n  dal SQL: {to_sql(e)}\n  DuckDB:  {to_duck(e)}"


# -- the properties -----------------------------------------------------------------------------------------


@settings(max_examples=EXAMPLES, **SETTINGS)  # type: ignore[arg-type]
@given(e=filters(ALL_COLUMNS))
def test_to_arrow_and_count_match_duckdb(datasets: Datasets, duck: Any, e: Any) -> None:
    expected = reference(duck, e)
    for name, ds in datasets.items():
        for form in (to_sql(e), to_col(e)):
            scan = ds.filter(form)
            assert ids(scan) == expected, f"{name} {type(form).__name__}{describe(e)}"
            assert scan.count() == len(expected), f"{name} count{describe(e)}"


@settings(max_examples=EXAMPLES // 5, **SETTINGS)  # type: ignore[arg-type]
@given(e=filters(ALL_COLUMNS), world=st.integers(2, 4), shuffle=st.booleans())
def test_shards_and_splits_match_duckdb(datasets: Datasets, duck: Any, e: Any, world: int, shuffle: bool) -> None:
    expected = reference(duck, e)
    n = len(expected)
    for name, ds in datasets.items():
        scan = ds.filter(to_sql(e))
        if shuffle:
            scan = scan.shuffle(seed=11, buffer_size=50)
        kept = [ids(scan.shard(r, world, "keep")) for r in range(world)]
        assert sorted(i for k in kept for i in k) == expected, f"{name} keep{describe(e)}"
        assert all(len(k) in (n // world, -(-n // world)) for k in kept)
        for r in range(world):
            padded = ids(scan.shard(r, world))
            assert len(padded) == scan.shard(r, world).count() == -(-n // world) if n else len(padded) == 0
            assert set(padded) <= set(expected)
            assert scan.shard(r, world, "drop").count() == n // world
        parts = [
            [i for b in scan.iter_batches(9, tasks=scan.split(p, world)) for i in b.column("id").to_pylist()]
            for p in range(world)
        ]
        assert sorted(i for p in parts for i in p) == expected, f"{name} split{describe(e)}"


@settings(max_examples=max(4, EXAMPLES // 25), **SETTINGS)  # type: ignore[arg-type]
@given(e=filters(ALL_COLUMNS))
def test_to_torch_matches_duckdb(datasets: Datasets, duck: Any, e: Any) -> None:
    pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there
    expected = reference(duck, e)
    for name in ("hive", "delta"):
        scan = datasets[name].filter(to_col(e)).select("id")
        seen = []
        for rank in range(2):
            data = scan.shard(rank, 2, "keep").to_torch(batch_size=16)
            batches = list(data)
            assert data.num_batches() == len(batches)
            seen += [int(i) for b in batches for i in b["id"]]
        assert sorted(seen) == expected, f"{name}{describe(e)}"


@pytest.mark.spark
@settings(max_examples=max(2, EXAMPLES // 50), **SETTINGS)  # type: ignore[arg-type]
@given(e=filters(ALL_COLUMNS))
def test_to_spark_matches_duckdb(datasets: Datasets, duck: Any, spark: Any, e: Any) -> None:
    """Spark is slow on two cores: Spark's own reader with translated predicates on Delta, and the
    sharded path (executors read the rank's tasks) on hive-partitioned Parquet."""
    expected = reference(duck, e)
    scan = datasets["delta"].filter(to_sql(e))
    got = sorted(r["id"] for r in scan.to_spark(spark).select("id").collect())
    assert got == expected, f"delta to_spark{describe(e)}"
    scan = datasets["hive"].filter(to_col(e)).shuffle(seed=3)
    shards = [sorted(r["id"] for r in scan.shard(k, 2).to_spark(spark).select("id").collect()) for k in range(2)]
    assert shards == [ids(scan.shard(k, 2)) for k in range(2)], f"hive sharded to_spark{describe(e)}"


@pytest.mark.spark
def test_to_spark_keeps_nan_rows_from_parquet_statistics(sqlite_env: Catalog, tmp_path: Path, spark: Any) -> None:
    """Spark pushes comparisons into Parquet row-group statistics, which leave NaN out of min/max: a row
    group of [NaN, 1, 1] must still give its NaN row to x <> 1 and NOT x < 5 (IEEE: both true for NaN)."""
    (tmp_path / "n").mkdir()
    pq.write_table(pa.table({"k": [0, 1, 2], "x": [math.nan, 1.0, 1.0]}), tmp_path / "n" / "f.parquet")
    dal.register("spark.nan", str(tmp_path / "n"), format="parquet")
    ds = dal.open("spark.nan")
    for condition, expected in [("x <> 1", [0]), ("NOT x < 5", [0]), ("NOT x IN (1, NULL)", [])]:
        got = sorted(r["k"] for r in ds.filter(condition).to_spark(spark).collect())
        assert got == expected, condition


NEW_CONSTRUCTS = [
    Like("s", "Y%", False, False),
    Like("s", "y%", True, False),
    Like("p_s", "a", False, True),
    Like("s", "%É%", True, False),
    Func("lower", "s", "==", "yul"),
    Func("upper", "s", ">=", "É", True),
    Func("abs", "i8", ">", 100),
    Func("abs", "f64", "<=", 1.5),
    Func("abs", "dec", "!=", Decimal("-1")),
    Func("abs", "p_i", "==", 1, True),
]


@pytest.mark.spark
def test_to_spark_new_constructs_match_duckdb(datasets: Datasets, duck: Any, spark: Any) -> None:
    """LIKE / ILIKE, lower / upper and abs through Spark's reader (translated predicates) on Delta."""
    for e in NEW_CONSTRUCTS:
        expected = reference(duck, e)
        assert expected, f"the example selects no row{describe(e)}"
        for form in (to_sql(e), to_col(e)):
            got = sorted(r["id"] for r in datasets["delta"].filter(form).to_spark(spark).select("id").collect())
            assert got == expected, f"delta to_spark{describe(e)}"
