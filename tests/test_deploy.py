"""The production deployment (docs/deploy.md, deploy/): the example instance, run config and
workspace validate against Dagster's own schemas, and the instance runs for real on Postgres:
a private cluster, an in-process run, then queued runs that the daemon launches, at most one per
partition at a time."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterInvalidConfigError,
    DagsterRunStatus,
    validate_run_config,
)
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.storage.config import pg_config
from dagster._core.workspace.config_schema import process_workspace_config
from dagster._core.workspace.load import location_origins_from_yaml_paths
from dagster._serdes import class_from_code_pointer

from tests.conftest import REPO, free_port

DEPLOY = REPO / "deploy"
DOCS = REPO / "docs" / "deploy.md"
BIN = Path(sys.executable).parent

# deploy/dagster.yaml reads these; the static tests set dummy values.
INSTANCE_ENV = {
    "DAGSTER_PG_HOST": "db.example.internal",
    "DAGSTER_PG_PORT": "5432",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "not-a-secret",
    "DAGSTER_PG_DB": "dagster",
    "DAGSTER_K8S_NAMESPACE": "corpus",
    "DAGSTER_LOG_BUCKET": "corpus-logs",
}
WORKSPACE_ENV = {"CORPUS_CODE_SERVER_HOST": "corpus-user-code", "CORPUS_CODE_SERVER_PORT": "3030"}


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _set_env(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def _process_class_config(section: dict) -> dict:
    """A `module`/`class`/`config` section of dagster.yaml, checked against the class's own
    config schema with environment variables resolved (what Dagster does when it loads it)."""
    klass = class_from_code_pointer(section["module"], section["class"])
    result = process_config(klass.config_type(), section.get("config") or {})
    assert result.success, [error.message for error in result.errors]
    return result.value


# ---------------------------------------------------------------------------------------------
# 1. The examples validate against Dagster's schemas.


def test_instance_example_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_env(monkeypatch, INSTANCE_ENV)
    # Dagster's own loader: the whole file against the instance schema (every section's
    # shape, the storage selector, the configurable-class sections).
    config, custom_class = dagster_instance_config(str(DEPLOY))
    assert custom_class is None

    # Postgres storage, with its credentials resolved from the environment.
    postgres = process_config(pg_config(), config["storage"]["postgres"])
    assert postgres.success, [error.message for error in postgres.errors]
    database = postgres.value["postgres_db"]
    assert database["hostname"] == "db.example.internal"
    assert database["password"] == "not-a-secret"
    assert database["port"] == 5432
    assert database["scheme"] == "postgresql+psycopg2"   # the driver dagster-postgres ships

    # The queue: a global cap and one run per unique partition.
    coordinator = config["run_coordinator"]
    assert (coordinator["module"], coordinator["class"]) == (
        "dagster._core.run_coordinator", "QueuedRunCoordinator")
    queue = _process_class_config(coordinator)
    assert queue["max_concurrent_runs"] > 1
    assert {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True},
            "limit": 1} in queue["tag_concurrency_limits"]

    # Step logs on S3, through dagster-aws (installed).
    logs = _process_class_config(config["compute_logs"])
    assert logs["bucket"] == "corpus-logs"

    # The Kubernetes run launcher needs dagster-k8s, which the lock file leaves out: its
    # config is checked by test_k8s_launcher_config_validates when it is installed; here, the
    # names the docs give and the fields that have to be there.
    launcher = config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    assert {"instance_config_map", "job_namespace"} <= set(launcher["config"])
    docs = DOCS.read_text()
    assert "dagster-k8s" in docs and "K8sRunLauncher" in docs and "dagster_k8s" in docs


def test_instance_example_needs_its_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_env(monkeypatch, INSTANCE_ENV)
    monkeypatch.delenv("DAGSTER_PG_PASSWORD")
    config, _ = dagster_instance_config(str(DEPLOY))
    result = process_config(pg_config(), config["storage"]["postgres"])
    assert not result.success
    assert any("DAGSTER_PG_PASSWORD" in error.message for error in result.errors)


def test_k8s_launcher_config_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_env(monkeypatch, INSTANCE_ENV)
    config, _ = dagster_instance_config(str(DEPLOY))
    launcher = _process_class_config(config["run_launcher"])
    assert launcher["job_namespace"] == "corpus"
    assert launcher["instance_config_map"] == "dagster-instance"


RUN_CONFIG = DEPLOY / "run_config.s3_ray.yaml"


def _job_names() -> list[str]:
    from corpus_assets.definitions import defs

    return sorted(job.name for job in defs.resolve_all_job_defs()
                  if not job.name.startswith("__"))


@pytest.mark.parametrize("job_name", _job_names())
def test_run_config_example_validates_for_every_job(job_name: str) -> None:
    """The whole file, as `dagster job launch -c` and the launchpad take it: Dagster's own
    validation rejects any entry the job's schema does not have (`unexpected config entry`)."""
    from corpus_assets.definitions import defs

    example = _load(RUN_CONFIG)
    resolved = validate_run_config(defs.resolve_job_def(job_name), example)
    # Dagster keeps the resources the job uses, each with the file's values.
    assert "storage" in resolved["resources"]
    for name, resource in resolved["resources"].items():
        assert example["resources"].get(name, {}).get("config", {}).items() <= \
            resource["config"].items(), name
    executor = resolved["execution"]["multi_or_in_process_executor"]
    assert executor["multiprocess"]["max_concurrent"] == 2


def test_run_config_with_an_unknown_entry_is_rejected() -> None:
    """What a user saw with the old example: S3 settings under the storage resource."""
    from corpus_assets.definitions import defs

    config = _load(RUN_CONFIG)
    config["resources"]["storage"]["config"]["s3"] = {"region_name": "us-east-1"}
    with pytest.raises(DagsterInvalidConfigError, match='unexpected config entry "s3"'):
        validate_run_config(defs.resolve_job_def("per_snapshot"), config)


DEPLOY_WARC = "warc/non_cc/dolma_wget-sample-0000_22responses.warc.gz"


def _deploy_pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text("""
version: 1
snapshots:
  DEPLOY-01: {warc: {s3_prefix: s3://corpus-deploy/crawl/}}
documents: {extractor: resiliparse}   # the fastest to import in each Ray worker
""")
    return path


@pytest.mark.slow
def test_run_config_example_runs_on_s3_and_ray(shared_data: Path, s3_endpoint: str,
                                               tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`per_snapshot` with the example, changed only where a test must: the pipeline file, a
    bucket on moto's S3 server and `ray_address: local` (a Ray started in the run's process)."""
    import boto3
    import ray
    from dagster import instance_for_test

    from corpus_assets.definitions import defs
    from curation.partition import PartitionLayout
    from curation.storage import S3Store
    from partitions import SNAPSHOT_PARTITIONS_NAME

    # S3 through the standard AWS environment, as in a run pod (the file holds no S3 settings).
    _set_env(monkeypatch, {"AWS_ENDPOINT_URL_S3": s3_endpoint, "AWS_REGION": "us-east-1",
                           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
    client = boto3.client("s3")
    client.create_bucket(Bucket="corpus-deploy")
    client.put_object(Bucket="corpus-deploy", Key="crawl/00000.warc.gz",
                      Body=(shared_data / DEPLOY_WARC).read_bytes())

    config = _load(RUN_CONFIG)
    resources = config["resources"]
    resources["pipeline"]["config"]["path"] = str(_deploy_pipeline(tmp_path))
    resources["storage"]["config"]["root"] = "s3://corpus-deploy/prod"
    resources["compute"]["config"].update(workers=1, ray_address="local")
    # execute_in_process runs the steps in this process (the file's multiprocess executor is
    # validated above): one local Ray for the whole run instead of one per step process.
    del config["execution"]
    assert not ray.is_initialized()
    (tmp_path / "home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["DEPLOY-01"])
        try:
            result = defs.resolve_job_def("per_snapshot").execute_in_process(
                run_config=config, partition_key="DEPLOY-01", instance=instance,
                raise_on_error=False)
            ray_cpus = ray.cluster_resources().get("CPU") if ray.is_initialized() else None
        finally:
            ray.shutdown()
    failures = [event.message for event in result.all_events if event.is_failure]
    assert result.success, failures
    assert all(check.passed for check in result.get_asset_check_evaluations())
    assert ray_cpus == 1   # the partition's tasks went to the Ray the run started

    store = S3Store("s3://corpus-deploy/prod", lambda: boto3.client("s3"))
    materialized = {event.asset_key.path[-1] for event in result.get_asset_materialization_events()}
    assert {"warc_files", "documents", "language", "heuristics", "scrubbed"} <= materialized
    for asset in materialized:
        assert PartitionLayout(store, asset, "DEPLOY-01").is_complete(), asset
    assert PartitionLayout(store, "documents", "DEPLOY-01").read_manifest().rows > 10


def test_workspace_example_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_env(monkeypatch, WORKSPACE_ENV)
    path = DEPLOY / "workspace.yaml"
    config = process_workspace_config(_load(path))
    assert config.success, [error.message for error in config.errors]
    [location] = config.value["load_from"]
    assert location["grpc_server"] == {"host": "corpus-user-code", "port": 3030,
                                       "location_name": "corpus"}
    # Dagster's own loader (what `dagster-webserver -w` and `dagster-daemon run -w` call).
    [origin] = location_origins_from_yaml_paths([str(path)])
    assert type(origin).__name__ == "GrpcServerCodeLocationOrigin"
    assert (origin.location_name, origin.host, origin.port) == ("corpus", "corpus-user-code",
                                                                3030)


# ---------------------------------------------------------------------------------------------
# 2. The instance for real: Postgres, the queue and the daemon.


@dataclass
class Postgres:
    host: str
    port: int
    user: str
    password: str
    database: str
    bin: Path

    def env(self) -> dict[str, str]:
        return {"DAGSTER_PG_HOST": self.host, "DAGSTER_PG_PORT": str(self.port),
                "DAGSTER_PG_USER": self.user, "DAGSTER_PG_PASSWORD": self.password,
                "DAGSTER_PG_DB": self.database}



def _postgres_bin() -> Path:
    """PostgreSQL's server programs: skip without them, unless CI is set, where
    scripts/postgres.sh installs them and their absence is a failure."""
    script = REPO / "scripts" / "postgres.sh"
    args = ["bash", str(script)] + ([] if os.environ.get("CI") else ["--check"])
    found = subprocess.run(args, capture_output=True, text=True)
    if found.returncode == 0:
        return Path(found.stdout.strip())
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required in CI and scripts/postgres.sh failed: "
                    f"{found.stderr.strip()}")
    pytest.skip("PostgreSQL server programs (initdb, pg_ctl) are not installed; "
                "`sudo bash scripts/postgres.sh` installs them")


def _as_server_user(command: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root: run them as the `postgres` user then (the
    # Debian package creates it).
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _check_server_user() -> None:
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        reason = "running as root needs a `postgres` user to run initdb and postgres as"
    else:
        if shutil.which("runuser"):
            return
        reason = "running as root needs `runuser` to run initdb and postgres as `postgres`"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """A private PostgreSQL cluster on 127.0.0.1 at a free port, in a temporary folder."""
    bin_dir = _postgres_bin()
    _check_server_user()
    # Not under pytest's tmp_path: its parent is private to root, and the server runs as
    # `postgres`.
    folder = Path(tempfile.mkdtemp(prefix="corpus-pg-"))
    data = folder / "data"
    password = secrets.token_hex(12)
    (folder / "password").write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        shutil.chown(folder / "password", "postgres", "postgres")
    port = free_port()
    started = False
    try:
        subprocess.run(_as_server_user([
            str(bin_dir / "initdb"), "-D", str(data), "-U", "dagster", "-E", "UTF8",
            "--no-locale", f"--pwfile={folder / 'password'}", "--auth-local=peer",
            "--auth-host=scram-sha-256"]), check=True, capture_output=True)
        options = (f"-c listen_addresses=127.0.0.1 -c port={port} "
                   f"-c unix_socket_directories={folder} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        subprocess.run(_as_server_user([
            str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"),
            "-o", options, "-w", "-t", "60", "start"]), check=True, capture_output=True)
        started = True
        subprocess.run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port),
                        "-U", "dagster", "corpus"], check=True, capture_output=True,
                       env={**os.environ, "PGPASSWORD": password})
        yield Postgres("127.0.0.1", port, "dagster", password, "corpus", bin_dir)
    except subprocess.CalledProcessError as error:
        log = folder / "server.log"
        pytest.fail(f"PostgreSQL did not start: {error.cmd[-1]}: {error.stderr!r} "
                    f"{log.read_text()[-2000:] if log.exists() else ''}")
    finally:
        if started:
            subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data),
                                            "-m", "fast", "-w", "-t", "30", "stop"]),
                           capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def processes(request: pytest.FixtureRequest) -> Callable[..., subprocess.Popen]:
    """Starts a long-running process in a session of its own; stops it (and what it
    started: run workers, code servers) at teardown."""

    def start(command: list[str], log: Path, **kwargs) -> subprocess.Popen:
        handle = log.open("w")
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True, **kwargs)

        def stop() -> None:
            for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            handle.close()

        request.addfinalizer(stop)
        return process

    return start


def _test_instance_yaml() -> dict:
    """deploy/dagster.yaml as the test runs it: the production file, with the Kubernetes
    launcher and the S3 step logs left out (Dagster's defaults: runs are subprocesses of the
    code server, logs on local disk), no run retries (a retried run would be a new run to
    wait for), three runs at most (so the per-partition limit, not the global one, is what
    holds a second run of a partition) and a one-second dequeue tick."""
    config = _load(DEPLOY / "dagster.yaml")
    del config["run_launcher"]
    del config["compute_logs"]
    config["run_retries"] = {"enabled": False}
    config["run_coordinator"]["config"].update(max_concurrent_runs=3,
                                               dequeue_interval_seconds=1)
    return config


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert process.poll() is None, f"the code server exited:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the code server did not listen in {seconds} s"
        time.sleep(0.5)


def _run_windows(instance: DagsterInstance, run_ids: list[str]) -> dict[str, dict[str, float]]:
    """Per run: when it was queued, launched by the daemon (its slot taken: RUN_STARTING) and
    when it ended."""
    wanted = {DagsterEventType.RUN_ENQUEUED: "queued", DagsterEventType.RUN_STARTING: "launched",
              DagsterEventType.RUN_SUCCESS: "ended", DagsterEventType.RUN_FAILURE: "ended"}
    windows: dict[str, dict[str, float]] = {}
    for run_id in run_ids:
        times: dict[str, float] = {}
        for record in instance.get_records_for_run(run_id, of_type=set(wanted)).records:
            event = record.event_log_entry
            times.setdefault(wanted[event.dagster_event_type], event.timestamp)
        windows[run_id] = times
    return windows


@pytest.mark.slow
def test_queued_runs_on_postgres_one_per_partition(
    postgres: Postgres, processes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg2
    from dagster import AssetKey

    from corpus_assets.definitions import defs
    from corpus_assets.main_job import main_run_config
    from curation.config import load_pipeline
    from curation.sample.generate import generate_sample
    from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME

    # The deployment's working folder: what the code server sees as its current directory,
    # so the project's default resources (pipeline.yaml here, storage root `data`) apply.
    work = tmp_path / "work"
    work.mkdir()
    shutil.copyfile(REPO / "pipeline.yaml", work / "pipeline.yaml")
    shutil.copytree(REPO / "recipes", work / "recipes")
    generate_sample(work / "data" / "sample")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(_test_instance_yaml()))
    code_port = free_port()
    env = {**os.environ, **postgres.env(), "DAGSTER_HOME": str(home),
           "CORPUS_CODE_SERVER_HOST": "127.0.0.1", "CORPUS_CODE_SERVER_PORT": str(code_port)}
    _set_env(monkeypatch, {k: env[k] for k in (*postgres.env(), "DAGSTER_HOME")})

    with DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        pipeline = load_pipeline(work / "pipeline.yaml")
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, pipeline.partition_keys())
        instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, ["sample"])

        # In process, on the Postgres instance: one partition of the per-snapshot job.
        # (workers=0: the partition's tasks in the run's process; on two shared cores a
        # process pool per stage costs more than the sample's work.)
        in_process = defs.resolve_job_def("per_snapshot").execute_in_process(
            partition_key="SAMPLE-01", instance=instance, raise_on_error=False,
            run_config=main_run_config(str(work / "pipeline.yaml"), str(work / "data"),
                                       workers=0, log_level="WARNING"))
        assert in_process.success

        # The production workspace (deploy/workspace.yaml) against a real code server.
        code_log = tmp_path / "code_server.log"
        code_server = processes(
            [str(BIN / "dagster"), "api", "grpc", "-m", "corpus_assets.definitions",
             "-h", "127.0.0.1", "-p", str(code_port)], code_log, cwd=work, env=env)
        _wait_for_port(code_port, code_server, code_log, 90)

        # Queue three runs before the daemon starts: SAMPLE-01, SAMPLE-02, SAMPLE-01 again.
        # `dagster job launch` submits through the instance's QueuedRunCoordinator with the
        # partition tag, as a backfill does; it also takes run config, which `dagster job
        # backfill` cannot: one process per run and per stage (the default) is too slow on
        # two shared cores.
        light = {"resources": {"compute": {"config": {"workers": 0}}},
                 "execution": {"config": {"in_process": {}}},
                 "loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        for partition in ("SAMPLE-01", "SAMPLE-02", "SAMPLE-01"):
            subprocess.run(
                [str(BIN / "dagster"), "job", "launch", "-w", str(DEPLOY / "workspace.yaml"),
                 "-j", "per_snapshot", "--config-json", json.dumps(light),
                 "--tags", json.dumps({"dagster/partition": partition})],
                cwd=work, env=env, check=True, capture_output=True, timeout=120)
        queued = instance.get_run_records()
        queued_ids = [r.dagster_run.run_id for r in queued
                      if r.dagster_run.run_id != in_process.run_id]
        assert len(queued_ids) == 3
        assert all(instance.get_run_by_id(run_id).status == DagsterRunStatus.QUEUED
                   for run_id in queued_ids)

        daemon_log = tmp_path / "daemon.log"
        daemon = processes([str(BIN / "dagster-daemon"), "run", "-w",
                            str(DEPLOY / "workspace.yaml")], daemon_log, cwd=work, env=env)
        deadline = time.monotonic() + 200
        while True:
            runs = [instance.get_run_by_id(run_id) for run_id in queued_ids]
            if all(run.is_finished for run in runs):
                break
            assert daemon.poll() is None, f"the daemon exited:\n{daemon_log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"runs not finished in 200 s: {[(r.run_id[:8], r.status) for r in runs]}")
            time.sleep(1)

        assert [run.status for run in runs] == [DagsterRunStatus.SUCCESS] * 3, (
            [(run.run_id, run.status) for run in runs],
            daemon_log.read_text()[-3000:], code_log.read_text()[-3000:])
        partitions = {run.run_id: run.tags["dagster/partition"] for run in runs}
        windows = _run_windows(instance, queued_ids)
        assert all(set(w) == {"queued", "launched", "ended"} for w in windows.values()), windows

        # No two runs of a partition held a slot at the same time; the later run of
        # SAMPLE-01 was queued while the earlier one ran (it would have overlapped) and was
        # held by the partition limit alone: with three runs and a cap of three, the global
        # cap never held anything.
        first, second = sorted((w for run_id, w in windows.items()
                                if partitions[run_id] == "SAMPLE-01"),
                               key=lambda w: w["launched"])
        assert second["launched"] >= first["ended"]
        assert second["queued"] < first["ended"]
        other = next(w for run_id, w in windows.items() if partitions[run_id] == "SAMPLE-02")
        assert other["launched"] < first["ended"]   # the other partition ran alongside
        for run_id, window in windows.items():
            for other_id, other_window in windows.items():
                if run_id < other_id and partitions[run_id] == partitions[other_id]:
                    assert (window["ended"] <= other_window["launched"]
                            or other_window["ended"] <= window["launched"])
        # The global cap: never more runs in flight than max_concurrent_runs.
        for moment in (w["launched"] for w in windows.values()):
            in_flight = sum(w["launched"] <= moment < w["ended"] for w in windows.values())
            assert in_flight <= 3

        # Outputs landed in the working folder's default root, and their materializations
        # (two partitions) in Postgres.
        for partition in ("SAMPLE-01", "SAMPLE-02"):
            assert (work / "data" / "documents" / partition / "_manifest.json").exists()
        assert instance.get_materialized_partitions(AssetKey("scrubbed")) >= {
            "SAMPLE-01", "SAMPLE-02"}

    with psycopg2.connect(host=postgres.host, port=postgres.port, user=postgres.user,
                          password=postgres.password, dbname=postgres.database) as connection:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM runs")
            assert cursor.fetchone()[0] == 4
            cursor.execute("SELECT count(*) FROM event_logs WHERE dagster_event_type = "
                           "'ASSET_MATERIALIZATION'")
            assert cursor.fetchone()[0] > 0
    connection.close()
