"""Row counts in Parquet footers, checked before dal believes them.

A footer is metadata like any other: a file edited to claim 10**12 rows in 10 real ones made ``register``
record 10**12, ``count()`` return it and reads fail deep in Arrow (issue #22). :func:`checked_rows` refuses a
footer whose row counts its own column chunks contradict, from the footer alone (no extra read):

- each row group's rows are at most every column chunk's value count (a row holds at least one value, a NULL
  or an empty list included, in every leaf column), and equal to it for columns that do not repeat;
- a column chunk holds at most ``2**31 - 1`` values per page (a page header's ``num_values`` is an i32) and at
  most one page per 16 of its bytes (the smallest data page header is larger), so a 700-byte chunk cannot hold
  10**12 values however it is encoded;
- the file's row count is the sum of its row groups'.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from dal.errors import FormatError

PAGE_VALUES = 2**31 - 1  # a data page header's num_values is an i32
PAGE_BYTES = 16  # no data page (header included) is smaller


def checked_rows(meta: pq.FileMetaData, where: str) -> int:
    """The file's row count once its footer's counts agree with its column chunks.

    Args:
        meta: the file's footer.
        where: the file, as the error names it.

    Raises:
        FormatError: naming ``where``, the row group and what disagrees.
    """
    total = 0
    repeats = [meta.schema.column(j).max_repetition_level > 0 for j in range(meta.num_columns)]
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        rows = rg.num_rows
        if rows < 0:
            raise _implausible(where, f"row group {i} claims {rows:,} rows")
        for j in range(rg.num_columns):
            chunk = rg.column(j)
            values, size = chunk.num_values, max(chunk.total_compressed_size, 0)
            if values < rows or (values != rows and not repeats[j]):
                raise _implausible(
                    where,
                    f"row group {i} claims {rows:,} rows but its column {chunk.path_in_schema} holds {values:,} values",
                )
            if values > (size // PAGE_BYTES) * PAGE_VALUES:
                raise _implausible(
                    where,
                    f"row group {i} claims {rows:,} rows but its column {chunk.path_in_schema} has {size:,} bytes, "
                    f"room for {(size // PAGE_BYTES) * PAGE_VALUES:,} values at most",
                )
        total += rows
    if total != meta.num_rows:
        raise _implausible(where, f"the footer claims {meta.num_rows:,} rows but its row groups hold {total:,}")
    return total


def most_rows(size_bytes: int) -> int:
    """The most rows a Parquet file of ``size_bytes`` bytes can hold (the bound :func:`checked_rows` applies
    to a column chunk): a claim beyond it (a log's ``numRecords``) is refused without reading the file.

    Args:
        size_bytes: the file's size.
    """
    return (max(size_bytes, 0) // PAGE_BYTES) * PAGE_VALUES


def _implausible(where: str, what: str) -> FormatError:
    return FormatError(f"{where}: implausible Parquet footer: {what}; dal will not count or read rows it cannot hold")
