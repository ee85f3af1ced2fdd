"""Storage credentials vended per dataset (``dal serve --storage-credentials``), against emulators that enforce
them: moto with IAM enforcement on (STS AssumeRole, the role's policies, signatures and session tokens) and
Azurite (service SAS: signature, resource, permissions, expiry).

What moto does not enforce (so these tests cannot show it on S3): the session policy of assumed-role credentials
(moto evaluates only the role's own policies) and their expiry. The session policy document is evaluated here by
moto's own IAM policy evaluator instead, and expiry is refused by the client before a request is sent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import CatalogError
from dal.catalog.auth import AuthStore
from dal.errors import CredentialsExpired
from dal.serve import vending
from tests.objectstores import AZURE_ACCOUNT, AZURE_KEY, free_port, serving
from tests.serve.conftest import http, start, stop

ACCOUNT = "123456789012"  # moto's default account
SERVER_SECRET = f"server-{uuid.uuid4().hex}"  # the server's own S3 secret: never in a response or a log
ROWS = 40


def _boto(endpoint: str, key: str, secret: str, token: str | None = None, service: str = "s3") -> object:
    import boto3

    return boto3.client(service, endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                        aws_session_token=token, region_name="us-east-1")  # fmt: skip


@dataclass
class Moto:
    endpoint: str
    bucket: str
    server_key: str
    server_secret: str
    role_arn: str


@pytest.fixture(scope="module")
def moto_iam(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """A moto server of its own (IAM enforcement is server-wide): a bucket, a role that may read it, and the
    server's IAM user that may only assume that role; then enforcement on."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with serving([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port):
        admin: object = _boto(endpoint, "AKIDADMIN", "admin-secret")
        bucket = f"dal-vend-{uuid.uuid4().hex[:8]}"
        admin.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
        iam: object = _boto(endpoint, "AKIDADMIN", "admin-secret", service="iam")
        trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/dal-server"}, "Action": "sts:AssumeRole"}]}  # fmt: skip
        role = iam.create_role(RoleName="dal-reader", AssumeRolePolicyDocument=json.dumps(trust))  # type: ignore[attr-defined]
        read = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]}  # fmt: skip
        iam.put_role_policy(RoleName="dal-reader", PolicyName="read", PolicyDocument=json.dumps(read))  # type: ignore[attr-defined]
        iam.create_user(UserName="dal-server")  # type: ignore[attr-defined]
        assume = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}  # fmt: skip
        iam.put_user_policy(UserName="dal-server", PolicyName="assume", PolicyDocument=json.dumps(assume))  # type: ignore[attr-defined]
        key = iam.create_access_key(UserName="dal-server")["AccessKey"]  # type: ignore[attr-defined]
        moto = Moto(endpoint, bucket, key["AccessKeyId"], key["SecretAccessKey"], role["Role"]["Arn"])
        moto.admin = admin  # type: ignore[attr-defined]
        yield moto


def _enforce(endpoint: str) -> None:
    """From now on every request to this moto server is checked against IAM."""
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                                  headers={"Content-Type": "text/plain"}),
                           timeout=10).close()  # fmt: skip


@dataclass
class Deployment:
    url: str
    db: str
    token: str
    moto: Moto
    proc: subprocess.Popen[str]
    log: list[str]


@pytest.fixture(scope="module")
def deployment(moto_iam: Moto, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """Two datasets in one bucket (``vend.radar`` and its sibling ``vend.wind``) and one local, a ``dal serve``
    with the server's storage credentials, a service principal with READ on vend.radar only; then IAM on."""
    root = tmp_path_factory.mktemp("vend")
    db = f"sqlite:///{root}/catalog.db"
    old = os.environ.get("DAL_HOME")
    os.environ["DAL_HOME"] = str(root / "home")
    admin_options = {"AWS_ENDPOINT_URL": moto_iam.endpoint, "AWS_ACCESS_KEY_ID": "AKIDADMIN",
                     "AWS_SECRET_ACCESS_KEY": "admin-secret", "AWS_REGION": "us-east-1"}  # fmt: skip
    try:
        for name, path in (("vend.radar", "radar"), ("vend.wind", "radar-wind")):
            table = pa.table({"id": list(range(ROWS)), "v": [f"{name}-{i}" for i in range(ROWS)]})
            dal.write(table, name, path=f"s3://{moto_iam.bucket}/{path}", storage_options=admin_options, catalog=db)
        dal.write(pa.table({"id": [1]}), "vend.local", path=str(root / "local"), catalog=db)
    finally:
        if old is None:
            os.environ.pop("DAL_HOME", None)
        else:
            os.environ["DAL_HOME"] = old
    store = AuthStore(db)
    store.create_principal("trainer", "service")
    store.grant("trainer", "READ", "vend.radar")
    store.grant("trainer", "READ", "vend.local")
    token = store.create_token("trainer", expires_in=timedelta(days=1))[0]
    store.close()
    creds = root / "storage.json"
    creds.write_text(json.dumps({"s3": {moto_iam.bucket: {
        "role_arn": moto_iam.role_arn, "access_key_id": moto_iam.server_key, "secret_access_key": moto_iam.server_secret,
        "region": "us-east-1", "endpoint": moto_iam.endpoint, "duration_s": 900}}}))  # fmt: skip
    _enforce(moto_iam.endpoint)
    proc, base = start(db, ["--storage-credentials", str(creds), "--forbid-local-datasets"])
    log: list[str] = []
    try:
        yield Deployment(base, db, token, moto_iam, proc, log)
    finally:
        out = stop(proc)
        assert moto_iam.server_secret not in out and token not in out
        log.append(out)


def _pin(dep: Deployment, name: str) -> tuple[int, dict[str, object]]:
    status, body, _ = http("GET", f"{dep.url}/api/v1/datasets/{name}/pin", dep.token)
    return status, json.loads(body)


def _vended_s3(dep: Deployment) -> dict[str, str]:
    status, found = _pin(dep, "vend.radar")
    assert status == 200, found
    creds = found["credentials"]
    assert isinstance(creds, dict)
    return dict(creds["options"])


def _code(call: object) -> str:
    from botocore.exceptions import ClientError

    try:
        call()  # type: ignore[operator]
    except ClientError as e:
        return str(e.response["Error"]["Code"])
    return "ok"


def test_a_pin_vends_credentials_that_read_the_dataset_and_never_the_servers_own(deployment: Deployment) -> None:
    status, found = _pin(deployment, "vend.radar")
    assert status == 200, found
    text = json.dumps(found)
    assert deployment.moto.server_secret not in text and deployment.moto.server_key not in text
    creds = found["credentials"]
    assert isinstance(creds, dict)
    assert creds["scope"] == f"s3://{deployment.moto.bucket}/radar" and creds["access"] == "read"
    options = creds["options"]
    assert options["AWS_ACCESS_KEY_ID"].startswith("ASIA") and options["AWS_SESSION_TOKEN"]
    expires = datetime.fromisoformat(str(creds["expires"]).replace("Z", "+00:00"))
    assert timedelta(minutes=14) < expires - datetime.now(UTC) <= timedelta(minutes=15, seconds=5)
    s3 = _boto(deployment.moto.endpoint, options["AWS_ACCESS_KEY_ID"], options["AWS_SECRET_ACCESS_KEY"],
               options["AWS_SESSION_TOKEN"])  # fmt: skip
    keys = s3.list_objects_v2(Bucket=deployment.moto.bucket, Prefix="radar/")["Contents"]  # type: ignore[attr-defined]
    assert any(k["Key"].endswith(".parquet") for k in keys)
    # the sibling dataset in the same bucket: no READ, so no pin and no credentials (the not-found answer)
    status, other = _pin(deployment, "vend.wind")
    assert status == 404 and "credentials" not in other
    # the audit says what was vended (scope), never the credentials
    rows = AuthStore(deployment.db).audit(dataset="vend.radar")
    assert rows[-1].detail == f"vended read s3://{deployment.moto.bucket}/radar"
    assert options["AWS_SECRET_ACCESS_KEY"] not in json.dumps([r.to_dict() for r in rows])


def test_moto_refuses_writes_tampered_secrets_and_tampered_session_tokens(deployment: Deployment) -> None:
    o = _vended_s3(deployment)
    b, ep = deployment.moto.bucket, deployment.moto.endpoint
    good = _boto(ep, o["AWS_ACCESS_KEY_ID"], o["AWS_SECRET_ACCESS_KEY"], o["AWS_SESSION_TOKEN"])
    assert _code(lambda: good.get_object(Bucket=b, Key="radar/_delta_log/00000000000000000000.json")) == "ok"  # type: ignore[attr-defined]
    assert _code(lambda: good.put_object(Bucket=b, Key="radar/evil.parquet", Body=b"x")) == "AccessDenied"  # type: ignore[attr-defined]
    assert (
        _code(lambda: good.delete_object(Bucket=b, Key="radar/_delta_log/00000000000000000000.json")) == "AccessDenied"
    )  # type: ignore[attr-defined]
    secret = o["AWS_SECRET_ACCESS_KEY"]
    forged = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    bad = _boto(ep, o["AWS_ACCESS_KEY_ID"], forged, o["AWS_SESSION_TOKEN"])
    assert _code(lambda: bad.list_objects_v2(Bucket=b, Prefix="radar/")) == "SignatureDoesNotMatch"  # type: ignore[attr-defined]
    token = o["AWS_SESSION_TOKEN"]
    bad_token = _boto(ep, o["AWS_ACCESS_KEY_ID"], secret, token[:-4] + "AAAA")
    assert _code(lambda: bad_token.list_objects_v2(Bucket=b, Prefix="radar/")) == "InvalidToken"  # type: ignore[attr-defined]
    no_token = _boto(ep, o["AWS_ACCESS_KEY_ID"], secret)
    assert _code(lambda: no_token.list_objects_v2(Bucket=b, Prefix="radar/")) != "ok"  # type: ignore[attr-defined]


def test_the_session_policy_allows_the_dataset_only_by_motos_own_evaluator() -> None:
    """moto does not apply session policies to assumed-role credentials; its IAM evaluator judges the document."""
    from moto.iam.access_control import IAMPolicy, PermissionResult

    policy = IAMPolicy(json.dumps(vending.s3_session_policy("bkt", "radar")))
    ok = PermissionResult.PERMITTED

    def verdict(action: str, resource: str, prefix: str | None = None) -> object:
        return policy.is_action_permitted(action, resource, None, {"s3:prefix": prefix} if prefix else None)

    assert verdict("s3:GetObject", "arn:aws:s3:::bkt/radar/part-0.parquet") == ok
    assert verdict("s3:GetObject", "arn:aws:s3:::bkt/radar-wind/part-0.parquet") != ok  # the sibling prefix
    assert verdict("s3:GetObject", "arn:aws:s3:::other/radar/part-0.parquet") != ok
    assert verdict("s3:PutObject", "arn:aws:s3:::bkt/radar/part-0.parquet") != ok
    assert verdict("s3:DeleteObject", "arn:aws:s3:::bkt/radar/part-0.parquet") != ok
    assert verdict("s3:ListBucket", "arn:aws:s3:::other") != ok
    # moto's evaluator ignores StringLike conditions (it applies StringEquals only), so the ListBucket prefix
    # condition is not judged by it: untested against an emulator (docs/security.md); its text is pinned here
    listing = policy_doc = vending.s3_session_policy("bkt", "radar")["Statement"][1]
    assert policy_doc["Condition"] == {"StringLike": {"s3:prefix": ["radar/", "radar/*"]}}  # never "radar" alone
    assert listing["Action"] == ["s3:ListBucket"] and listing["Resource"] == ["arn:aws:s3:::bkt"]
    with pytest.raises(vending.CannotVend, match="cannot be scoped"):
        vending.s3_session_policy("bkt", "radar/*")


def test_dal_open_reads_with_vended_credentials_and_nothing_of_its_own(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("DAL_CATALOG_URL", deployment.url)
    monkeypatch.setenv("DAL_TOKEN", deployment.token)
    ds = dal.open("vend.radar")
    assert sorted(ds.to_arrow().column("id").to_pylist()) == list(range(ROWS))
    # an independent reference: delta-rs with the same vended options
    from deltalake import DeltaTable

    from dal.storage import uris

    ref = DeltaTable(
        f"s3://{deployment.moto.bucket}/radar", storage_options=uris.object_store_options(ds.storage_options)
    )
    assert sorted(ref.to_pyarrow_table().column("id").to_pylist()) == list(range(ROWS))
    # the caller's own (wrong) credentials are replaced, not mixed in
    ds2 = dal.open("vend.radar", storage_options={"AWS_ACCESS_KEY_ID": "AKIDWRONG", "aws_secret_access_key": "nope"})
    assert ds2.to_arrow().num_rows == ROWS
    assert "AKIDWRONG" not in ds2.storage_options.values()


def test_dal_open_with_a_remote_catalog_the_user_built_reads_with_its_vended_credentials(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The credentials come from the very RemoteCatalog that pinned (issue #36), not from this process's cached
    client of the URL (another instance, with no token here, which pinned nothing): before the fix the read fell
    back to the caller's own (wrong) credentials and moto refused it."""
    from dal.catalog import remote

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_PROFILE",
                "DAL_TOKEN", "DAL_TOKEN_FILE", "DAL_CATALOG_URL"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    mine = remote.RemoteCatalog(deployment.url, token=deployment.token)
    own = {"AWS_ENDPOINT_URL": deployment.moto.endpoint, "AWS_ACCESS_KEY_ID": "AKIDWRONG",
           "AWS_SECRET_ACCESS_KEY": "nope", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}  # fmt: skip
    ds = dal.open("vend.radar", catalog=mine, storage_options=own)
    assert sorted(ds.to_arrow().column("id").to_pylist()) == list(range(ROWS))
    assert "AKIDWRONG" not in ds.storage_options.values()
    assert mine.vended("vend.radar", ds.number) is not None
    assert remote.client(deployment.url) is not mine  # the process's own client of the URL pinned nothing
    assert remote.client(deployment.url).vended("vend.radar", ds.number) is None


def test_a_local_path_dataset_is_refused_on_a_server_that_forbids_them(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, found = _pin(deployment, "vend.local")
    assert status == 400 and "local path" in str(found["error"]) and "--forbid-local-datasets" in str(found["error"])
    monkeypatch.setenv("DAL_CATALOG_URL", deployment.url)
    monkeypatch.setenv("DAL_TOKEN", deployment.token)
    with pytest.raises(CatalogError, match="local path"):
        dal.open("vend.local")
    rows = AuthStore(deployment.db).audit(dataset="vend.local")
    assert rows[-1].outcome == "denied" and "local path" in rows[-1].detail


def test_expired_vended_credentials_are_refused_before_a_request(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAL_CATALOG_URL", deployment.url)
    monkeypatch.setenv("DAL_TOKEN", deployment.token)
    ds = dal.open("vend.radar")
    from dal.storage.rangecache import ReadOptions

    assert isinstance(ds.storage_options, ReadOptions) and ds.storage_options.expires
    past = ReadOptions.of(dict(ds.storage_options), None, "2000-01-01T00:00:00Z", "vend.radar version 0")
    import dataclasses

    expired = dataclasses.replace(ds, storage_options=past)
    with pytest.raises(
        CredentialsExpired, match=r"vend.radar version 0 expired at 2000-01-01T00:00:00Z: open the dataset again"
    ):
        expired.to_arrow()


# -- Azure: Azurite checks service SAS (signature, container, permissions, expiry) ---------------------------------


def _blob(endpoint: str, container: str, blob: str, sas: str, method: str = "GET", data: bytes | None = None) -> int:
    headers = {"x-ms-version": vending.SAS_VERSION}
    if method == "PUT":
        headers["x-ms-blob-type"] = "BlockBlob"
    url = (
        f"{endpoint}/{container}/{blob}?{sas}" if blob else f"{endpoint}/{container}?restype=container&comp=list&{sas}"
    )
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_azurite_enforces_the_vended_container_sas(
    azure: tuple[str, dict[str, str]], azure_endpoint: str, tmp_path: Path
) -> None:
    container, admin = azure
    dal.write(pa.table({"id": list(range(10))}), "az.radar", path=f"az://{container}/radar", storage_options=admin,
              catalog=f"sqlite:///{tmp_path}/c.db")  # fmt: skip
    sibling = f"dal-{uuid.uuid4().hex[:12]}"
    assert _blob(azure_endpoint, sibling, "", "", "PUT") in (201, 403, 401)
    config = vending.parse({"azure": {container: {"account": AZURE_ACCOUNT, "account_key": AZURE_KEY, "endpoint": azure_endpoint, "duration_s": 3}}})  # fmt: skip
    creds = vending.vend(config, "az.radar", f"az://{container}/radar")
    assert creds is not None and creds["scope"] == f"az://{container}"
    sas = creds["options"]["AZURE_STORAGE_SAS_KEY"]
    assert AZURE_KEY not in json.dumps(creds)
    log = "radar/_delta_log/00000000000000000000.json"
    assert _blob(azure_endpoint, container, log, sas) == 200  # reads the dataset
    assert _blob(azure_endpoint, container, "", sas) == 200  # lists it
    assert _blob(azure_endpoint, container, "radar/evil", sas, "PUT", b"x") == 403  # no write
    assert _blob(azure_endpoint, container, log, sas, "DELETE") == 403  # no delete
    # another container (the server vends for this one only: same account, same key)
    other = vending.container_sas(AZURE_ACCOUNT, AZURE_KEY, sibling, datetime.now(UTC) + timedelta(hours=1))
    assert _blob(azure_endpoint, sibling, "x", sas) == 403
    assert other != sas
    # tampered: a changed signature, a widened permission or a later expiry with the old signature
    sig = sas.split("sig=")[1]
    assert _blob(azure_endpoint, container, log, sas.replace(sig, ("A" if sig[0] != "A" else "B") + sig[1:])) == 403
    assert _blob(azure_endpoint, container, log, sas.replace("sp=rl", "sp=rwl")) == 403
    assert _blob(azure_endpoint, container, log, re.sub(r"se=[^&]+", "se=2099-01-01T00%3A00%3A00Z", sas)) == 403
    # dal reads with it (pyarrow's Azure client and delta-rs), then it expires
    options = {**creds["options"], "azure_allow_http": "true"}
    from deltalake import DeltaTable

    from dal.storage import uris

    fs, path = uris.filesystem(f"az://{container}/radar", options)
    assert any(i.path.endswith(".parquet") for i in fs.get_file_info(__import__("pyarrow.fs").fs.FileSelector(path)))
    assert (
        DeltaTable(f"az://{container}/radar", storage_options=uris.object_store_options(options))
        .to_pyarrow_table()
        .num_rows
        == 10
    )
    time.sleep(
        max(0.0, (datetime.fromisoformat(creds["expires"].replace("Z", "+00:00")) - datetime.now(UTC)).total_seconds())
        + 1.5
    )
    assert _blob(azure_endpoint, container, log, sas) == 403  # expired


def test_the_credentials_file_is_checked_and_its_errors_name_no_secret(tmp_path: Path) -> None:
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"s3": {"b": {"role_arn": "r", "access_key_id": "AKID", "secret_access_key": SERVER_SECRET, "duration_s": 60}}}))  # fmt: skip
    with pytest.raises(vending.StorageCredentialsError, match="900") as e:
        vending.load(str(bad))
    assert SERVER_SECRET not in str(e.value)
    bad.write_text(json.dumps({"s3": {"b": {"role_arn": "r", "secret_access_key": SERVER_SECRET}}}))
    with pytest.raises(vending.StorageCredentialsError, match="access_key_id") as e:
        vending.load(str(bad))
    assert SERVER_SECRET not in str(e.value)
    bad.write_text('{"s3": {"b": {"secret_access_key": "' + SERVER_SECRET + '",}}')
    with pytest.raises(vending.StorageCredentialsError, match="not JSON") as e:
        vending.load(str(bad))
    assert SERVER_SECRET not in str(e.value)
    good = vending.parse({"s3": {"b": {"role_arn": "r", "access_key_id": "AKID", "secret_access_key": SERVER_SECRET}}})
    assert SERVER_SECRET not in repr(good) and SERVER_SECRET not in repr(good.s3["b"])
    # a GCS dataset and an unconfigured bucket: nothing vended (the reader's own credentials)
    assert vending.vend(good, "g", "gs://b/x") is None
    assert vending.vend(good, "s", "s3://other/x") is None
    assert vending.vend(good, "l", "/tmp/x") is None  # local paths: allowed unless forbidden
    proc, _ = start("sqlite:///" + str(tmp_path / "none.db"), ["--storage-credentials", str(bad)], wait=False)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode != 0 and "not JSON" in out and SERVER_SECRET not in out


def _pins(dep: Deployment, name: str) -> int:
    return sum(
        1 for r in AuthStore(dep.db).audit(dataset=name, principal="trainer", limit=100_000) if r.action == "pin"
    )


def test_a_ddp_job_of_two_ranks_and_two_workers_each_reads_every_row_once_with_one_pin_per_rank(
    deployment: Deployment, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # the job has no storage credentials
    env |= {"DAL_CATALOG_URL": deployment.url, "DAL_TOKEN": deployment.token, "PYTHONPATH": os.pathsep.join(sys.path),
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "DAL_HOME": str(tmp_path / "home")}  # fmt: skip
    before = _pins(deployment, "vend.radar")
    run = subprocess.run([sys.executable, "-m", "tests.serve.vend_ranks", "vend.radar", str(tmp_path), str(free_port())],
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all("ids" in g for g in got), got
    ids = [g["ids"] for g in got]
    assert ids[0] and ids[1] and not set(ids[0]) & set(ids[1])  # each rank its own rows
    assert sorted(ids[0] + ids[1]) == list(range(ROWS))  # every row once
    assert _pins(deployment, "vend.radar") - before == 2  # one pin per rank, none per DataLoader worker
    assert deployment.token not in run.stdout + run.stderr


@pytest.mark.spark
def test_a_spark_job_reads_through_the_served_catalog_with_vended_credentials(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, spark: object
) -> None:
    """No hadoop-aws here: Spark's executors read the planned tasks with pyarrow, with the options the pin vended
    (shipped with the tasks); the job has no storage credentials of its own."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("DAL_CATALOG_URL", deployment.url)
    monkeypatch.setenv("DAL_TOKEN", deployment.token)
    pinned = dal.open("vend.radar")
    sdf = pinned.to_spark(spark)
    assert sorted(r["id"] for r in sdf.collect()) == list(range(ROWS))
    got = pinned.filter("id >= 30").select("id").to_spark(spark)
    assert sorted(r["id"] for r in got.collect()) == list(range(30, ROWS))


def test_vended_options_keep_their_expiry_through_pickling_and_are_refused_after_it() -> None:
    import pickle

    from dal.storage import uris
    from dal.storage.rangecache import ReadOptions

    soon = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    live = pickle.loads(pickle.dumps(ReadOptions.of({"AWS_ACCESS_KEY_ID": "ASIA1"}, None, soon, "d version 3")))
    assert (live.expires, live.vended_for, dict(live)) == (soon, "d version 3", {"AWS_ACCESS_KEY_ID": "ASIA1"})
    uris.check_vended(live)  # not expired: nothing raised
    dead = pickle.loads(pickle.dumps(ReadOptions.of({}, None, "2020-01-01T00:00:00Z", "d version 3")))
    with pytest.raises(CredentialsExpired, match="d version 3 expired at 2020-01-01T00:00:00Z"):
        uris.object_store_options(dead)
    with pytest.raises(CredentialsExpired):
        uris.filesystem("s3://b/d", dead)


def test_dal_open_through_the_server_reads_azure_with_the_vended_sas_only(
    azure: tuple[str, dict[str, str]], azure_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    container, admin = azure
    db = f"sqlite:///{tmp_path}/c.db"
    monkeypatch.setenv("DAL_HOME", str(tmp_path / "home"))
    dal.write(pa.table({"id": list(range(12))}), "az.radar", path=f"az://{container}/radar", storage_options=admin,
              catalog=db)  # fmt: skip
    store = AuthStore(db)
    store.create_principal("trainer", "service")
    store.grant("trainer", "READ", "az.*")
    token = store.create_token("trainer", expires_in=timedelta(days=1))[0]
    store.close()
    creds = tmp_path / "storage.json"
    creds.write_text(json.dumps({"azure": {"*": {"account": AZURE_ACCOUNT, "account_key": AZURE_KEY, "endpoint": azure_endpoint}}}))  # fmt: skip
    proc, base = start(db, ["--storage-credentials", str(creds)])
    try:
        for var in [v for v in os.environ if v.startswith("AZURE_")]:
            monkeypatch.delenv(var)
        monkeypatch.setenv("DAL_CATALOG_URL", base)
        monkeypatch.setenv("DAL_TOKEN", token)
        ds = dal.open("az.radar")
        assert "AZURE_STORAGE_ACCOUNT_KEY" not in ds.storage_options and "AZURE_STORAGE_SAS_KEY" in ds.storage_options
        assert sorted(ds.to_arrow().column("id").to_pylist()) == list(range(12))
    finally:
        out = stop(proc)
    assert AZURE_KEY not in out and token not in out
