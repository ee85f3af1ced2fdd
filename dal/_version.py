"""dal's version (one place: the package, the lineage records and ``dal --version`` read it here)."""

__version__ = "0.1.0"
