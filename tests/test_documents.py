"""The documents stage kernel: contract, determinism, resume after a kill, bad input."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.config import DocumentsSettings, SourceConfig
from curation.partition import PartitionLayout
from curation.schema import DOCUMENT_SCHEMA
from curation.stages.documents import run_documents
from curation.storage import LocalStore
from tests.conftest import REPO

CC_2020 = "warc/cc-main-2020-34_resiliparse_16responses.warc.gz"
DOLMA = "warc/non_cc/dolma_wget-sample-0000_22responses.warc.gz"
IA = "warc/non_cc/ia-heritrix-2008_archive-org-shallow_299responses.warc.gz"


def _inputs(shared: Path) -> list[str]:
    return [str(shared / name) for name in (CC_2020, DOLMA, IA)]


def test_documents_follow_the_contract_and_account_for_every_html_record(shared_data, tmp_path):
    store = LocalStore(str(tmp_path))
    run = run_documents("CC-TEST", _inputs(shared_data), store, DocumentsSettings(), workers=0)
    table = PartitionLayout(store, "documents", "CC-TEST").read_table()
    assert table.schema == DOCUMENT_SCHEMA
    assert table.num_rows == run.stats.docs_out > 100
    assert len(table["doc_id"].unique()) == table.num_rows
    assert set(table["snapshot"].to_pylist()) == {"CC-TEST"}
    row = table.slice(0, 1).to_pylist()[0]
    assert row["url"].startswith("http") and row["domain"] and row["fetched_at"]
    assert row["warc_file"].endswith(".warc.gz") and row["warc_offset"] >= 0
    # 16 + 22 + 140 HTML responses: each is a document or a counted reject, none lost.
    assert run.stats.candidates == 178
    assert run.stats.docs_out + run.stats.rejected == 178
    rejects = pa.concat_tables(
        [pq.read_table(tmp_path / key) for key in store.list("rejects/CC-TEST")]
    )
    assert rejects.num_rows == run.stats.rejected
    assert set(rejects["reason"].to_pylist()) <= set(run.stats.rejects)
    assert (tmp_path / "samples/documents/CC-TEST.jsonl").read_text().count("\n") == 5


def test_output_does_not_depend_on_worker_count(shared_data, tmp_path):
    runs = [run_documents("CC-TEST", _inputs(shared_data), LocalStore(str(tmp_path / str(w))),
                          DocumentsSettings(), workers=w) for w in (0, 2)]
    assert runs[0].manifest.data_version == runs[1].manifest.data_version
    assert runs[0].stats.to_dict() | {"task_seconds": 0} == \
        runs[1].stats.to_dict() | {"task_seconds": 0}


def test_a_second_run_skips_finished_tasks_and_a_new_version_clears(shared_data, tmp_path):
    store = LocalStore(str(tmp_path))
    first = run_documents("CC-TEST", _inputs(shared_data), store, DocumentsSettings(), workers=0)
    again = run_documents("CC-TEST", _inputs(shared_data), store, DocumentsSettings(), workers=0)
    assert again.stats.tasks_skipped == 3 and again.stats.tasks_run == 0
    assert again.manifest.data_version == first.manifest.data_version
    changed = run_documents("CC-TEST", _inputs(shared_data), store,
                            DocumentsSettings(extractor="resiliparse"), workers=0)
    assert changed.stats.tasks_run == 3
    assert changed.manifest.version != first.manifest.version


# A generous extraction timeout: with the default, a loaded machine could time a page out in
# one run and not in the other, and the comparison is about resuming, not about timeouts.
RUNNER = """
import sys
from curation.config import DocumentsSettings
from curation.stages.documents import run_documents
from curation.storage import LocalStore
if __name__ == "__main__":
    run_documents("KILL", sys.argv[2:], LocalStore(sys.argv[1]),
                  DocumentsSettings(timeout_seconds=120), workers=1)
"""
PATIENT = DocumentsSettings(timeout_seconds=120)


@pytest.mark.slow
def test_resume_after_sigkill_redoes_only_unfinished_tasks(shared_data, tmp_path):
    # Three slow tasks (copies of the 2.5 MB Internet Archive file under distinct names).
    inputs = []
    for index in range(3):
        copy = tmp_path / "in" / f"part-{index}.warc.gz"
        copy.parent.mkdir(exist_ok=True)
        copy.symlink_to(shared_data / IA)
        inputs.append(str(copy))
    killed = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-c", RUNNER, str(killed), *inputs], cwd=REPO,
                               start_new_session=True)
    markers = killed / "documents/KILL/_tasks"
    deadline = time.monotonic() + 120
    while not (markers.is_dir() and len(list(markers.glob("*.json"))) >= 1):
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    done_before = len(list(markers.glob("*.json")))
    assert not (killed / "documents/KILL/_manifest.json").exists()
    # No partial part is visible under a final name: every part-*.parquet is whole.
    for part in (killed / "documents/KILL").glob("part-*.parquet"):
        pq.read_metadata(part)
    resumed = run_documents("KILL", inputs, LocalStore(str(killed)), PATIENT, workers=2)
    assert resumed.stats.tasks_skipped == done_before
    assert resumed.stats.tasks_run == 3 - done_before
    clean = run_documents("KILL", inputs, LocalStore(str(tmp_path / "clean")), PATIENT,
                          workers=2)
    assert resumed.manifest.data_version == clean.manifest.data_version


def test_bad_input_files_are_counted_and_the_rest_processed(shared_data, tmp_path):
    good = (shared_data / CC_2020).read_bytes()
    corrupt = bytearray(good)
    corrupt[40_000:40_100] = b"\0" * 100
    files = {
        "a-truncated.warc.gz": good[: len(good) // 2],
        "b-corrupt.warc.gz": bytes(corrupt),
        "c-empty.warc.gz": b"",
        "d-garbage.warc.gz": os.urandom(2048),
        "e-not-warc.warc": b"<html><body>just a page</body></html>\n",
        "f-good.warc.gz": good,
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    store = LocalStore(str(tmp_path / "out"))
    run = run_documents("BAD", [str(tmp_path / n) for n in sorted(files)], store,
                        DocumentsSettings(), workers=0)
    reasons = run.stats.rejects
    assert reasons["truncated_record"] == 1
    assert reasons["corrupt_gzip"] == 1
    assert reasons["empty_file"] == 1
    assert reasons["not_warc"] == 2
    # 6 + 15 + 16 HTML responses reached the extractor: none of the readable ones was lost.
    assert run.stats.candidates == 6 + 15 + 16
    per_file = [part.rows for part in run.manifest.parts]
    assert per_file[2:5] == [0, 0, 0] and per_file[5] > 0
    rejects = pq.read_table(tmp_path / "out/rejects/BAD/documents-00002.parquet").to_pylist()
    assert rejects[0]["reason"] == "empty_file" and rejects[0]["message"]


def test_curated_source_rows_carry_licence_and_stable_ids(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    lines = [json.dumps({"text": f"Reference article number {i}."}) for i in range(4)]
    (folder / "a.jsonl").write_text("\n".join(lines + ['{"text": ""}']) + "\n")
    config = SourceConfig(path=str(folder), licence="CC-BY-4.0")
    store = LocalStore(str(tmp_path / "out"))
    run = run_documents("source:ref", [str(folder / "a.jsonl")], store, DocumentsSettings(),
                        workers=0, source="ref", source_config=config)
    table = PartitionLayout(store, "documents", "source:ref").read_table().to_pylist()
    assert [row["licence"] for row in table] == ["CC-BY-4.0"] * 4
    assert {row["source"] for row in table} == {"ref"}
    assert run.stats.rejects == {"empty_text": 1}
    again = run_documents("source:ref", [str(folder / "a.jsonl")],
                          LocalStore(str(tmp_path / "again")), DocumentsSettings(), workers=0,
                          source="ref", source_config=config)
    assert again.manifest.data_version == run.manifest.data_version


def test_language_precheck_and_blocklist_reject_before_extraction(shared_data, tmp_path):
    blocklist = tmp_path / "blocked.txt"
    blocklist.write_text("# test list\nsemanticscholar.org\n")
    settings = DocumentsSettings(languages=["en"],
                                 url_filter={"domain_blocklist": str(blocklist)})
    store = LocalStore(str(tmp_path / "out"))
    ja = str(shared_data / "warc/non_cc/clueweb09-ja_resiliparse-quirk_29responses.warc.gz")
    run = run_documents("PRE", [ja, str(shared_data / DOLMA)], store, settings, workers=0)
    assert run.stats.rejects["language_precheck"] >= 25
    assert run.stats.rejects["url_blocklist"] >= 1
    urls = PartitionLayout(store, "documents", "PRE").read_table(["url"])["url"].to_pylist()
    assert not any("semanticscholar.org" in url for url in urls)


def test_gzip_wrapped_listing_inputs_are_not_mistaken_for_warc(tmp_path):
    # A gzip file that is not a WARC (for example a warc.paths.gz listing) is one clear reject.
    path = tmp_path / "warc.paths.gz"
    path.write_bytes(gzip.compress(b"crawl-data/x.warc.gz\n"))
    run = run_documents("L", [str(path)], LocalStore(str(tmp_path / "o")), DocumentsSettings(),
                        workers=0)
    assert run.stats.rejects == {"not_warc": 1}


def test_extractor_timeout_is_a_counted_reject(shared_data, tmp_path):
    warc = [str(shared_data / CC_2020)]
    tiny = run_documents("SLOW", warc, LocalStore(str(tmp_path / "tiny")),
                         DocumentsSettings(timeout_seconds=0.0005), workers=0)
    # The CPU timer fires at the kernel tick's granularity (4 ms here), so a page extracted
    # within its first tick may be kept: on a quiet machine 9 of these 16 time out, on a
    # loaded one (CI) all 16 did. Either way each is counted and none is lost.
    assert tiny.stats.rejects["extract_timeout"] >= 5
    assert tiny.stats.docs_out + tiny.stats.rejected == tiny.stats.candidates == 16
    # The timer is disarmed and its handler restored after every page: the same process then
    # extracts the pages under an ample limit with no timeout.
    ample = run_documents("SLOW", warc, LocalStore(str(tmp_path / "ample")),
                          DocumentsSettings(timeout_seconds=30), workers=0)
    assert "extract_timeout" not in ample.stats.rejects
    assert ample.stats.docs_out > tiny.stats.docs_out
    assert ample.stats.docs_out + ample.stats.rejected == 16


def test_a_timer_firing_as_extraction_ends_is_a_timeout_reject(monkeypatch) -> None:
    """SIGPROF can arrive after the body returned and before `time_limit` disarms the timer,
    outside its `try`: the page is a counted timeout, not an exception that ends the run."""
    from contextlib import contextmanager

    from curation import extract

    @contextmanager
    def fires_on_exit(seconds: float):
        yield
        raise extract._Expired

    monkeypatch.setattr(extract, "time_limit", fires_on_exit)
    with pytest.raises(extract.Rejected) as rejected:
        extract.Extractor(DocumentsSettings()).extract(
            "<html><body><p>" + "words " * 100 + "</p></body></html>", None)
    assert rejected.value.reason == "extract_timeout"
