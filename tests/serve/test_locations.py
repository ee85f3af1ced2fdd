"""Through ``dal serve``, a principal that may create datasets in its own namespace cannot point one at another
dataset's location (or around it: a bucket, a parent folder), and the refusal names the other dataset only to a
principal that may read it."""

from __future__ import annotations

import json

from dal.catalog import Catalog
from tests.serve.conftest import Served


def _create(served: Served, who: str, name: str, location: str) -> tuple[int, dict[str, object]]:
    body = json.dumps({"format": "delta", "location": location}).encode()
    status, raw, _ = served.request("POST", f"/api/v1/datasets/{name}", who, body)
    return status, json.loads(raw)


def test_a_writer_cannot_create_a_dataset_over_another_ones_location(served: Served) -> None:
    cat = Catalog(served.db)
    secret = cat.get_dataset("sales.orders").location
    parent = secret.rsplit("/", 1)[0]
    for where in (secret, secret + "/", f"file://{secret}", f"{secret}/inner", parent):
        status, found = _create(served, "writer", "weather.steal", where)
        assert status == 400 and found["type"] == "LocationTaken", (where, found)
        assert "'sales.orders'" not in str(found["error"])  # the writer may not read it: not named
        assert "another dataset" in str(found["error"])
    assert "weather.steal" not in [d.name for d in cat.list_datasets()]
    # the owner may read it: the refusal says which dataset is there
    status, found = _create(served, "owner", "weather.steal", secret)
    assert status == 400 and "dataset 'sales.orders'" in str(found["error"])
    # a location of its own is fine
    status, found = _create(served, "writer", "weather.own", secret + "-not-inside")
    assert status == 201, found
    cat.delete_dataset("weather.own")
    cat.close()


def test_co_located_answers_only_readers_and_names_only_what_they_read(served: Served) -> None:
    status, raw, _ = served.request("GET", "/api/v1/datasets/weather.radar/co-located", "one_reader")
    assert status == 200 and json.loads(raw) == {"shared": False, "datasets": []}
    missing = served.request("GET", "/api/v1/datasets/sales.ordres/co-located", "one_reader")
    forbidden = served.request("GET", "/api/v1/datasets/sales.orders/co-located", "one_reader")
    assert missing[0] == forbidden[0] == 404 and missing[1].replace(b"ordres", b"orders") == forbidden[1]


def test_overlapping_answers_writers_a_yes_or_no_and_only_names_they_read(served: Served) -> None:
    """Found by the second adversarial pass: with a count of hidden datasets and any ``besides``, any token could
    learn which names exist (the count moved by one) and how many datasets there are."""
    import urllib.parse

    def ask(who: str, location: str, besides: str) -> tuple[int, dict[str, object]]:
        query = urllib.parse.urlencode({"location": location, "besides": besides})
        status, raw, _ = served.request("GET", f"/api/v1/locations/overlapping?{query}", who)
        return status, json.loads(raw)

    assert ask("nobody", "/", "weather.new")[0] == 403
    assert ask("one_reader", "/", "weather.new")[0] == 403
    assert ask("writer", "/", "sales.new")[0] == 403  # WRITE on the dataset about to be written
    status, found = ask("writer", "/", "weather.new")
    assert status == 200 and found["taken"] is True and "hidden" not in found
    assert "sales.orders" not in found["datasets"] and "weather.radar" in found["datasets"]
    assert ask("writer", "/", "weather.radar")[1]["taken"] is True  # besides itself: the others still count
    secret = Catalog(served.db).get_dataset("sales.orders").location
    assert ask("writer", secret, "weather.new")[1] == {"taken": True, "datasets": []}
    assert ask("writer", secret + "-elsewhere", "weather.new")[1] == {"taken": False, "datasets": []}
