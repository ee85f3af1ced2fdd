"""Shared by the legacy scripts: petastorm's make_reader output as JSON (no pickle crosses the venvs), each
value with its exact type, numpy dtype and bytes, so the main environment can compare dal's values exactly."""

import base64
from decimal import Decimal

import numpy as np
from petastorm import make_reader


def dump(value):
    """A JSON form that keeps the exact type and bytes of what make_reader returned."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return {"kind": "decimal", "value": str(value)}
    if isinstance(value, (np.ndarray, np.generic)):
        a = np.asarray(value)
        return {
            "kind": "ndarray" if isinstance(value, np.ndarray) else "scalar",
            "type": type(value).__name__,
            "dtype": a.dtype.str,
            "shape": list(a.shape),
            "data": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode(),
        }
    if isinstance(value, bytes):
        return {"kind": "bytes", "data": base64.b64encode(value).decode()}
    if isinstance(value, str):
        return {"kind": "str", "value": value}
    raise TypeError(f"unexpected {type(value)!r}")


def read_all(url, key="id"):
    """Every row make_reader gives, keyed by ``key``, and the fields it could not decode at all.

    make_reader fails outright on a field it cannot decode (e.g. a nullable timestamp with a null: pandas
    hands it NaT and np.datetime64(NaT) raises): such fields are recorded and the rest read without them.
    """
    failed = {}
    while True:
        rows = {}
        try:
            with make_reader(url, reader_pool_type="dummy", num_epochs=1) as probe:
                fields = [f for f in probe.schema.fields.values() if f.name not in failed]
            with make_reader(url, reader_pool_type="dummy", num_epochs=1, schema_fields=fields) as reader:
                for r in reader:
                    d = r._asdict()
                    rows[str(d[key])] = {k: dump(v) for k, v in d.items()}
            return rows, failed
        except Exception as e:  # petastorm's DecodeFieldError names the field: 'Decoding field "x" failed'
            name = str(e).split('"')[1] if 'Decoding field "' in str(e) else None
            if name is None or name in failed:
                raise
            failed[name] = f"{type(e).__name__}: {e}"
