"""`corpus lineage token` and `corpus shards inspect --sequence` (issue 18, item 9): a one-line
answer first, every detail only with `--json`, a clear error naming the valid range, and the
documents of a sequence with their text. On the hand-built store of `test_catalog.py` and on
the built-in sample."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from test_catalog import A1, build_store
from typer.testing import CliRunner

from corpus_cli.main import app
from curation.catalog import refresh_catalog
from curation.partition import PartitionLayout
from curation.storage import LocalStore

runner = CliRunner()


@pytest.fixture
def catalog_args(tmp_path: Path) -> list[str]:
    store = build_store(tmp_path / "data")
    refresh_catalog(store, tmp_path / "catalog.duckdb")
    return ["--root", str(tmp_path / "data"), "--catalog", str(tmp_path / "catalog.duckdb")]


@pytest.mark.parametrize("version", ["v1", "r1"])  # a version, or a recipe's current one
def test_token_answers_in_one_line(catalog_args, version) -> None:
    result = runner.invoke(app, ["lineage", "token", version, "0", "9", *catalog_args])
    assert result.exit_code == 0, result.output
    [line] = result.output.splitlines()
    # sequence 1, position 1: A1's 10th token; A1's second piece is shard tokens [8, 10).
    assert line.startswith("token 9 of shard 0 in v1 (sequence 1, position 1): ")
    for part in (A1, "https://www.example.com/a", "source web", "snapshot CC-A",
                 f"WARC /warcs/CC-A-0.warc.gz offset {1000 + int(A1[-2:], 16)}",
                 "phase main", "occurrence 0",
                 "the document's token 9", "shard tokens [8, 10)"):
        assert part in line


def test_token_json_only_when_asked(catalog_args) -> None:
    result = runner.invoke(app, ["lineage", "token", "v1", "0", "9", "--json", *catalog_args])
    assert result.exit_code == 0, result.output
    where = json.loads(result.output)
    assert where["document"]["doc_id"] == A1 and where["token_in_occurrence"] == 9


@pytest.mark.parametrize(("args", "message"), [
    (["v1", "1", "16"], "token offset 16 is outside shard 1 of v1: valid offsets are 0 to 15"),
    (["v1", "0", "-1"], "valid offsets are 0 to 23"),
    (["v1", "7", "0"], "v1 has no shard 7: its shards are 0 to 1"),
    (["v9", "0", "0"], "no dataset version 'v9' in the catalog; versions: v0, v1"),
])
def test_a_token_out_of_range_is_a_clear_error(catalog_args, args, message) -> None:
    result = runner.invoke(app, ["lineage", "token", *catalog_args, "--", *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_shards_inspect_prints_the_documents_of_a_sequence(sample_run) -> None:
    store = LocalStore(str(sample_run.root))
    version = PartitionLayout(store, "shards", "sample").complete_manifest().version
    folder = sample_run.root / "shards" / version
    manifest = json.loads((folder / "manifest.json").read_text())
    spans = pq.read_table(folder / "spans.parquet")
    pieces = spans.filter(pc.and_(pc.equal(spans["shard"], 0),
                                  pc.equal(spans["sequence"], 3))).sort_by("start").to_pylist()
    result = runner.invoke(app, ["shards", "inspect", version, "--sequence", "3", "--root",
                                 str(sample_run.root)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert f"sequence 3 (shard 0, its sequence 3): {len(pieces)} document pieces" in text
    documents = {}
    for partition in ("SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"):
        table = PartitionLayout(store, "documents", partition).read_table(["doc_id", "url"])
        documents.update(zip(table["doc_id"].to_pylist(), table["url"].to_pylist(),
                             strict=True))
    scrubbed = {}
    for partition in ("SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"):
        table = PartitionLayout(store, "scrubbed", partition).read_table(["doc_id", "text"])
        scrubbed.update(zip(table["doc_id"].to_pylist(), table["text"].to_pylist(),
                            strict=True))
    lines = text.splitlines()
    for piece in pieces:
        head = f"  tokens [{piece['start']}, {piece['end']}) {piece['doc_id']} " \
               f"{documents[piece['doc_id']]} phase {piece['phase']}"
        row = next(i for i, line in enumerate(lines) if line.startswith(head))
        excerpt = lines[row + 1].strip().rstrip("…")
        # The decoded tokens are a piece of the document's final text.
        assert len(excerpt) > 10 and excerpt[:10] in " ".join(scrubbed[piece["doc_id"]].split())
    if pieces[-1]["end"] < manifest["seq_len"]:
        assert f"tokens [{pieces[-1]['end']}, {manifest['seq_len']}) padding" in text
