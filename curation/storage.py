"""One storage code path for a local folder and an S3 prefix.

Objects appear under their final names only when whole: locally a temporary name then a rename,
on S3 a single PUT. Stores are picklable so worker processes (or Ray tasks) write their own parts.

Every S3 call (get, put, head, list, delete) retries throttling (`SlowDown`,
`RequestLimitExceeded`, HTTP 429 and 503), other 5xx answers and dropped connections with
exponential backoff and full jitter, bounded by a number of attempts and a total delay
(`RetryPolicy`, settable per store or by `CORPUS_S3_*` environment variables), then raises
`S3RetryError` naming the operation and the key. botocore's own retries, configured on the client
(dagster-aws's `S3Resource.max_attempts`), come on top: each of our attempts is one botocore call.

Stores also give the atomic primitives a partition lock needs (`curation.tasks`): create an
object only if absent, and replace or delete it only if it is still the version read.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import logging
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

S3ClientFactory = Callable[[], Any]
T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class S3Settings:
    """An S3 client's settings, the fields of dagster-aws's `S3Resource`, as plain values: called,
    it makes a client as `S3Resource.get_client` does (a boto3 session of `profile_name`,
    botocore's standard retry mode with `max_attempts`). A task carries it to its worker, which
    makes its own client without importing Dagster (unpickling the resource's factory imported
    Dagster in every forked worker: about 2 s each, 200 CPU s over the sample's two runs)."""

    use_unsigned_session: bool = False
    region_name: str | None = None
    endpoint_url: str | None = None
    max_attempts: int = 5
    profile_name: str | None = None
    use_ssl: bool = True
    verify: bool | str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None
    aws_session_token: str | None = None

    def __call__(self) -> Any:
        import boto3
        from botocore.config import Config
        from botocore.handlers import disable_signing

        client = boto3.session.Session(profile_name=self.profile_name).client(
            "s3", region_name=self.region_name, endpoint_url=self.endpoint_url,
            use_ssl=self.use_ssl, verify=self.verify, aws_access_key_id=self.aws_access_key_id,
            aws_secret_access_key=self.aws_secret_access_key,
            aws_session_token=self.aws_session_token,
            config=Config(retries={"max_attempts": self.max_attempts, "mode": "standard"}))
        if self.use_unsigned_session:
            client.meta.events.register("choose-signer.s3.*", disable_signing)
        return client


# --- retries ---------------------------------------------------------------------------------

# Error codes S3 (and S3-compatible stores) use for "slow down" and transient server trouble.
RETRYABLE_CODES = frozenset({
    "SlowDown", "RequestLimitExceeded", "Throttling", "ThrottlingException", "ThrottledException",
    "TooManyRequests", "TooManyRequestsException", "RequestThrottled", "RequestThrottledException",
    "BandwidthLimitExceeded", "ProvisionedThroughputExceededException", "RequestTimeout",
    "RequestTimeoutException", "InternalError", "ServiceUnavailable", "PriorRequestNotComplete",
    "429", "500", "502", "503", "504",
})


def _env_number(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: before retry n (1-based) sleep a uniform random
    time in [0, min(max_delay, base_delay * 2**(n-1))]; give up after `max_attempts` calls, or
    when the sleeps would add up to more than `max_total_delay` seconds."""

    max_attempts: int = 8
    base_delay: float = 0.2
    max_delay: float = 10.0
    max_total_delay: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if min(self.base_delay, self.max_delay, self.max_total_delay) < 0:
            raise ValueError("delays must not be negative")

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """Defaults, overridden by CORPUS_S3_MAX_ATTEMPTS, CORPUS_S3_BASE_DELAY,
        CORPUS_S3_MAX_DELAY and CORPUS_S3_MAX_TOTAL_DELAY (seconds)."""
        default = cls()
        return cls(
            max_attempts=int(_env_number("CORPUS_S3_MAX_ATTEMPTS", default.max_attempts)),
            base_delay=_env_number("CORPUS_S3_BASE_DELAY", default.base_delay),
            max_delay=_env_number("CORPUS_S3_MAX_DELAY", default.max_delay),
            max_total_delay=_env_number("CORPUS_S3_MAX_TOTAL_DELAY", default.max_total_delay),
        )

    def ceiling(self, retry: int) -> float:
        """The largest sleep before retry number `retry` (1-based)."""
        return min(self.max_delay, self.base_delay * 2 ** (retry - 1))


class S3RetryError(OSError):
    """An S3 call that still failed after the retry policy's bound."""

    def __init__(self, operation: str, uri: str, attempts: int, waited: float,
                 error: BaseException) -> None:
        code, status = error_code(error)
        detail = f"{code or type(error).__name__}" + (f" (HTTP {status})" if status else "")
        super().__init__(f"S3 {operation} {uri} failed after {attempts} attempt"
                         f"{'s' if attempts != 1 else ''} and {waited:.2f} s of backoff: "
                         f"{detail}: {error}")
        self.operation, self.uri, self.attempts, self.waited = operation, uri, attempts, waited
        self.code, self.status = code, status


def error_code(error: BaseException) -> tuple[str | None, int | None]:
    """The S3 error code and HTTP status of a botocore ClientError (else None, None)."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None, None
    code = (response.get("Error") or {}).get("Code")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return (str(code) if code is not None else None), status


def is_retryable(error: BaseException) -> bool:
    """Throttling, 5xx and connection-level failures; never 4xx such as NoSuchKey or 403."""
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        HTTPClientError,
        IncompleteReadError,
    )

    if isinstance(error, ClientError):
        code, status = error_code(error)
        return code in RETRYABLE_CODES or status == 429 or (status is not None and status >= 500)
    return isinstance(error, (ConnectionError, HTTPClientError, IncompleteReadError))


def _sleep(seconds: float) -> None:  # a seam for tests
    time.sleep(seconds)


def with_retries(call: Callable[[], T], operation: str, uri: str, policy: RetryPolicy,
                 rng: random.Random | None = None) -> T:
    """`call()`, retried under `policy` while it fails with a retryable error."""
    rng = rng or random.Random()
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except Exception as error:
            if not is_retryable(error):
                raise
            delay = rng.uniform(0.0, policy.ceiling(attempt))
            budget = policy.max_total_delay - waited
            if attempt >= policy.max_attempts or budget <= 0:
                raise S3RetryError(operation, uri, attempt, waited, error) from error
            delay = min(delay, budget)
            code, status = error_code(error)
            log.warning("S3 %s %s: %s (attempt %d of %d), retrying in %.3f s", operation, uri,
                        code or type(error).__name__, attempt, policy.max_attempts, delay)
            _sleep(delay)
            waited += delay


class Store(Protocol):
    """Key-value access to the storage root; keys are '/'-separated relative paths."""

    root: str

    def uri(self, key: str) -> str: ...
    def exists(self, key: str) -> bool: ...
    def read_bytes(self, key: str) -> bytes: ...
    def read_range(self, key: str, start: int, length: int) -> bytes: ...
    def write_bytes(self, key: str, data: bytes) -> None: ...
    def write_file(self, key: str, path: Path) -> None: ...
    def list(self, prefix: str) -> list[str]: ...
    def delete(self, key: str) -> None: ...
    def delete_prefix(self, prefix: str) -> int: ...
    # Atomic primitives for locks. A token names one version of an object: `create_if_absent`
    # and `replace_if_match` return the token of what they wrote, or None when another writer
    # got there first.
    def create_if_absent(self, key: str, data: bytes) -> str | None: ...
    def read_versioned(self, key: str) -> tuple[bytes, str] | None: ...
    def replace_if_match(self, key: str, data: bytes, token: str) -> str | None: ...
    def delete_if_match(self, key: str, token: str) -> bool: ...


@dataclass
class LocalStore:
    root: str

    def __post_init__(self) -> None:
        self.root = str(Path(self.root).resolve())

    def _path(self, key: str) -> Path:
        return Path(self.root) / key

    def uri(self, key: str) -> str:
        return str(self._path(key))

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def read_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def read_range(self, key: str, start: int, length: int) -> bytes:
        with open(self._path(key), "rb") as handle:
            handle.seek(start)
            return handle.read(length)

    @staticmethod
    def _write_temporary(path: Path, data: bytes | Iterable[bytes]) -> Path:
        """`data` (bytes, or chunks of them) durably in a hidden temporary file beside `path`
        (not listed), to publish."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as handle:
            for chunk in [data] if isinstance(data, bytes) else data:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        return temporary

    def write_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        os.replace(self._write_temporary(path, data), path)

    def write_file(self, key: str, path: Path) -> None:
        """The local file at `path` as `key`, copied a chunk at a time."""
        target = self._path(key)
        os.replace(self._write_temporary(target, file_chunks(path)), target)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        root = Path(self.root)
        return sorted(
            str(path.relative_to(root))
            for path in base.rglob("*")
            if path.is_file() and not path.name.startswith(".")
        )

    def delete_prefix(self, prefix: str) -> int:
        base = self._path(prefix)
        if not base.exists():
            return 0
        count = sum(1 for path in base.rglob("*") if path.is_file())
        shutil.rmtree(base)
        return count

    def remove_temporaries(self, prefix: str, name_prefix: str = "",
                           keep: tuple[str, ...] = ()) -> int:
        """Deletes the temporary files a killed writer left under `prefix` for objects whose
        names start with `name_prefix`, except those of objects named in `keep` (only safe
        while no other writer works there: the partition lock's holder calls it, keeping the
        lock's own temporaries, which waiting runs write)."""
        base = self._path(prefix)
        if not base.is_dir():
            return 0
        removed = 0
        for path in base.rglob(f".{name_prefix}*.tmp"):
            if any(path.name.startswith(f".{name}.") for name in keep):
                continue
            path.unlink(missing_ok=True)
            removed += 1
        return removed

    # Locks: `os.link` publishes a whole file only if the name is free (an O_EXCL create that
    # never shows a half-written object); compare-and-swap runs under `flock` on a guard file.

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        path = self._path(key)
        temporary = self._write_temporary(path, data)
        token = hashlib.sha256(data).hexdigest()
        try:
            os.link(temporary, path)
            return token
        except FileExistsError:
            return None
        except OSError as error:  # a file system without hard links: O_EXCL
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            try:
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return None
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            return token
        finally:
            temporary.unlink(missing_ok=True)

    def read_versioned(self, key: str) -> tuple[bytes, str] | None:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        return data, hashlib.sha256(data).hexdigest()

    @contextmanager
    def _guard(self, key: str) -> Iterator[None]:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(f".{path.name}.guard"), "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def replace_if_match(self, key: str, data: bytes, token: str) -> str | None:
        with self._guard(key):
            current = self.read_versioned(key)
            if current is None or current[1] != token:
                return None
            self.write_bytes(key, data)
            return hashlib.sha256(data).hexdigest()

    def delete_if_match(self, key: str, token: str) -> bool:
        with self._guard(key):
            current = self.read_versioned(key)
            if current is None or current[1] != token:
                return False
            self.delete(key)
            return True


@dataclass
class S3Store:
    """Objects under `s3://bucket/prefix`; the client comes from a picklable factory (for example
    dagster-aws's `S3Resource.get_client`) so each worker process makes its own. Every call is
    retried under `retry` (see the module docstring)."""

    root: str
    client_factory: S3ClientFactory
    retry: RetryPolicy = field(default_factory=RetryPolicy.from_env)
    _client: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.bucket, self.prefix = split_s3_uri(self.root.rstrip("/"))

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "client_factory": self.client_factory, "retry": self.retry}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root, self.client_factory, self._client = state["root"], state["client_factory"], None
        self.retry = state.get("retry") or RetryPolicy.from_env()
        self.__post_init__()

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def _call(self, operation: str, key: str, call: Callable[[], T]) -> T:
        return with_retries(call, operation, self.uri(key), self.retry)

    def _head(self, key: str) -> dict[str, Any] | None:
        def head() -> dict[str, Any] | None:
            try:
                return self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except self.client.exceptions.ClientError as error:
                if error_code(error)[0] in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise

        return self._call("HEAD", key, head)

    def exists(self, key: str) -> bool:
        return self._head(key) is not None

    def read_bytes(self, key: str) -> bytes:
        # The body is read inside the retried call: a connection dropped mid-body is retried.
        return self._call("GET", key, lambda: self.client.get_object(
            Bucket=self.bucket, Key=self._key(key))["Body"].read())

    def read_range(self, key: str, start: int, length: int) -> bytes:
        return self._call("GET", key, lambda: self.client.get_object(
            Bucket=self.bucket, Key=self._key(key),
            Range=f"bytes={start}-{start + length - 1}")["Body"].read())

    def write_bytes(self, key: str, data: bytes) -> None:
        self._call("PUT", key, lambda: self.client.put_object(
            Bucket=self.bucket, Key=self._key(key), Body=data))

    def write_file(self, key: str, path: Path) -> None:
        """The local file at `path` as `key`: boto3's managed transfer streams it (a multipart
        upload when large, completed only when whole)."""
        self._call("PUT", key, lambda: self.client.upload_file(
            str(path), self.bucket, self._key(key)))

    def delete(self, key: str) -> None:
        self._call("DELETE", key, lambda: self.client.delete_object(
            Bucket=self.bucket, Key=self._key(key)))

    def list(self, prefix: str) -> list[str]:
        start = len(self.prefix) + 1 if self.prefix else 0
        return sorted(
            entry["key"][start:]
            for entry in list_s3_objects(self.client, self.bucket, self._key(prefix) + "/",
                                         self.retry)
        )

    def delete_prefix(self, prefix: str) -> int:
        keys = [self._key(key) for key in self.list(prefix)]
        for begin in range(0, len(keys), 1000):
            self._delete_keys(keys[begin : begin + 1000])
        return len(keys)

    def _delete_keys(self, keys: list[str]) -> None:
        """A multi-object delete; keys it reports as failed (per-key throttling) are retried
        under the same bound."""
        remaining = keys

        def attempt() -> None:
            nonlocal remaining
            answer = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": key} for key in remaining]})
            failed = answer.get("Errors") or []
            remaining = [error["Key"] for error in failed]
            if failed:
                from botocore.exceptions import ClientError

                first = failed[0]
                raise ClientError({"Error": {"Code": first.get("Code"),
                                             "Message": first.get("Message", "")},
                                   "ResponseMetadata": {}}, "DeleteObjects")

        with_retries(attempt, "DELETE", f"s3://{self.bucket}/{keys[0]}" + (
            f" (and {len(keys) - 1} more keys)" if len(keys) > 1 else ""), self.retry)

    # Locks: conditional writes (S3 `If-None-Match: *` creates only if absent; `If-Match: ETAG`
    # replaces only the version read). A 412 answer means another writer won.

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        def put() -> str | None:
            try:
                answer = self.client.put_object(Bucket=self.bucket, Key=self._key(key),
                                                Body=data, IfNoneMatch="*")
            except self.client.exceptions.ClientError as error:
                if error_code(error)[0] in ("PreconditionFailed", "412",
                                            "ConditionalRequestConflict", "409"):
                    return None
                raise
            return str(answer["ETag"])

        return self._call("PUT (if absent)", key, put)

    def read_versioned(self, key: str) -> tuple[bytes, str] | None:
        def get() -> tuple[bytes, str] | None:
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            except self.client.exceptions.ClientError as error:
                if error_code(error)[0] in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise
            return answer["Body"].read(), answer["ETag"]

        return self._call("GET", key, get)

    def replace_if_match(self, key: str, data: bytes, token: str) -> str | None:
        def put() -> str | None:
            try:
                answer = self.client.put_object(Bucket=self.bucket, Key=self._key(key),
                                                Body=data, IfMatch=token)
            except self.client.exceptions.ClientError as error:
                if error_code(error)[0] in ("PreconditionFailed", "412", "NoSuchKey", "404",
                                            "ConditionalRequestConflict", "409"):
                    return None
                raise
            return str(answer["ETag"])

        return self._call("PUT (if match)", key, put)

    def delete_if_match(self, key: str, token: str) -> bool:
        def delete() -> bool | None:
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self._key(key), IfMatch=token)
            except self.client.exceptions.ClientError as error:
                code = error_code(error)[0]
                if code in ("PreconditionFailed", "412", "NoSuchKey", "404"):
                    return False
                if code in ("NotImplemented", "501"):
                    return None  # a store without conditional deletes
                raise
            return True

        done = self._call("DELETE (if match)", key, delete)
        if done is not None:
            return done
        # Check the ETag, then delete: the holder is the only writer that deletes its own
        # lock, so the short window between the two cannot remove another run's lock unless
        # that run took it over in between (it then sees its lock gone at its next heartbeat).
        current = self.read_versioned(key)
        if current is None or current[1] != token:
            return False
        self.delete(key)
        return True


def split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"{uri!r} is not an s3:// URI")
    bucket, _, prefix = uri[5:].partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket")
    return bucket, prefix.strip("/")


def list_s3_objects(client: Any, bucket: str, prefix: str,
                    retry: RetryPolicy | None = None) -> Iterator[dict[str, Any]]:
    """Every object under a prefix, with key, size and ETag; each page is retried on its own."""
    policy = retry or RetryPolicy.from_env()
    token: str | None = None
    while True:
        arguments = {"Bucket": bucket, "Prefix": prefix}
        if token:
            arguments["ContinuationToken"] = token
        page = with_retries(lambda arguments=arguments: client.list_objects_v2(**arguments),
                            "LIST", f"s3://{bucket}/{prefix}", policy)
        for entry in page.get("Contents", []):
            yield {"key": entry["Key"], "size": entry["Size"], "etag": entry["ETag"].strip('"')}
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return


def open_store(root: str, s3_client_factory: S3ClientFactory | None = None,
               retry: RetryPolicy | None = None) -> Store:
    """A store for a local folder or an `s3://bucket/prefix` root."""
    if root.startswith("s3://"):
        if s3_client_factory is None:
            raise ValueError(f"storage root {root} is on S3 but no S3 client was configured")
        return S3Store(root, s3_client_factory, retry or RetryPolicy.from_env())
    return LocalStore(root)


# --- Parquet ---------------------------------------------------------------------------------


PARQUET_COMPRESSION = "zstd"
ROW_GROUP_ROWS = 16_384
# A row group also ends before its rows pass this many bytes (uncompressed Arrow), so a reader
# that decodes a row group at a time holds at most this much whatever the documents' length:
# 16,384 rows of 5 KB pages are 80 MB; of 1 MB pages, 16 GB.
ROW_GROUP_BYTES = 64 << 20
FILE_CHUNK = 1 << 20


def _row_bytes(table: pa.Table) -> np.ndarray:
    """Each row's uncompressed bytes: strings and binaries by their length, other columns by
    their average width."""
    sizes = np.zeros(table.num_rows, dtype=np.int64)
    for column in table.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) \
                or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            sizes += pc.binary_length(column).fill_null(0).to_numpy().astype(np.int64)
        elif table.num_rows:
            sizes += column.nbytes // table.num_rows
    return sizes


def row_group_length(sizes: np.ndarray) -> int:
    """The rows of the row group that starts at `sizes[0]` (row bytes from there): up to
    `ROW_GROUP_ROWS`, ending before the rows pass `ROW_GROUP_BYTES`, at least one row."""
    window = np.cumsum(sizes[:ROW_GROUP_ROWS])
    return max(1, int(np.searchsorted(window, ROW_GROUP_BYTES, side="right")))


def _write_row_groups(writer: pq.ParquetWriter, table: pa.Table, final: bool) -> pa.Table:
    """Writes the whole row groups at the head of `table` (all of it when `final`); returns the
    rows left for the next call. The cuts depend only on the rows from the file's start, so a
    file written batch by batch gets the row groups of the whole table written at once."""
    sizes = _row_bytes(table)
    start = 0
    while start < table.num_rows:
        length = row_group_length(sizes[start:])
        if start + length == table.num_rows and length < ROW_GROUP_ROWS and not final:
            break  # more rows may still join this group
        writer.write_table(table.slice(start, length), length)
        start += length
    return table.slice(start)


def parquet_bytes(table: pa.Table, compression: str = PARQUET_COMPRESSION) -> bytes:
    """`table` as Parquet: row groups of `ROW_GROUP_ROWS` rows or `ROW_GROUP_BYTES` bytes."""
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, table.schema, compression=compression) as writer:
        if table.num_rows:
            _write_row_groups(writer, table, final=True)
        else:
            writer.write_table(table)
    return sink.getvalue()


def write_parquet_file(path: str | Path, schema: pa.Schema,
                       batches: Iterable[pa.RecordBatch]) -> int:
    """The batches (cast to `schema`) as one Parquet file, the same bytes `parquet_bytes` gives
    for their concatenation: the same writer options, row groups cut at the same rows. Holds one
    row group and one batch at a time. Returns the number of rows."""
    rows = 0
    buffered = schema.empty_table()
    with pq.ParquetWriter(str(path), schema, compression=PARQUET_COMPRESSION) as writer:
        for batch in batches:
            conformed = pa.Table.from_arrays(
                [batch.column(name).cast(field.type) for name, field in zip(
                    schema.names, schema, strict=True)], schema=schema)
            buffered = _write_row_groups(writer, pa.concat_tables([buffered, conformed]),
                                         final=False)
            rows += batch.num_rows
        if rows:
            _write_row_groups(writer, buffered, final=True)
        else:
            writer.write_table(buffered)
    return rows


def file_chunks(path: str | Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while chunk := handle.read(FILE_CHUNK):
            yield chunk


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    for chunk in file_chunks(path):
        digest.update(chunk)
    return digest.hexdigest()


def read_parquet(store: Store, key: str, columns: list[str] | None = None) -> pa.Table:
    """The Parquet object at `key`; with `columns`, only those are decoded, in that order."""
    table = pq.read_table(pa.BufferReader(store.read_bytes(key)), columns=columns)
    return table.select(columns) if columns else table


def iter_parquet(store: Store, key: str, columns: list[str], batch_rows: int = 1024
                 ) -> Iterator[pa.RecordBatch]:
    """The Parquet object at `key` in batches of `batch_rows`, only `columns` decoded: the
    object's compressed bytes and one decoded batch are held, not its decoded columns (a part of
    source files holds hundreds of MB of text)."""
    parquet = pq.ParquetFile(pa.BufferReader(store.read_bytes(key)))
    yield from parquet.iter_batches(batch_size=batch_rows, columns=columns)


# --- reading inputs (WARC files, listings, source files) -------------------------------------


@dataclass(frozen=True)
class InputReader:
    """Reads input files by location: a local path, `s3://` (through the same client factory as
    the store) or `https://`. Picklable, for worker processes."""

    s3_client_factory: S3ClientFactory | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy.from_env)

    def s3_client(self) -> Any:
        if self.s3_client_factory is None:
            raise ValueError("an s3:// input was given but no S3 client is configured")
        return self.s3_client_factory()

    def read_bytes(self, location: str) -> bytes:
        if location.startswith("s3://"):
            bucket, key = split_s3_uri(location)
            client = self.s3_client()
            return with_retries(lambda: client.get_object(Bucket=bucket, Key=key)["Body"].read(),
                                "GET", location, self.retry)
        if location.startswith(("http://", "https://")):
            import urllib.request

            with urllib.request.urlopen(location, timeout=60) as response:  # noqa: S310
                return response.read()
        return Path(location).read_bytes()

    @contextmanager
    def local_copy(self, location: str) -> Iterator[Path]:
        """A local path for the input: itself when local, else a temporary download (a WARC
        reader needs to seek to resynchronise after a corrupt record)."""
        if "://" not in location:
            yield Path(location)
            return
        with tempfile.TemporaryDirectory(prefix="corpus-input-") as folder:
            path = Path(folder) / Path(location).name
            if location.startswith("s3://"):
                bucket, key = split_s3_uri(location)
                client = self.s3_client()
                with_retries(lambda: client.download_file(bucket, key, str(path)), "GET",
                             location, self.retry)
            else:
                path.write_bytes(self.read_bytes(location))
            yield path
