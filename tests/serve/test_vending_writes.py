"""Storage credentials vended for a write in progress (``POST /api/v1/datasets/NAME/writes``), against emulators
that enforce them: moto with IAM enforcement on (STS AssumeRole of a read role and of a write role, the roles'
policies, signatures, session tokens) and Azurite (service SAS: container, permissions, expiry).

What moto does not enforce (so these tests cannot show it on S3): the session policy of assumed-role credentials
(moto evaluates only the role's own policies) and their expiry. The write session policy is judged by moto's own
IAM policy evaluator instead; the role policy is what refuses the vended write credentials on another bucket."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog.auth import AuthStore, NotAuthorized
from dal.catalog.remote import RemoteCatalog
from dal.serve import vending
from tests.objectstores import AZURE_ACCOUNT, AZURE_KEY, free_port, serving
from tests.serve.conftest import http, start, stop
from tests.serve.test_vending import ACCOUNT, _blob, _boto, _code, _enforce

ROWS = 30
_AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_PROFILE",
             "AWS_REGION", "AWS_DEFAULT_REGION")  # fmt: skip


def _policy(actions: list[str], bucket: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions,
                       "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]})  # fmt: skip


@dataclass
class Deployment:
    url: str
    db: str
    endpoint: str
    bucket: str
    other: str  # a second bucket: no role may write it
    server_secret: str
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A moto server of its own: two buckets, a read role (read the first), a write role (read, write and delete
    the first only), the server's IAM user that may only assume roles. A catalog with ``vw.radar`` (the writer
    may write it), ``vw.wind`` at the sibling prefix ``radar-wind`` and ``sec.orders`` (it may not); a ``dal
    serve`` with both roles configured; then IAM enforcement on."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    root = tmp_path_factory.mktemp("vendw")
    with serving([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port):
        admin: object = _boto(endpoint, "AKIDADMIN", "admin-secret")
        bucket, other = f"dal-vw-{uuid.uuid4().hex[:8]}", f"dal-other-{uuid.uuid4().hex[:8]}"
        for b in (bucket, other):
            admin.create_bucket(Bucket=b)  # type: ignore[attr-defined]
        admin.put_object(Bucket=other, Key="x/keep", Body=b"keep")  # type: ignore[attr-defined]
        iam: object = _boto(endpoint, "AKIDADMIN", "admin-secret", service="iam")
        trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/dal-server"}, "Action": "sts:AssumeRole"}]})  # fmt: skip
        roles = {}
        for role, actions in (("dal-reader", ["s3:GetObject", "s3:ListBucket"]),
                              ("dal-writer", ["s3:GetObject", "s3:ListBucket", "s3:PutObject", "s3:DeleteObject",
                                              "s3:AbortMultipartUpload"])):  # fmt: skip
            roles[role] = iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)["Role"]["Arn"]  # type: ignore[attr-defined]
            iam.put_role_policy(RoleName=role, PolicyName="s3", PolicyDocument=_policy(actions, bucket))  # type: ignore[attr-defined]
        iam.create_user(UserName="dal-server")  # type: ignore[attr-defined]
        assume = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}  # fmt: skip
        iam.put_user_policy(UserName="dal-server", PolicyName="assume", PolicyDocument=json.dumps(assume))  # type: ignore[attr-defined]
        key = iam.create_access_key(UserName="dal-server")["AccessKey"]  # type: ignore[attr-defined]

        db = f"sqlite:///{root}/catalog.db"
        admin_options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "AKIDADMIN",
                         "AWS_SECRET_ACCESS_KEY": "admin-secret", "AWS_REGION": "us-east-1"}  # fmt: skip
        old = os.environ.get("DAL_HOME")
        os.environ["DAL_HOME"] = str(root / "home")
        try:
            for name, path in (("vw.radar", "radar"), ("vw.wind", "radar-wind"), ("sec.orders", "orders")):
                table = pa.table({"id": list(range(ROWS)), "v": [f"{name}-{i}" for i in range(ROWS)]})
                dal.write(table, name, path=f"s3://{bucket}/{path}", storage_options=admin_options, catalog=db)
            # data no dataset records (a raw prefix beside the datasets)
            admin.put_object(Bucket=bucket, Key="raw/hr/salaries.csv", Body=b"name,salary\n")  # type: ignore[attr-defined]
        finally:
            if old is None:
                os.environ.pop("DAL_HOME", None)
            else:
                os.environ["DAL_HOME"] = old
        store = AuthStore(db)
        tokens = {}
        for who, grants in (("writer", [("WRITE", "vw.radar"), ("WRITE", "vw.fresh"), ("WRITE", "vw.spark")]),
                            ("reader", [("READ", "vw.radar")])):  # fmt: skip
            store.create_principal(who, "service")
            for privilege, target in grants:
                store.grant(who, privilege, target)
            tokens[who] = store.create_token(who, expires_in=timedelta(days=1))[0]
        store.close()
        creds = root / "storage.json"
        creds.write_text(json.dumps({"s3": {bucket: {
            "role_arn": roles["dal-reader"], "write_role_arn": roles["dal-writer"], "access_key_id": key["AccessKeyId"],
            "secret_access_key": key["SecretAccessKey"], "region": "us-east-1", "endpoint": endpoint,
            "duration_s": 900, "write_duration_s": 900}}}))  # fmt: skip
        _enforce(endpoint)
        proc, base = start(db, ["--storage-credentials", str(creds)])
        try:
            yield Deployment(base, db, endpoint, bucket, other, key["SecretAccessKey"], tokens)
        finally:
            out = stop(proc)
            assert key["SecretAccessKey"] not in out and all(t not in out for t in tokens.values())


def _begin(dep: Deployment, who: str, name: str, location: str | None = None) -> tuple[int, dict[str, object]]:
    body = json.dumps({"location": location or f"s3://{dep.bucket}/{name}"}).encode()
    status, answer, _ = http("POST", f"{dep.url}/api/v1/datasets/{name}/writes", dep.tokens[who], body,
                             {"Content-Type": "application/json"})  # fmt: skip
    return status, json.loads(answer)


def _s3(dep: Deployment, options: object) -> object:
    o = dict(options)  # type: ignore[call-overload]
    return _boto(dep.endpoint, o["AWS_ACCESS_KEY_ID"], o["AWS_SECRET_ACCESS_KEY"], o["AWS_SESSION_TOKEN"])


@pytest.fixture
def no_aws(deployment: Deployment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The caller has no storage credentials of its own: only the served catalog and a token."""
    for var in _AWS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("DAL_CATALOG_URL", deployment.url)
    monkeypatch.setenv("DAL_HOME", str(tmp_path / "home"))
    from dal import lineage

    lineage.clear_read_log()


def test_a_writer_with_no_storage_credentials_writes_through_the_server_and_it_reads_back(
    deployment: Deployment, no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAL_TOKEN", deployment.tokens["writer"])
    more = pa.table({"id": list(range(ROWS, ROWS + 10)), "v": [f"new-{i}" for i in range(10)]})
    v = dal.write(more, "vw.radar")
    assert v.number == 1 and v.row_count == ROWS + 10
    v2 = dal.delete("vw.radar", "id < 5")  # a delete rewrites files: with the vended write credentials too
    assert v2.number == 2 and v2.row_count == ROWS + 5
    # a new dataset at a location of its own
    fresh = dal.write(pa.table({"id": [1, 2, 3]}), "vw.fresh", path=f"s3://{deployment.bucket}/fresh")
    assert fresh.number == 0
    # read back by dal (a pin vends read credentials) and by delta-rs with those options
    ds = dal.open("vw.radar")
    assert sorted(ds.to_arrow().column("id").to_pylist()) == list(range(5, ROWS + 10))
    from deltalake import DeltaTable

    from dal.storage import uris

    ref = DeltaTable(f"s3://{deployment.bucket}/radar", storage_options=uris.object_store_options(ds.storage_options))
    assert sorted(ref.to_pyarrow_table().column("id").to_pylist()) == list(range(5, ROWS + 10))
    assert dal.open("vw.fresh").to_arrow().num_rows == 3
    # the audit says what was vended for each write, never a secret
    rows = AuthStore(deployment.db).audit(dataset="vw.radar", principal="writer", limit=1000)
    begun = [r for r in rows if r.action == "begin write"]
    assert len(begun) == 2 and {r.outcome for r in begun} == {"allowed"}
    assert {r.detail for r in begun} == {f"vended write s3://{deployment.bucket}/radar"}
    fresh_rows = AuthStore(deployment.db).audit(dataset="vw.fresh", principal="writer", limit=1000)
    assert f"vended write s3://{deployment.bucket}/fresh" in {r.detail for r in fresh_rows}
    text = json.dumps([r.to_dict() for r in rows + fresh_rows])
    assert deployment.server_secret not in text and "ASIA" not in text


@pytest.mark.spark
def test_a_spark_write_through_the_server_stages_its_files_with_the_vended_credentials(
    deployment: Deployment, no_aws: None, monkeypatch: pytest.MonkeyPatch, spark: object
) -> None:
    """The executors stage the files with the write's transaction, which carries the vended options: no other
    credential is valid on this moto server (IAM on), so the write succeeding shows they were used."""
    monkeypatch.setenv("DAL_TOKEN", deployment.tokens["writer"])
    df = spark.createDataFrame([(i, f"s{i}") for i in range(50)], "id long, v string").repartition(3)  # type: ignore[attr-defined]
    v = dal.write(df, "vw.spark", path=f"s3://{deployment.bucket}/spark")
    assert v.number == 0 and v.row_count == 50
    assert sorted(dal.open("vw.spark").to_arrow().column("id").to_pylist()) == list(range(50))


def test_a_read_only_principal_is_refused_a_write_and_handed_no_credentials(
    deployment: Deployment, no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, answer = _begin(deployment, "reader", "vw.radar")
    assert status == 403 and "credentials" not in answer and "WRITE" in str(answer["error"])
    monkeypatch.setenv("DAL_TOKEN", deployment.tokens["reader"])
    cat = RemoteCatalog(deployment.url, deployment.tokens["reader"])
    before = [v.number for v in cat.versions("vw.radar")]
    with pytest.raises(NotAuthorized, match="needs WRITE"):
        dal.write(pa.table({"id": [999], "v": ["x"]}), "vw.radar")
    assert [v.number for v in cat.versions("vw.radar")] == before
    rows = AuthStore(deployment.db).audit(dataset="vw.radar", principal="reader", limit=1000)
    refused = [r for r in rows if r.action == "begin write"]
    assert refused and {r.outcome for r in refused} == {"denied"} and {r.detail for r in refused} == {"no WRITE"}


def test_vended_read_credentials_cannot_write_and_write_credentials_only_write_their_bucket(
    deployment: Deployment,
) -> None:
    b = deployment.bucket
    status, pinned, _ = http("GET", f"{deployment.url}/api/v1/datasets/vw.radar/pin", deployment.tokens["reader"])
    read = json.loads(pinned)["credentials"]
    assert status == 200 and read["access"] == "read"
    reader = _s3(deployment, read["options"])
    assert _code(lambda: reader.get_object(Bucket=b, Key="radar/_delta_log/00000000000000000000.json")) == "ok"  # type: ignore[attr-defined]
    assert _code(lambda: reader.put_object(Bucket=b, Key="radar/evil", Body=b"x")) == "AccessDenied"  # type: ignore[attr-defined]

    status, begun = _begin(deployment, "writer", "vw.radar")
    assert status == 200, begun
    write = begun["credentials"]
    assert isinstance(write, dict) and write["access"] == "write" and write["scope"] == f"s3://{b}/radar"
    assert begun["location"] == f"s3://{b}/radar"
    assert deployment.server_secret not in json.dumps(begun)
    expires = datetime.fromisoformat(str(write["expires"]).replace("Z", "+00:00"))
    assert timedelta(minutes=14) < expires - datetime.now(UTC) <= timedelta(minutes=15, seconds=5)
    writer = _s3(deployment, write["options"])
    assert _code(lambda: writer.put_object(Bucket=b, Key="radar/_probe", Body=b"x")) == "ok"  # type: ignore[attr-defined]
    assert _code(lambda: writer.get_object(Bucket=b, Key="radar/_probe")) == "ok"  # type: ignore[attr-defined]
    assert _code(lambda: writer.delete_object(Bucket=b, Key="radar/_probe")) == "ok"  # type: ignore[attr-defined]
    # another bucket: the write role's own policy refuses (enforced by moto)
    o = deployment.other
    assert _code(lambda: writer.put_object(Bucket=o, Key="x/evil", Body=b"x")) == "AccessDenied"  # type: ignore[attr-defined]
    assert _code(lambda: writer.get_object(Bucket=o, Key="x/keep")) == "AccessDenied"  # type: ignore[attr-defined]
    assert _code(lambda: writer.delete_object(Bucket=o, Key="x/keep")) == "AccessDenied"  # type: ignore[attr-defined]
    # a changed secret is refused
    forged = dict(write["options"])
    forged["AWS_SECRET_ACCESS_KEY"] = forged["AWS_SECRET_ACCESS_KEY"][:-1] + "A"
    if forged["AWS_SECRET_ACCESS_KEY"] == write["options"]["AWS_SECRET_ACCESS_KEY"]:
        forged["AWS_SECRET_ACCESS_KEY"] = forged["AWS_SECRET_ACCESS_KEY"][:-1] + "B"
    bad = _s3(deployment, forged)
    assert _code(lambda: bad.put_object(Bucket=b, Key="radar/evil", Body=b"x")) == "SignatureDoesNotMatch"  # type: ignore[attr-defined]


def test_write_credentials_are_never_vended_where_they_would_reach_a_dataset_the_writer_may_not_write(
    deployment: Deployment,
) -> None:
    b = deployment.bucket
    for location in (f"s3://{b}/orders/inside", f"s3://{b}", f"s3://{b}/", f"s3://{b}/radar-wind"):
        status, answer = _begin(deployment, "writer", "vw.fresh2", location)
        # no WRITE on vw.fresh2: the grant is checked before anything else
        assert status == 403 and "credentials" not in answer
    store = AuthStore(deployment.db)
    store.grant("writer", "WRITE", "vw.newone")
    store.close()
    for location, why in ((f"s3://{b}/orders/inside", "another dataset"), (f"s3://{b}", "root of a bucket"),
                          (f"s3://{b}/radar-wind/x", "another dataset"), (f"s3://{b}/orders", "another dataset"),
                          (f"s3://{b}/sec", None)):  # fmt: skip
        status, answer = _begin(deployment, "writer", "vw.newone", location)
        if why is None:
            assert status == 200 and answer["credentials"]["scope"] == f"s3://{b}/sec"  # type: ignore[index]
            continue
        assert status == 400 and why in str(answer["error"]) and "credentials" not in answer, (location, answer)
    rows = AuthStore(deployment.db).audit(dataset="vw.newone", principal="writer", limit=1000)
    assert sum(1 for r in rows if r.outcome == "denied") == 4
    # prefixes are compared by whole path segments, and Azure's scope is the container
    assert not vending.reaches("s3://b/radar", "s3://b/radar-wind")
    assert vending.reaches("s3://b/radar", "s3a://b/radar/part") and vending.reaches("s3://b/radar/x", "s3://b/radar")
    assert not vending.reaches("s3://b/radar", "s3://c/radar") and not vending.reaches("s3://b/x", "/tmp/b/x")
    assert vending.reaches("az://c/one", "az://c/two") and not vending.reaches("az://c/one", "az://d/one")


def test_a_location_dal_cannot_prove_is_the_datasets_gets_no_credentials(deployment: Deployment) -> None:
    """Found by an adversarial pass: a principal that may create datasets chooses their locations, so pointed at
    data no dataset of the catalog claims (a raw prefix, a read-only registration's table) it was vended
    credentials for it. Credentials go only where the location's claim names this catalog (or, for a write, where
    nothing is yet): a read-only registration, and a dataset created over unclaimed data, get none."""
    from dal.catalog import Catalog

    b = deployment.bucket
    cat = Catalog(deployment.db)
    cat.create_dataset("vw.ro", format="delta", location=f"s3://{b}/ro", properties={"dal.read_only": True})
    cat.close()
    store = AuthStore(deployment.db)
    for target in ("vw.ro", "vw.ro2", "vw.raw"):
        store.grant("writer", "WRITE", target)
    store.close()
    status, answer = _begin(deployment, "writer", "vw.ro")
    assert status == 200 and "credentials" not in answer, answer
    body = json.dumps({"location": f"s3://{b}/ro2", "read_only": True}).encode()
    status, raw, _ = http("POST", f"{deployment.url}/api/v1/datasets/vw.ro2/writes", deployment.tokens["writer"], body,
                          {"Content-Type": "application/json"})  # fmt: skip
    assert status == 200 and "credentials" not in json.loads(raw)
    # a write beginning over data no dataset claims: refused, nothing handed out
    status, answer = _begin(deployment, "writer", "vw.raw", f"s3://{b}/raw/hr")
    assert status == 400 and "credentials" not in answer and "claims" in str(answer["error"]), answer
    # a dataset recorded over it (the catalog allows it: no dataset is there) and pinned: no credentials
    make = json.dumps({"format": "delta", "location": f"s3://{b}/raw/hr"}).encode()
    draft = json.dumps({"operation": "create", "row_count": 1, "storage_version": 0, "schema": []}).encode()
    for path, data in (("", make), ("/versions", draft)):
        status, raw, _ = http("POST", f"{deployment.url}/api/v1/datasets/vw.raw{path}", deployment.tokens["writer"],
                              data, {"Content-Type": "application/json"})  # fmt: skip
        assert status == 201, raw
    status, raw, _ = http("GET", f"{deployment.url}/api/v1/datasets/vw.raw/pin", deployment.tokens["writer"])
    assert status == 200 and "credentials" not in json.loads(raw)
    rows = AuthStore(deployment.db).audit(dataset="vw.raw", principal="writer", limit=100)
    assert rows[-1].detail.startswith("not vended")
    # the dataset the writer wrote itself is proven by its claim: credentials as before
    status, raw, _ = http("GET", f"{deployment.url}/api/v1/datasets/vw.radar/pin", deployment.tokens["writer"])
    assert status == 200 and json.loads(raw)["credentials"]["access"] == "read"


def test_the_write_session_policy_allows_the_prefix_only_by_motos_own_evaluator() -> None:
    """moto does not apply session policies to assumed-role credentials; its IAM evaluator judges the document."""
    from moto.iam.access_control import IAMPolicy, PermissionResult

    write = IAMPolicy(json.dumps(vending.s3_session_policy("bkt", "radar", write=True)))
    read = IAMPolicy(json.dumps(vending.s3_session_policy("bkt", "radar")))
    ok = PermissionResult.PERMITTED
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"):
        assert write.is_action_permitted(action, "arn:aws:s3:::bkt/radar/part-0.parquet", None, None) == ok
        assert write.is_action_permitted(action, "arn:aws:s3:::bkt/radar-wind/part-0.parquet", None, None) != ok
        assert write.is_action_permitted(action, "arn:aws:s3:::other/radar/part-0.parquet", None, None) != ok
    for action in ("s3:PutObject", "s3:DeleteObject"):
        assert read.is_action_permitted(action, "arn:aws:s3:::bkt/radar/part-0.parquet", None, None) != ok
    assert write.is_action_permitted("s3:PutBucketPolicy", "arn:aws:s3:::bkt", None, None) != ok


def test_without_a_write_role_nothing_is_vended_for_writes() -> None:
    config = vending.parse({"s3": {"b": {"role_arn": "arn:aws:iam::1:role/r", "access_key_id": "AKID",
                                         "secret_access_key": "s"}},
                            "azure": {"c": {"account": "a", "account_key": "a2V5"}}})  # fmt: skip
    assert vending.vend_write(config, "d", "s3://b/d") is None
    assert vending.vend_write(config, "d", "az://c/d") is None  # "write": true not set
    assert vending.vend_write(config, "d", "gs://b/d") is None and vending.vend_write(config, "d", "/tmp/d") is None
    with pytest.raises(vending.CannotVend, match="local path"):
        vending.vend_write(vending.Vending(forbid_local=True), "d", "/tmp/d")
    with pytest.raises(vending.StorageCredentialsError, match="write must be true or false"):
        vending.parse({"azure": {"c": {"account": "a", "account_key": "k", "write": "yes"}}})
    with pytest.raises(vending.StorageCredentialsError, match="write_duration_s must be 900"):
        vending.parse({"s3": {"b": {"role_arn": "r", "access_key_id": "A", "secret_access_key": "s",
                                    "write_duration_s": 60}}})  # fmt: skip


# -- Azure: Azurite checks the write SAS (container, permissions, expiry) ------------------------------------------


def test_azurite_enforces_the_vended_write_sas(azure: tuple[str, dict[str, str]], azure_endpoint: str) -> None:
    container, _admin = azure
    sibling = f"dal-{uuid.uuid4().hex[:12]}"
    config = vending.parse({"azure": {container: {"account": AZURE_ACCOUNT, "account_key": AZURE_KEY,
                                                  "endpoint": azure_endpoint, "duration_s": 3600, "write": True,
                                                  "write_duration_s": 3}}})  # fmt: skip
    creds = vending.vend_write(config, "az.radar", f"az://{container}/radar")
    assert creds is not None and creds["scope"] == f"az://{container}" and creds["access"] == "write"
    sas = creds["options"]["AZURE_STORAGE_SAS_KEY"]
    assert "sp=racwdl" in sas and AZURE_KEY not in json.dumps(creds)
    assert _blob(azure_endpoint, container, "radar/part-0", sas, "PUT", b"x") == 201  # writes in its container
    assert _blob(azure_endpoint, container, "radar/part-0", sas) == 200
    assert _blob(azure_endpoint, container, "", sas) == 200  # lists
    assert _blob(azure_endpoint, container, "radar/part-0", sas, "DELETE") == 202
    assert _blob(azure_endpoint, sibling, "radar/evil", sas, "PUT", b"x") == 403  # another container
    # the read SAS of the same source writes nothing
    read = vending.vend(config, "az.radar", f"az://{container}/radar")
    assert read is not None and _blob(azure_endpoint, container, "radar/evil", read["options"]["AZURE_STORAGE_SAS_KEY"],
                                      "PUT", b"x") == 403  # fmt: skip
    # a write SAS is refused where the container holds a dataset the writer may not write
    with pytest.raises(vending.CannotVend, match="its own container"):
        vending.vend_write(config, "az.radar", f"az://{container}/radar", [f"az://{container}/secret"])
    time.sleep(
        max(0.0, (datetime.fromisoformat(creds["expires"].replace("Z", "+00:00")) - datetime.now(UTC)).total_seconds())
        + 1.5
    )
    assert _blob(azure_endpoint, container, "radar/late", sas, "PUT", b"x") == 403  # expired


def test_a_write_through_the_server_to_azure_uses_the_vended_write_sas_only(
    azure: tuple[str, dict[str, str]], azure_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    container, admin = azure
    db = f"sqlite:///{tmp_path}/c.db"
    monkeypatch.setenv("DAL_HOME", str(tmp_path / "home"))
    dal.write(pa.table({"id": list(range(12))}), "az.radar", path=f"az://{container}/radar", storage_options=admin,
              catalog=db)  # fmt: skip
    store = AuthStore(db)
    store.create_principal("writer", "service")
    store.grant("writer", "WRITE", "az.*")
    token = store.create_token("writer", expires_in=timedelta(days=1))[0]
    store.close()
    creds = tmp_path / "storage.json"
    creds.write_text(json.dumps({"azure": {"*": {"account": AZURE_ACCOUNT, "account_key": AZURE_KEY,
                                                 "endpoint": azure_endpoint, "write": True}}}))  # fmt: skip
    proc, base = start(db, ["--storage-credentials", str(creds)])
    try:
        for var in [v for v in os.environ if v.startswith("AZURE_")]:
            monkeypatch.delenv(var)
        monkeypatch.setenv("DAL_CATALOG_URL", base)
        monkeypatch.setenv("DAL_TOKEN", token)
        from dal import lineage

        lineage.clear_read_log()
        v = dal.write(pa.table({"id": list(range(12, 20))}), "az.radar", storage_options={"azure_allow_http": "true"})
        assert v.number == 1
        ds = dal.open("az.radar")
        assert sorted(ds.to_arrow().column("id").to_pylist()) == list(range(20))
    finally:
        out = stop(proc)
    assert AZURE_KEY not in out and token not in out
    rows = AuthStore(db).audit(dataset="az.radar", principal="writer", limit=100)
    assert f"vended write az://{container}" in {r.detail for r in rows}
