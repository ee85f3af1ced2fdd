"""Adversarial checks of sampling, balance and mixing against independent references (NumPy / pyarrow /
pandas computing the expected rows from the raw data), each written for a bug found by probing."""

from __future__ import annotations

import multiprocessing
from typing import Any

import dal
from dal import read
from tests.sampling.conftest import ids


def _read_spans(query: Any, tasks: list[Any], spans: list[tuple[int, int]], out: Any) -> None:
    out.put([ids(read.read_span(query, tasks[a:b])) for a, b in spans])


def test_forked_reader_reads_runs_of_row_groups_in_order(data: dal.Dataset) -> None:
    """A forked DataLoader worker plans fragments afresh; pyarrow 26's make_fragment(row_groups=[7, 8, 9])
    reads them as 8, 9, 7, which gave a sampled or mixed scan's workers other rows than the epoch's."""
    query = data.scan().select("id").query
    every = query.all_tasks()
    tasks = [every[i] for i in (1, 2, 3, 7, 8, 9, 12, 13)]
    spans = [(0, 3), (3, 6), (6, 8)]
    here = [ids(read.read_span(query, tasks[a:b])) for a, b in spans]  # the parent planned (and read) first
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_read_spans, args=(query, tasks, spans, out))
    child.start()
    there = out.get(timeout=60)
    child.join(timeout=60)
    expected = [
        list(range(100 * t.row_group + 1000 * int(t.uri[-9]), 100 * t.row_group + 1000 * int(t.uri[-9]) + 100))
        for t in tasks
    ]
    flat = [[i for t in expected[a:b] for i in t] for a, b in spans]
    assert here == flat and there == flat
