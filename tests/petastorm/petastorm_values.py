"""The main-environment side of legacy_scripts/values_json.py: petastorm's decoded values, read back from
JSON, and the exact comparison of dal's decoded values with them."""

from __future__ import annotations

import base64
import math
from decimal import Decimal
from typing import Any

import numpy as np


def load(value: Any) -> Any:
    """A value as petastorm's make_reader returned it (None, Decimal, numpy scalar or ndarray, str, bytes)."""
    if value is None:
        return None
    kind = value["kind"]
    if kind == "decimal":
        return Decimal(value["value"])
    if kind == "str":
        return value["value"]
    if kind == "bytes":
        return base64.b64decode(value["data"])
    arr = np.frombuffer(base64.b64decode(value["data"]), dtype=np.dtype(value["dtype"])).reshape(value["shape"])
    return arr[()] if kind == "scalar" else arr


def mismatch(got: Any, expected: Any) -> str | None:
    """Why dal's ``got`` is not exactly petastorm's ``expected`` (dtype, shape, every byte), or None.

    A null is None on both sides, except a null float, which both give as NaN.
    """
    if expected is None:
        return None if got is None else f"expected None, got {got!r}"
    if got is None:
        return f"expected {expected!r}, got None"
    if isinstance(expected, Decimal):
        if not isinstance(got, Decimal) or str(got) != str(expected):
            return f"expected Decimal {expected}, got {got!r}"
        return None
    if isinstance(expected, np.ndarray) or isinstance(expected, np.generic):
        g, e = np.asarray(got), np.asarray(expected)
        if isinstance(expected, np.ndarray) != isinstance(got, np.ndarray):
            return f"expected a {type(expected).__name__}, got a {type(got).__name__}"
        if g.dtype != e.dtype or g.shape != e.shape:
            return f"expected {e.dtype} {e.shape}, got {g.dtype} {g.shape}"
        if g.tobytes() != e.tobytes():
            if e.dtype.kind == "f" and e.shape == () and math.isnan(float(e)) and math.isnan(float(g)):
                return None
            return f"expected {e!r}, got {g!r}"
        return None
    return None if got == expected and type(got) is type(expected) else f"expected {expected!r}, got {got!r}"
