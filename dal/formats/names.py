"""Names the command line needs before it loads a format (plain Python: no pyarrow)."""

from __future__ import annotations

DEFAULT_FORMAT = "delta"  # what dal.write and dal.register use unless told
