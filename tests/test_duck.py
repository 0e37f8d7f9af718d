"""The memory budget and the DuckDB sessions of the global steps (curation/duck.py): the budget
reaches DuckDB and worker processes, a session spills under a small limit, and partition tables
are queryable from a local folder and from a real S3 API without loading every part."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pyarrow as pa
import pytest
from dagster_aws.s3 import S3Resource

from curation.duck import (
    MEMORY_ENV,
    SPILL_ENV,
    BudgetTooSmallError,
    DuckDBSettings,
    MemoryBudget,
    current_budget,
    duckdb_session,
    register_parts,
    spilled_bytes,
    use_budget,
)
from curation.storage import LocalStore, S3Store, parquet_bytes
from tests.conftest import MOTO_CREDENTIALS


@pytest.fixture()
def budget_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.delenv(SPILL_ENV, raising=False)


def _budget_in_child(queue: multiprocessing.Queue) -> None:
    queue.put(current_budget())


def test_the_budget_comes_from_use_budget_and_reaches_worker_processes(budget_env,
                                                                       tmp_path: Path) -> None:
    assert current_budget() == MemoryBudget()
    use_budget(0.5, str(tmp_path))
    assert current_budget() == MemoryBudget(memory_gb=0.5, spill_directory=str(tmp_path))
    use_budget(None)  # None leaves the budget as it is
    assert current_budget().memory_gb == 0.5
    queue: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()
    child = multiprocessing.get_context("spawn").Process(target=_budget_in_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert queue.get(timeout=5) == current_budget()


def test_a_bad_budget_fails_when_set_not_in_a_worker(budget_env) -> None:
    use_budget(0.5)
    with pytest.raises(ValueError, match="memory_gb must be positive"):
        use_budget(0)
    assert current_budget().memory_gb == 0.5  # the bad value is not left for the next step
    assert MemoryBudget(memory_gb=1).duckdb().memory_limit == "704MB"  # 1 GiB - 320 MiB
    assert MemoryBudget(memory_gb=4).duckdb().memory_limit == "3072MB"  # three quarters
    tiny = MemoryBudget(memory_gb=0.01).duckdb()
    assert (tiny.memory_limit, tiny.threads) == ("64MB", 1)  # the floor, on one thread
    assert MemoryBudget(memory_gb=1).duckdb().threads == 2


def test_a_session_keeps_to_the_budget_and_spills_in_its_folder(budget_env,
                                                                tmp_path: Path) -> None:
    spill = tmp_path / "not" / "yet"  # a Ray node may not have the folder: it is made
    use_budget(0.1, str(spill))
    with duckdb_session() as con:
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        assert limit == "61.0 MiB"  # the 64 MB floor, in DuckDB's units
        con.execute("CREATE TABLE big AS SELECT range AS k, md5(range::VARCHAR) AS v"
                    " FROM range(3000000)")
        ordered = con.execute("SELECT v FROM big ORDER BY v DESC LIMIT 1").fetchall()[0][0]
        spilled = spilled_bytes(spill)
    assert ordered.startswith("fffff")
    assert spilled > 50 << 20  # the sort and the table went to disk, not memory
    assert spilled_bytes(spill) == 0  # the session's folder is gone


def _write_parts(store, count: int) -> list[str]:
    keys = []
    for index in range(count):
        key = f"t/part-{index:05d}.parquet"
        store.write_bytes(key, parquet_bytes(pa.table({"doc_id": [f"d{index}-{i}" for i in
                                                                  range(100)],
                                                       "n": list(range(100))})))
        keys.append(key)
    return keys


def test_parts_are_queryable_from_a_local_folder_and_from_s3(s3_endpoint,
                                                             tmp_path: Path) -> None:
    client = S3Resource(endpoint_url=s3_endpoint, **MOTO_CREDENTIALS)
    client.get_client().create_bucket(Bucket="duck-parts")
    stores = [LocalStore(str(tmp_path / "root")), S3Store("s3://duck-parts/root",
                                                           client.get_client)]
    for store in stores:
        keys = _write_parts(store, 3)
        with duckdb_session() as con:
            assert register_parts(con, "parts", store, keys, ["n"]) == ["n"]
            assert con.execute("SELECT count(*), sum(n) FROM parts").fetchall()[0] == (300, 14850)
            empty = register_parts(con, "none", store, [],
                                   schema=pa.schema([("doc_id", pa.string())]))
            assert empty == ["doc_id"]
            assert con.execute("SELECT count(*) FROM none").fetchall()[0] == (0,)
    with duckdb_session() as con, pytest.raises(ValueError, match="no schema"):
        register_parts(con, "none", stores[0], [])


def test_a_budget_too_small_for_one_operator_says_which_setting_to_raise(budget_env) -> None:
    # one list aggregate of 3M strings cannot spill: it must fit the limit whole
    with pytest.raises(BudgetTooSmallError, match="raise resources.compute.memory_gb"):
        with duckdb_session(DuckDBSettings("16MB", 1)) as con:
            con.execute("SELECT list(md5(range::VARCHAR)) FROM range(3000000)").fetchall()
