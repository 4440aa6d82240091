"""A local S3 server (moto) for the object storage tests, started once per test process.

The server runs as its own process on 127.0.0.1 (a free port), with moto's IAM checks on:
every request must be signed with the access key the fixture creates, so wrong
credentials are refused as a real store refuses them. No ``AWS_*`` variable is set in the
tests' environment: the projects' ``storage_options`` carry everything, the secret through a
``${IVM_TEST_S3_SECRET}`` reference. The server's request log (one line per request,
written by its HTTP server) is how the tests count requests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from tests.local_servers import free_port, wait_listening

SECRET_ENV = "IVM_TEST_S3_SECRET"
_REQUEST = re.compile(r'"([A-Z]+) (\S+) HTTP/1\.[01]" (\d{3})')
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # the server colours the request line of some answers
# moto lets this many requests through unchecked: the IAM user, its policy and its key.
_SETUP_ACTIONS = 3


@dataclass
class S3Server:
    """The running server: its endpoint, the access key every request is signed with, and
    its request log."""

    endpoint: str
    key_id: str
    secret: str
    log: Path
    pid: int
    buckets: list[str] = field(default_factory=list)

    def options(self, *, secret: str | None = None) -> dict[str, str]:
        """Storage options reaching the server (``secret`` as written, e.g. a reference)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret if secret is None else secret, "AWS_ALLOW_HTTP": "true",
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id=self.key_id, aws_secret_access_key=self.secret
        )

    def new_bucket(self) -> str:
        name = f"ivm-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object in ``bucket``: key → content."""
        client = self.client()
        found = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                found[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return found

    def mark(self) -> int:
        """A point in the request log (requests after it are counted by :meth:`requests_since`)."""
        return len(self._lines())

    def requests_since(self, mark: int) -> list[tuple[str, str, int]]:
        """(method, path, status) of each request the server answered after ``mark``. The
        server logs a request after answering it: wait until the log stops growing."""
        seen = -1
        while True:
            lines = self._lines()
            if len(lines) == seen:
                break
            seen = len(lines)
            time.sleep(0.1)
        return [(m[1], m[2], int(m[3])) for line in lines[mark:] if (m := _REQUEST.search(line))]

    def _lines(self) -> list[str]:
        lines = (_COLOUR.sub("", line) for line in self.log.read_text(errors="replace").splitlines())
        return [line for line in lines if _REQUEST.search(line)]



@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> S3Server:
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        del os.environ[name]  # the projects' storage_options must carry everything
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "requests.log"
    moto = Path(sys.executable).with_name("moto_server")
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_ACTIONS)}
    with open(log, "w") as out:
        proc = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        wait_listening(proc, port, log, "moto_server")
        key_id, secret = _iam_user(endpoint)
        os.environ[SECRET_ENV] = secret
        yield S3Server(endpoint, key_id, secret, log, proc.pid)
    finally:
        os.environ.pop(SECRET_ENV, None)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _iam_user(endpoint: str) -> tuple[str, str]:
    """An IAM user allowed every S3 action, and its access key (the server's first requests)."""
    import boto3

    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
    iam.create_user(UserName="ivm")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName="ivm", PolicyName="s3", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="ivm")["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


class S3Project:
    """A project folder on the local disk whose sources and warehouse are in one bucket, its
    ivm.yaml carrying the storage options (the secret as a ``${…}`` reference)."""

    def __init__(self, root: Path, server: S3Server, spark) -> None:
        from ivm_assets.delta import storage

        self.root, self.server, self.spark = root, server, spark
        self.bucket = server.new_bucket()
        self.base = f"s3://{self.bucket}"
        self.sources: dict[str, str] = {}
        self.settings: dict[str, dict] = {}
        (root / "views").mkdir(parents=True, exist_ok=True)
        # Sources are written before the project loads: registered as the project will.
        storage.register(self.base, server.options(), origin="the test's S3Project")

    def source(self, name: str, table: pa.Table | dict) -> str:
        from ivm_assets.delta.write import create_table

        table = table if isinstance(table, pa.Table) else pa.table(table)
        uri = f"{self.base}/sources/{name}"
        create_table(uri, table)
        self.sources[name] = uri
        return uri

    def view(self, name: str, sql: str, **settings) -> None:
        (self.root / "views" / f"{name}.sql").write_text(sql)
        if settings:
            self.settings[name] = settings

    def write_config(self, extra: dict | None = None, *, secret: str = "${" + SECRET_ENV + "}") -> None:
        data = {
            "warehouse": f"{self.base}/warehouse", "sources": self.sources, "state_buckets": 4,
            "storage_options": self.server.options(secret=secret), **(extra or {}),
        }
        if self.settings:
            data["views"] = self.settings
        (self.root / "ivm.yaml").write_text(yaml.safe_dump(data))

    def load(self, **extra):
        from ivm_assets import IvmProject

        self.write_config(extra or None)
        return IvmProject.load(self.root, spark=self.spark)


@pytest.fixture
def s3_project(tmp_path, s3_server, spark) -> S3Project:
    return S3Project(tmp_path / "project", s3_server, spark)
