"""Faults: S3 throttling and 5xx retries (injected by a proxy in front of moto's server), kill
and resume of the documents stage and of dedup stages, concurrent materializations of one
partition, and the partition lock.

docs/faults.md lists these faults with what happened before and after the fixes.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pyarrow.parquet as pq
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from curation import storage as storage_module
from curation.config import DedupSettings, DocumentsSettings
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.dedup import run_partition_dedup
from curation.stages.documents import run_documents
from curation.stats import StageStats
from curation.storage import LocalStore, RetryPolicy, S3RetryError, S3Store
from curation.tasks import (
    LockLostError,
    LockSettings,
    PartitionLock,
    PartitionLockedError,
    PartitionRun,
    TaskOutput,
    run_partition,
)
from tests.conftest import MOTO_CREDENTIALS, REPO

CC_2020 = "warc/cc-main-2020-34_resiliparse_16responses.warc.gz"
DOLMA0 = "warc/non_cc/dolma_wget-sample-0000_22responses.warc.gz"
DOLMA1 = "warc/non_cc/dolma_wget-sample-0001_15responses.warc.gz"
CLUEWEB = "warc/non_cc/clueweb09-ja_resiliparse-quirk_29responses.warc.gz"
CC_2014 = "warc/cc-main-2014-35_wdps-sample_4responses.warc"
JWARC = "warc/cc-2019-12_jwarc-cc_1response.warc.gz"
CREDENTIALS = MOTO_CREDENTIALS


# --- moto's server and a fault-injecting proxy in front of it ----------------------------------


@pytest.fixture(scope="module")
def moto_endpoint(s3_endpoint):
    boto3.client("s3", endpoint_url=s3_endpoint, **CREDENTIALS).create_bucket(Bucket="faults")
    return s3_endpoint


@dataclass
class Rule:
    """Answer matching requests with an error: `times` times (None: always), or every `every`-th
    matching request."""

    method: str | None
    path_part: str
    status: int
    code: str
    times: int | None = None
    every: int | None = None
    seen: int = 0


@dataclass
class FaultProxy:
    """A tiny HTTP proxy to moto's server that injects S3 errors and counts requests."""

    upstream: str
    rules: list[Rule] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    faults: list[tuple[str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> FaultProxy:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def fail(self, method: str | None, path_part: str, times: int | None, status: int = 503,
             code: str = "SlowDown", every: int | None = None) -> Rule:
        rule = Rule(method, path_part, status, code, times, every)
        with self.lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.requests.clear()
            self.faults.clear()

    def count(self, method: str, path_part: str) -> int:
        with self.lock:
            return sum(1 for m, p in self.requests if m == method and path_part in p)

    def match(self, method: str, path: str) -> Rule | None:
        with self.lock:
            self.requests.append((method, path))
            for rule in self.rules:
                if (rule.method in (None, method)) and rule.path_part in path:
                    rule.seen += 1
                    if rule.every is not None:
                        hit = rule.seen % rule.every == 0
                    else:
                        hit = rule.times is None or rule.seen <= rule.times
                    if hit:
                        self.faults.append((method, path, rule.status))
                        return rule
            return None


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                body = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return bytes(body)
                    body += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _any(self) -> None:
            body = self._body()
            rule = proxy.match(self.command, self.path)
            if rule is not None and rule.code == "PartialDelete":
                # A multi-object delete that answers 200 but reports every key as throttled.
                keys = re.findall(rb"<Key>(.*?)</Key>", body)
                errors = b"".join(b"<Error><Key>" + key + b"</Key><Code>SlowDown</Code>"
                                  b"<Message>injected</Message></Error>" for key in keys)
                answer = (b'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult xmlns='
                          b'"http://s3.amazonaws.com/doc/2006-03-01/">' + errors
                          + b"</DeleteResult>")
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                return
            if rule is not None:
                error = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{rule.code}'
                         f"</Code><Message>injected fault</Message><Resource>{self.path}"
                         f"</Resource><RequestId>FAULT</RequestId></Error>").encode()
                self.send_response(rule.status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", "0" if self.command == "HEAD"
                                 else str(len(error)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(error)
                return
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "transfer-encoding", "connection",
                                            "content-length")}
            headers["Host"] = upstream.netloc
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            connection.request(self.command, self.path, body=body or None, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            connection.close()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length",
                                       "server", "date"):
                    self.send_header(key, value)
            self.send_header("Content-Length", answer.getheader("Content-Length", "0")
                             if self.command == "HEAD" else str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    return Handler


@dataclass(frozen=True)
class ClientFactory:
    """A boto3 client with botocore's own retries off, so every attempt counted at the proxy
    is one of ours (picklable, for worker processes)."""

    endpoint: str
    botocore_attempts: int = 1

    def __call__(self) -> Any:
        config = Config(retries={"total_max_attempts": self.botocore_attempts,
                                 "mode": "standard"})
        return boto3.client("s3", endpoint_url=self.endpoint, config=config, **CREDENTIALS)


@pytest.fixture(scope="module")
def proxy(moto_endpoint):
    running = FaultProxy(moto_endpoint).start()
    yield running
    running.stop()


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """Every backoff sleep the store takes (it still sleeps)."""
    taken: list[float] = []
    real = storage_module._sleep

    def record(seconds: float) -> None:
        taken.append(seconds)
        real(seconds)

    monkeypatch.setattr(storage_module, "_sleep", record)
    return taken


FAST = RetryPolicy(max_attempts=6, base_delay=0.01, max_delay=0.04, max_total_delay=1.0)


# --- S3 retries --------------------------------------------------------------------------------


def test_one_attempt_is_one_request_through_the_proxy(proxy) -> None:
    proxy.clear()
    store = S3Store("s3://faults/root", ClientFactory(proxy.endpoint), FAST)
    store.write_bytes("plain/a", b"x")
    assert store.read_bytes("plain/a") == b"x"
    assert proxy.count("PUT", "/plain/a") == 1 and proxy.count("GET", "/plain/a") == 1


@pytest.mark.parametrize(("status", "code"), [
    (503, "SlowDown"), (503, "RequestLimitExceeded"), (429, "TooManyRequests"),
    (500, "InternalError"), (502, "BadGateway"),
])
def test_every_call_retries_throttling_and_5xx_with_bounded_full_jitter(proxy, sleeps, status,
                                                                        code) -> None:
    proxy.clear()
    store = S3Store("s3://faults/root", ClientFactory(proxy.endpoint), FAST)
    key = f"retry-{status}-{code}/object"
    calls = {
        "PUT": lambda: store.write_bytes(key, b"payload"),
        "GET": lambda: store.read_bytes(key),
        "HEAD": lambda: store.exists(key),
        "LIST": lambda: store.list(key.split("/")[0]),
        "DELETE": lambda: store.delete(key),
    }
    for operation, call in calls.items():
        method = "GET" if operation == "LIST" else operation
        part = f"prefix=root%2F{key.split('/')[0]}" if operation == "LIST" else f"/root/{key}"
        proxy.clear()
        sleeps.clear()
        proxy.fail(method, part, times=3, status=status, code=code)
        result = call()
        # 3 injected faults, then success: exactly 4 requests of ours reached the proxy.
        assert proxy.count(method, part) == 4, operation
        if operation == "GET":
            assert result == b"payload"
        if operation == "HEAD":
            assert result is True
        if operation == "LIST":
            assert result == [key]
        # Full jitter under an exponential ceiling: sleep n is in [0, min(cap, base * 2**(n-1))].
        assert len(sleeps) == 3
        for retry, slept in enumerate(sleeps, start=1):
            assert 0 <= slept <= FAST.ceiling(retry)
    assert not store.exists(key)


def test_a_permanent_5xx_gives_up_after_max_attempts_naming_the_key(proxy, sleeps) -> None:
    proxy.clear()
    store = S3Store("s3://faults/root", ClientFactory(proxy.endpoint), FAST)
    store.write_bytes("broken/part-00007.parquet", b"data")
    proxy.fail("GET", "/root/broken/part-00007.parquet", times=None, status=503)
    started = time.monotonic()
    with pytest.raises(S3RetryError) as caught:
        store.read_bytes("broken/part-00007.parquet")
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert "s3://faults/root/broken/part-00007.parquet" in message
    assert "GET" in message and "6 attempts" in message and "SlowDown" in message
    assert proxy.count("GET", "/root/broken/part-00007.parquet") == FAST.max_attempts
    assert len(sleeps) == FAST.max_attempts - 1
    assert sum(sleeps) <= FAST.max_total_delay
    assert elapsed < FAST.max_total_delay + 5
    assert caught.value.attempts == FAST.max_attempts and caught.value.status == 503


def test_the_total_delay_bound_stops_retrying_before_max_attempts(proxy, sleeps) -> None:
    proxy.clear()
    policy = RetryPolicy(max_attempts=1000, base_delay=0.05, max_delay=0.05,
                         max_total_delay=0.3)
    store = S3Store("s3://faults/root", ClientFactory(proxy.endpoint), policy)
    proxy.fail("PUT", "/root/slow/key", times=None, status=500, code="InternalError")
    started = time.monotonic()
    with pytest.raises(S3RetryError, match="s3://faults/root/slow/key"):
        store.write_bytes("slow/key", b"x")
    assert time.monotonic() - started < policy.max_total_delay + 5
    assert sum(sleeps) <= policy.max_total_delay + 1e-9
    attempts = proxy.count("PUT", "/root/slow/key")
    assert 2 <= attempts < 1000 and attempts == len(sleeps) + 1


def test_client_errors_are_not_retried(proxy, sleeps) -> None:
    proxy.clear()
    store = S3Store("s3://faults/root", ClientFactory(proxy.endpoint), FAST)
    with pytest.raises(ClientError):
        store.read_bytes("missing/key")
    assert proxy.count("GET", "/root/missing/key") == 1
    proxy.fail("PUT", "/root/denied", times=None, status=403, code="AccessDenied")
    with pytest.raises(ClientError, match="AccessDenied"):
        store.write_bytes("denied", b"x")
    assert proxy.count("PUT", "/root/denied") == 1 and sleeps == []


def test_keys_a_multi_object_delete_reports_as_failed_are_retried(proxy, sleeps) -> None:
    proxy.clear()
    store = S3Store("s3://faults/root", ClientFactory(proxy.endpoint), FAST)
    for name in ("a", "b", "c"):
        store.write_bytes(f"bulk/{name}", b"x")
    proxy.fail("POST", "?delete", times=1, status=200, code="PartialDelete")
    assert store.delete_prefix("bulk") == 3
    assert store.list("bulk") == []
    assert proxy.count("POST", "?delete") == 2 and len(sleeps) == 1


def test_a_whole_stage_under_throttling_writes_the_same_partition(proxy, shared_data,
                                                                  tmp_path) -> None:
    # Every 3rd request is throttled for the whole run: the output is unchanged.
    proxy.clear()
    proxy.fail(None, "/root/", times=None, every=3)
    store = S3Store("s3://faults/root", ClientFactory(proxy.endpoint), FAST)
    inputs = [str(shared_data / name) for name in (JWARC, CC_2014)]
    throttled = run_documents("THROTTLED", inputs, store, DocumentsSettings(), workers=0)
    local = run_documents("THROTTLED", inputs, LocalStore(str(tmp_path)), DocumentsSettings(),
                          workers=0)
    assert len(proxy.faults) >= 4
    assert throttled.manifest.data_version == local.manifest.data_version
    assert PartitionLayout(store, "documents", "THROTTLED").is_complete()


# --- the lock's primitives on S3 (conditional PUT and DELETE) ----------------------------------


def test_s3_conditional_writes_make_a_lock(moto_endpoint) -> None:
    store = S3Store("s3://faults/locks", ClientFactory(moto_endpoint), FAST)
    first = store.create_if_absent("a/_lock", b"one")
    assert first is not None and store.create_if_absent("a/_lock", b"two") is None
    assert store.read_versioned("a/_lock") == (b"one", first)
    second = store.replace_if_match("a/_lock", b"three", first)
    assert second is not None and store.replace_if_match("a/_lock", b"four", first) is None
    assert not store.delete_if_match("a/_lock", first)
    assert store.delete_if_match("a/_lock", second) and not store.exists("a/_lock")


def test_s3_partition_lock_waits_then_names_the_holder(moto_endpoint) -> None:
    store = S3Store("s3://faults/locks", ClientFactory(moto_endpoint), FAST)
    settings = LockSettings(wait_seconds=0.5, stale_seconds=30, heartbeat_seconds=0.2,
                            poll_seconds=0.05)
    holder = PartitionLock(store, "documents/P/_lock", "documents[P]", "run-one", settings)
    holder.acquire()
    try:
        time.sleep(0.5)  # a heartbeat or two (If-Match writes)
        other = PartitionLock(store, "documents/P/_lock", "documents[P]", "run-two", settings)
        with pytest.raises(PartitionLockedError, match="run-one"):
            other.acquire()
        holder.check()
    finally:
        holder.release()
    other.acquire()
    other.release()
    assert not store.exists("documents/P/_lock")


# --- kill and resume ---------------------------------------------------------------------------

RUNNER = r"""
import json, logging, os, signal, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                    format="%(levelname)s %(name)s: %(message)s")
from curation.config import DedupSettings, DocumentsSettings
from curation.storage import LocalStore

KILL_AT = os.environ.get("KILL_AT")
if KILL_AT:
    # Dies in the middle of writing the object whose final name contains KILL_AT: its
    # temporary file holds half the bytes when the process is SIGKILLed before the rename.
    import curation.storage as storage
    real_replace = os.replace

    def replace(source, target):
        if KILL_AT in str(target):
            size = os.path.getsize(source)
            with open(source, "r+b") as handle:
                handle.truncate(size // 2)
            os.kill(os.getpid(), signal.SIGKILL)
        return real_replace(source, target)

    storage.os.replace = replace

TASK_DELAY = float(os.environ.get("TASK_DELAY", "0"))
if TASK_DELAY:
    # Every documents task takes this much longer (a big WARC file), so that a second run
    # meets the lock held however fast extraction gets.
    import curation.stages.documents as documents
    real_call = documents.DocumentsWork.__call__

    def slow_call(self, index):
        time.sleep(TASK_DELAY)
        return real_call(self, index)

    documents.DocumentsWork.__call__ = slow_call

if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    store = LocalStore(args["root"])
    if args["mode"] == "documents":
        from curation.stages.documents import run_documents
        settings = DocumentsSettings(**args.get("settings", {}))
        run = run_documents(args["partition"], args["inputs"], store, settings,
                            workers=args.get("workers", 0), run_id=args.get("run_id"))
        out = {"tasks_run": run.stats.tasks_run, "tasks_skipped": run.stats.tasks_skipped,
               "version": run.manifest.version, "data_version": run.manifest.data_version,
               "finished": time.time()}
    else:
        from curation.stages.base import DocumentsInput
        from curation.stages.dedup import run_partition_dedup
        out = []
        for stage in args["stages"]:
            result = run_partition_dedup(DocumentsInput(store, args["partition"]), stage,
                                         DedupSettings(**args.get("settings", {})), {})
            out.append({"stage": stage, "tasks_run": result.stats.tasks_run})
    print(json.dumps(out))
"""


def _runner(args: dict[str, Any], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUNNER, json.dumps(args)], cwd=REPO,
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _inputs(shared: Path, folder: Path, names: list[str]) -> list[str]:
    """Links to real WARC files under distinct names (one task each)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, name in enumerate(names):
        link = folder / f"{index:02d}-{Path(name).name}"
        if not link.exists():
            link.symlink_to(shared / name)
        paths.append(str(link))
    return paths


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _same_partition(root_a: Path, root_b: Path, asset: str, partition: str) -> str:
    """Asserts two roots hold byte-identical output for one partition; its data version."""
    a = PartitionLayout(LocalStore(str(root_a)), asset, partition).complete_manifest()
    b = PartitionLayout(LocalStore(str(root_b)), asset, partition).complete_manifest()
    assert a.data_version == b.data_version
    parts_a = [*a.parts, *(p for name in sorted(a.tables) for p in a.tables[name])]
    parts_b = [*b.parts, *(p for name in sorted(b.tables) for p in b.tables[name])]
    assert [(p.key, p.sha256, p.rows) for p in parts_a] == \
        [(p.key, p.sha256, p.rows) for p in parts_b]
    for part in parts_a:
        assert _sha(root_a / part.key) == _sha(root_b / part.key) == part.sha256
    return a.data_version


class _Scanner(threading.Thread):
    """Reads every Parquet file visible under its final name while a run writes: each one
    must be whole."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root, self.stop, self.checked, self.errors = root, threading.Event(), set(), []
        self.scans = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.scans += 1
            for path in self.root.rglob("*.parquet"):
                if path.name.startswith("."):
                    continue
                try:
                    pq.read_table(path)
                    self.checked.add(path.name)
                except FileNotFoundError:
                    continue
                except Exception as error:  # noqa: BLE001 - a torn part is the failure
                    self.errors.append(f"{path}: {error}")
            time.sleep(0.005)


def test_documents_killed_mid_run_resume_without_redoing_finished_tasks(shared_data, tmp_path,
                                                                         caplog) -> None:
    names = [CC_2020, DOLMA0, DOLMA1, CLUEWEB, CC_2014, JWARC]
    inputs = _inputs(shared_data, tmp_path / "in", names)
    killed = tmp_path / "killed"
    killed.mkdir()
    scanner = _Scanner(killed)
    scanner.start()
    process = _runner({"mode": "documents", "root": str(killed), "partition": "KILL",
                       "inputs": inputs, "workers": 1})
    markers = killed / "documents/KILL/_tasks"
    deadline = time.monotonic() + 120
    while not (markers.is_dir() and any(markers.glob("*.json"))):
        assert process.poll() is None, f"the run ended before it could be killed: " \
                                       f"{process.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    scanner.stop.set()
    scanner.join()
    finished = sorted(markers.glob("*.json"))
    assert 1 <= len(finished) < len(names)
    assert not (killed / "documents/KILL/_manifest.json").exists()
    assert scanner.errors == [] and scanner.scans > 10
    # The killed run's lock is left behind; its process is gone, so it is taken over at once.
    assert (killed / "documents/KILL/_lock").exists()
    before = {path.name: path.stat().st_mtime_ns for path in finished}
    parts_before = {path.name: (path.stat().st_ino, path.stat().st_mtime_ns)
                    for path in (killed / "documents/KILL").glob("part-*.parquet")}
    with caplog.at_level(logging.WARNING, logger="curation.tasks"):
        resumed = run_documents("KILL", inputs, LocalStore(str(killed)), DocumentsSettings(),
                                workers=0)
    assert "took over the stale lock" in caplog.text and "is gone" in caplog.text
    # No finished task was redone: counted, and its marker and part files are untouched.
    assert resumed.stats.tasks_skipped == len(finished)
    assert resumed.stats.tasks_run == len(names) - len(finished)
    assert {path.name: path.stat().st_mtime_ns for path in finished} == before
    for name, identity in parts_before.items():
        path = killed / "documents/KILL" / name
        stat = path.stat()
        assert (stat.st_ino, stat.st_mtime_ns) == identity, name
    assert not (killed / "documents/KILL/_lock").exists()
    clean = run_documents("KILL", inputs, LocalStore(str(tmp_path / "clean")),
                          DocumentsSettings(), workers=0)
    assert _same_partition(killed, tmp_path / "clean", "documents", "KILL") == \
        resumed.manifest.data_version == clean.manifest.data_version


def test_documents_killed_while_writing_a_part_never_show_it_torn(shared_data, tmp_path) -> None:
    inputs = _inputs(shared_data, tmp_path / "in", [JWARC, CC_2014, CC_2020, DOLMA1])
    killed = tmp_path / "killed"
    process = _runner({"mode": "documents", "root": str(killed), "partition": "TORN",
                       "inputs": inputs}, {"KILL_AT": "documents/TORN/part-00002.parquet"})
    _, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, err[-2000:]
    folder = killed / "documents/TORN"
    assert not (folder / "part-00002.parquet").exists()
    torn = list(folder.glob(".part-00002.parquet.*.tmp"))
    assert len(torn) == 1
    with pytest.raises(Exception):  # noqa: B017 - the half-written bytes are not Parquet
        pq.read_metadata(torn[0])
    assert sorted(p.name for p in (folder / "_tasks").glob("*.json")) == \
        ["task-00000.json", "task-00001.json"]
    resumed = run_documents("TORN", inputs, LocalStore(str(killed)), DocumentsSettings(),
                            workers=0)
    assert (resumed.stats.tasks_skipped, resumed.stats.tasks_run) == (2, 2)
    assert not list(folder.glob(".*.tmp")), "the killed writer's temporary file is cleared"
    run_documents("TORN", inputs, LocalStore(str(tmp_path / "clean")), DocumentsSettings(),
                  workers=0)
    _same_partition(killed, tmp_path / "clean", "documents", "TORN")


DEDUP_STAGES = ["url_dedup", "exact_dedup", "line_dedup"]
# Lines in more than 2 documents are boilerplate: these few files have some.
DEDUP = {"line_max_documents": 2}


def test_dedup_killed_mid_stage_resumes_and_matches_a_clean_run(shared_data, tmp_path) -> None:
    killed = tmp_path / "killed"
    inputs = _inputs(shared_data, tmp_path / "in", [CC_2020, DOLMA0, DOLMA1])
    run_documents("DD", inputs, LocalStore(str(killed)), DocumentsSettings(), workers=0)
    shutil.copytree(killed, tmp_path / "clean")
    # Killed while writing line_dedup's second part (one task per documents part): task 0 is
    # done (marker), task 1's decisions and edits are written, its part is half-written under a
    # temporary name, the exchange is left in _work, the manifest is not written.
    process = _runner({"mode": "dedup", "root": str(killed), "partition": "DD",
                       "stages": DEDUP_STAGES, "settings": DEDUP},
                      {"KILL_AT": "line_dedup/DD/part-00001.parquet"})
    _, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, err[-2000:]
    line = killed / "line_dedup/DD"
    assert (killed / "url_dedup/DD/_manifest.json").exists()
    assert (killed / "exact_dedup/DD/_manifest.json").exists()
    assert not (line / "_manifest.json").exists()
    assert [p.name for p in (line / "_tasks").iterdir()] == ["task-00000.json"]
    assert any((line / "_work").rglob("*.parquet"))
    assert {p.name for p in line.glob("*.parquet")} == {
        "part-00000.parquet", "decisions-00000.parquet", "edits-00000.parquet",
        "decisions-00001.parquet", "edits-00001.parquet"}
    for path in line.glob("*.parquet"):
        pq.read_table(path)  # whole
    markers = {stage: (killed / stage / "DD/_tasks/task-00000.json").stat().st_mtime_ns
               for stage in DEDUP_STAGES}
    store = LocalStore(str(killed))
    resumed = {stage: run_partition_dedup(DocumentsInput(store, "DD"), stage,
                                          DedupSettings(**DEDUP), {}) for stage in DEDUP_STAGES}
    parts = DocumentsInput(store, "DD").task_count()
    assert parts == 3
    assert [resumed[s].stats.tasks_skipped for s in DEDUP_STAGES] == [1, 1, 1]
    assert resumed["line_dedup"].stats.tasks_run == parts - 1
    assert markers == {stage: (killed / stage / "DD/_tasks/task-00000.json").stat().st_mtime_ns
                       for stage in DEDUP_STAGES}
    assert not (line / "_work").exists() or not any((line / "_work").rglob("*"))
    clean_store = LocalStore(str(tmp_path / "clean"))
    for stage in DEDUP_STAGES:
        run_partition_dedup(DocumentsInput(clean_store, "DD"), stage, DedupSettings(**DEDUP),
                            {})
        _same_partition(killed, tmp_path / "clean", stage, "DD")
    assert sum(part.rows for part in resumed["line_dedup"].manifest.tables["edits"]) > 0


# --- concurrent materializations ---------------------------------------------------------------

LOCK_ENV = {"CORPUS_LOCK_WAIT_SECONDS": "120", "CORPUS_LOCK_STALE_SECONDS": "20",
            "CORPUS_LOCK_HEARTBEAT_SECONDS": "0.5", "CORPUS_LOCK_POLL_SECONDS": "0.1"}


def _finish(process: subprocess.Popen) -> tuple[dict[str, Any], str]:
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


def test_two_materializations_of_one_partition_at_once(shared_data, tmp_path) -> None:
    inputs = _inputs(shared_data, tmp_path / "in", [CC_2020, DOLMA1, JWARC])
    root = tmp_path / "shared-root"
    scanner = _Scanner(root)
    scanner.start()
    runs = [_runner({"mode": "documents", "root": str(root), "partition": "TWICE",
                     "inputs": inputs, "run_id": run_id}, LOCK_ENV) for run_id in ("A", "B")]
    results = [_finish(process) for process in runs]
    scanner.stop.set()
    scanner.join()
    assert scanner.errors == []
    # One run did the work; the other waited for its lock, then found every task finished.
    counts = sorted((out["tasks_run"], out["tasks_skipped"]) for out, _ in results)
    assert counts == [(0, 3), (3, 0)]
    waiter = next(err for out, err in results if out["tasks_skipped"] == 3)
    assert "waiting for the lock held by run" in waiter
    run_documents("TWICE", inputs, LocalStore(str(tmp_path / "clean")), DocumentsSettings(),
                  workers=0)
    _same_partition(root, tmp_path / "clean", "documents", "TWICE")
    assert not (root / "documents/TWICE/_lock").exists()


def test_two_materializations_with_different_versions_never_mix(shared_data, tmp_path) -> None:
    # Without the lock the second run's clearing (a new version) deleted the first run's parts
    # under its feet. With it, the runs follow each other and the last one's output stands whole.
    inputs = _inputs(shared_data, tmp_path / "in", [CC_2020, DOLMA1, JWARC])
    root = tmp_path / "shared-root"
    first = _runner({"mode": "documents", "root": str(root), "partition": "MIXED",
                     "inputs": inputs, "run_id": "trafilatura"}, LOCK_ENV)
    deadline = time.monotonic() + 60
    while not (root / "documents/MIXED/_lock").exists():  # the first run is under way
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    second = _runner({"mode": "documents", "root": str(root), "partition": "MIXED",
                      "inputs": inputs, "run_id": "resiliparse",
                      "settings": {"extractor": "resiliparse"}}, LOCK_ENV)
    results = [_finish(process)[0] for process in (first, second)]
    last = max(results, key=lambda out: out["finished"])
    manifest = PartitionLayout(LocalStore(str(root)), "documents", "MIXED").complete_manifest()
    assert manifest.version == last["version"] and manifest.data_version == last["data_version"]
    assert {out["version"] for out in results} == {results[0]["version"], results[1]["version"]}
    assert results[0]["version"] != results[1]["version"]
    for part in manifest.parts:
        assert _sha(root / part.key) == part.sha256
    markers = [json.loads(p.read_text()) for p in (root / "documents/MIXED/_tasks").glob("*")]
    assert {marker["version"] for marker in markers} == {last["version"]}


def test_a_second_run_gives_up_on_a_fresh_lock_naming_its_holder(shared_data, tmp_path) -> None:
    inputs = _inputs(shared_data, tmp_path / "in", [CC_2020, DOLMA0, DOLMA1, CLUEWEB])
    root = tmp_path / "root"
    holder = _runner({"mode": "documents", "root": str(root), "partition": "BUSY",
                      "inputs": inputs, "run_id": "run-holding-it"},
                     {**LOCK_ENV, "TASK_DELAY": "1.5"})
    lock = root / "documents/BUSY/_lock"
    deadline = time.monotonic() + 60
    while not lock.exists():
        assert holder.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    settings = LockSettings(wait_seconds=1.0, stale_seconds=20, heartbeat_seconds=0.5,
                            poll_seconds=0.1)
    started = time.monotonic()
    with pytest.raises(PartitionLockedError) as caught:
        run_documents("BUSY", inputs, LocalStore(str(root)), DocumentsSettings(), workers=0,
                      lock=settings, run_id="second")
    assert 1.0 <= time.monotonic() - started < 15
    message = str(caught.value)
    assert "documents[BUSY]" in message and "'run-holding-it'" in message
    assert "heartbeat" in message and "waiting 1." in message
    out, _ = _finish(holder)
    assert out["tasks_run"] == 4
    run_documents("BUSY", inputs, LocalStore(str(tmp_path / "clean")), DocumentsSettings(),
                  workers=0)
    _same_partition(root, tmp_path / "clean", "documents", "BUSY")


def _lock_payload(**fields: Any) -> bytes:
    payload = {"run_id": "ghost", "host": "elsewhere", "pid": 1, "started_at": 0,
               "heartbeat": time.time()}
    payload.update(fields)
    return json.dumps(payload).encode()


@pytest.mark.parametrize("case", ["old-heartbeat", "dead-process", "unchanged"])
def test_a_stale_lock_is_taken_over_and_logged(shared_data, tmp_path, caplog, case) -> None:
    store = LocalStore(str(tmp_path))
    settings = LockSettings(wait_seconds=10, stale_seconds=120, heartbeat_seconds=1)
    if case == "old-heartbeat":
        payload, why = _lock_payload(heartbeat=time.time() - 1000), "heartbeat is"
    elif case == "dead-process":
        gone = subprocess.Popen(["true"])
        gone.wait()
        payload, why = _lock_payload(host=socket.gethostname(), pid=gone.pid), "is gone"
    else:  # a fresh-looking heartbeat (another host's clock) that never changes
        settings = LockSettings(wait_seconds=10, stale_seconds=1.0, heartbeat_seconds=0.5,
                                poll_seconds=0.1)
        payload, why = _lock_payload(heartbeat=time.time() + 3600), "has not changed"
    store.write_bytes("documents/STALE/_lock", payload)
    with caplog.at_level(logging.WARNING, logger="curation.tasks"):
        run = run_documents("STALE", [str(shared_data / JWARC)], store, DocumentsSettings(),
                            workers=0, lock=settings)
    assert run.stats.tasks_run == 1
    assert "took over the stale lock of run 'ghost'" in caplog.text and why in caplog.text
    assert not store.exists("documents/STALE/_lock")


@dataclass(frozen=True)
class SlowWork:
    seconds: float

    def __call__(self, index: int) -> TaskOutput:
        time.sleep(self.seconds)
        import pyarrow as pa

        return TaskOutput({"part": pa.table({"x": [index]})}, StageStats(docs_out=1))


def test_a_run_whose_lock_was_taken_over_stops_before_its_manifest(tmp_path) -> None:
    store = LocalStore(str(tmp_path))
    run = PartitionRun(store, "slow", "P", "v1")
    settings = LockSettings(wait_seconds=1, stale_seconds=5, heartbeat_seconds=0.1)

    def thief(result: Any, done: int, total: int) -> None:
        # Another run decided this one was stale and took the lock over, after the first task
        # (a timer thread lost the race on a loaded machine: the run finished first).
        if done == 1:
            store.write_bytes("slow/P/_lock", _lock_payload(run_id="thief"))

    with pytest.raises(LockLostError, match="lost its lock"):
        run_partition(run, 6, SlowWork(0.2), workers=0, on_task_done=thief, lock=settings,
                      run_id="victim")
    assert not store.exists("slow/P/_manifest.json")
    assert json.loads(store.read_bytes("slow/P/_lock"))["run_id"] == "thief"


def test_the_lock_survives_a_version_change_clearing_the_partition(tmp_path) -> None:
    store = LocalStore(str(tmp_path))
    settings = LockSettings(wait_seconds=1, stale_seconds=5, heartbeat_seconds=0.1)
    run_partition(PartitionRun(store, "slow", "P", "v1"), 2, SlowWork(0), workers=0,
                  lock=settings)
    seen: list[bool] = []

    def watch(result: Any, done: int, total: int) -> None:
        seen.append(store.exists("slow/P/_lock"))

    run_partition(PartitionRun(store, "slow", "P", "v2"), 2, SlowWork(0), workers=0,
                  on_task_done=watch, lock=settings)
    assert seen == [True, True]
    assert PartitionLayout(store, "slow", "P").complete_manifest().version == "v2"
