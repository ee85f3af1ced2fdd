"""to_ray of a sampled or balanced scan is refused before Ray starts (it returned an empty Dataset for a
fraction sample that picked no row group, and raised only inside Ray's planning for the others)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import FilterError


def test_sampled_and_balanced_scans_are_refused_before_ray_starts(sqlite_env: Catalog) -> None:
    ray = pytest.importorskip("ray")
    n = 20_000
    dal.write(pd.DataFrame({"id": np.arange(n), "label": np.arange(n) % 3}), "r.s")  # one row group
    scan = dal.open("r.s").scan()
    for sampled in (scan.sample(0.01, seed=1), scan.sample(rows=10, seed=1), scan.balance("label")):
        with pytest.raises(FilterError, match="to_ray does not draw dal samples"):
            sampled.to_ray()
    assert not ray.is_initialized()
