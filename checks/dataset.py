"""Quality gates for the dataset assets: the mixture the shards deliver on target, no residual
contamination or PII in the final selected, edited text (matchers independent of the annotating
stages), and shard integrity."""

import json
import tempfile
from collections.abc import Iterator

import pyarrow as pa
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import (
    Expectation,
    TableSuite,
    between,
    contract_check,
    describe,
    expectations_result,
    not_null,
    of_type,
    validate_stored,
)
from checks.policy import gate_severity
from checks.rescan import chosen_texts, residual_pii_result, sample_ids
from checks.streams import iter_parts, parquet_batches, register_stored
from curation.decontamination import ResidualMatcher
from curation.duck import duckdb_session, literal
from curation.evals import load_benchmarks
from curation.graph import MIX, SCRUBBED, SHARDS
from curation.mix import delivered_tokens, ran_out_notes, share_failures
from curation.partition import PartitionLayout
from curation.shard_integrity import verify_shards
from curation.stages.dataset import local_shards, shards_prefix
from curation.storage import Store
from curation.takedowns import load_tombstones
from partitions import recipe_partitions
from resources import ComputeResource, PipelineResource, StorageResource

MIX_SUITES = (
    TableSuite("part", (*not_null("doc_id", "partition", "source", "phase", "occurrence",
                                  "est_tokens"),
                        Expectation("ExpectCompoundColumnsToBeUnique",
                                    {"column_list": ["doc_id", "phase", "occurrence"]}),
                        between("occurrence", 0), between("est_tokens", 0))),
    TableSuite("decisions", (*not_null("doc_id", "partition", "kept", "rule"),
                             Expectation("ExpectCompoundColumnsToBeUnique",
                                         {"column_list": ["doc_id", "partition"]}),
                             of_type("kept", "bool"), between("tokens", 0))),
    TableSuite("shares", (*not_null("phase", "source", "target_share", "achieved_tokens"),
                          between("target_share", 0.0, 1.0), between("achieved_share", 0.0, 1.0),
                          between("achieved_tokens", 0), between("epochs", 0.0))),
)
SPANS_SUITE = TableSuite("spans", (
    *not_null("shard", "sequence", "start", "end", "doc_id", "occurrence", "phase"),
    between("shard", 0), between("sequence", 0), between("start", 0), between("end", 1),
    between("occurrence", 0)))


@asset_check(asset=SHARDS, name="mix_shares_on_target", blocking=True,
             partitions_def=recipe_partitions,
             description="Every source's share of its phase's tokens in the shards (delivered, "
             "EOS included: manifest.json tokens_by_phase_source) is within "
             "gates.mix_share_tolerance of the recipe's target, widened by what whole "
             "documents allow: half the largest document of each source, over the phase's "
             "tokens (the mix's fill ends each source within that of its target). A source "
             "that ran out is exempt (the metadata says so). A warning where gates.severity "
             "says warn.")
def mix_shares_on_target(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    name = context.op_execution_context.partition_key
    store = storage.store
    gates = pipeline.load().gates
    version = _dataset_version(store, name)
    manifest = json.loads(store.read_bytes(f"{shards_prefix(version)}/manifest.json"))
    delivered = delivered_tokens(manifest["tokens_by_phase_source"])
    shares = PartitionLayout(store, MIX, name).read_table(name="shares")
    failures = share_failures(shares, gates.mix_share_tolerance, delivered)
    notes = ran_out_notes(shares)
    return AssetCheckResult(
        passed=not failures, severity=gate_severity(gates, "mix_shares_on_target"),
        description="; ".join(failures) if failures else "every source's delivered share is "
        "on target",
        metadata={"failures": MetadataValue.json(failures),
                  "ran_out": MetadataValue.json(notes),
                  "delivered": MetadataValue.json(manifest["tokens_by_phase_source"]),
                  "tolerance": MetadataValue.float(gates.mix_share_tolerance)},
    )


def _dataset_version(store: Store, recipe: str) -> str:
    """The dataset version the recipe's `shards` partition holds."""
    return PartitionLayout(store, SHARDS, recipe).complete_manifest().version


def _selected_texts(store: Store, name: str) -> list[tuple[str, str]]:
    """(doc_id, final text) of a sample of the documents the mix selected, in the order of the
    source partitions (sorted) and their rows. A first pass chooses the sample from the doc_ids
    (DuckDB joins the mix's occurrences to each scrubbed partition), a second reads the scrubbed
    text a part at a time keeping the chosen: memory is bounded by one part and the sample."""
    with duckdb_session() as con:
        register_stored(con, "occurrences", PartitionLayout(store, MIX, name),
                        ["doc_id", "partition"])
        partitions = sorted(row[0] for row in
                            con.execute("SELECT DISTINCT partition FROM occurrences").fetchall())

        def selected(partition: str, among: str = "") -> str:
            register_stored(con, "scrubbed_ids", PartitionLayout(store, SCRUBBED, partition),
                            ["doc_id"])
            return ("SELECT doc_id FROM scrubbed_ids WHERE doc_id IN (SELECT doc_id"
                    f" FROM occurrences WHERE partition = {literal(partition)}{among})")

        def selected_ids() -> Iterator[list[str]]:
            for partition in partitions:
                for batch in con.sql(selected(partition)).to_arrow_reader(1 << 16):
                    yield batch.column(0).to_pylist()

        chosen = pa.table({"doc_id": pa.array(sorted(sample_ids(selected_ids())), pa.string())})
        con.register("chosen", chosen)
        texts = []
        for partition in partitions:
            here = {row[0] for row in con.execute(selected(
                partition, " AND doc_id IN (SELECT doc_id FROM chosen)")).fetchall()}
            texts += chosen_texts(here, iter_parts(PartitionLayout(store, SCRUBBED, partition),
                                                   ["doc_id", "text"]))
    return texts


@asset_check(asset=MIX, blocking=True, partitions_def=recipe_partitions,
             description="A re-scan of the selected, edited text for the eval suite's n-grams, "
             "by a matcher written apart from the decontamination scanner, finds none.")
def mix_has_no_residual_contamination(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    name = context.op_execution_context.partition_key
    settings = pipeline.load().decontamination
    texts = _selected_texts(storage.store, name)
    matcher = ResidualMatcher(load_benchmarks(settings.benchmarks), settings.ngram)
    found = [(texts[r.doc][0], r.benchmark, r.item_id) for r in matcher.scan(t for _, t in texts)]
    return AssetCheckResult(
        passed=not found, severity=AssetCheckSeverity.ERROR,
        description=f"{len(found)} eval items found in a re-scan of {len(texts)} selected "
        "documents" + (f" (first: {found[0][1]} item {found[0][2]} in {found[0][0]})"
                       if found else ""),
        metadata={"documents_scanned": MetadataValue.int(len(texts)),
                  "residual_items": MetadataValue.int(len(found)),
                  "where": MetadataValue.json([list(row) for row in found[:20]])},
    )


@asset_check(asset=MIX, blocking=True, partitions_def=recipe_partitions,
             description="A re-scan of the selected, edited text for PII, by a matcher written "
             "apart from the scrubber, finds none of the enabled types.")
def mix_has_no_residual_pii(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource,
    compute: ComputeResource,
) -> AssetCheckResult:
    name = context.op_execution_context.partition_key
    return residual_pii_result(_selected_texts(storage.store, name), pipeline.load().pii,
                               compute.workers)


@asset_check(asset=SHARDS, blocking=True, partitions_def=recipe_partitions,
             description="Shard integrity: sha256 against the manifest, monotonic offsets, token "
             "ids below the vocabulary size, one EOS per document occurrence, tokens plus padding "
             "equal sequences times seq_len, padding positions as recorded, spans tiling every "
             "sequence.")
def shards_integrity(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    name = context.op_execution_context.partition_key
    store = storage.store
    version = _dataset_version(store, name)
    with tempfile.TemporaryDirectory(prefix="verify-") as folder:
        report = verify_shards(local_shards(store, shards_prefix(version), folder))
    return AssetCheckResult(
        passed=report.ok, severity=AssetCheckSeverity.ERROR,
        description=f"shards {version}: {report.summary()}",
        metadata={"dataset_version": MetadataValue.text(version),
                  "failed_checks": MetadataValue.json(sorted(report.checks_failed())),
                  "summary": MetadataValue.text(report.summary())},
    )


@asset_check(asset=SHARDS, blocking=True, partitions_def=recipe_partitions,
             description="No span of the dataset version belongs to a document the takedown "
             "list removes (the matched documents and their exact and near duplicates).")
def shards_exclude_takedowns(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    name = context.op_execution_context.partition_key
    store = storage.store
    version = _dataset_version(store, name)
    takedown = PartitionLayout(store, MIX, name).complete_manifest().extra["takedown_version"]
    gone = load_tombstones(store, takedown)
    present: set[str] = set()
    if len(gone):
        for batch in parquet_batches(store, f"{shards_prefix(version)}/spans.parquet",
                                     ["doc_id"]):
            present.update(batch.filter(gone.mask(batch["doc_id"]))["doc_id"].to_pylist())
    return AssetCheckResult(
        passed=not present, severity=AssetCheckSeverity.ERROR,
        description=f"{len(present)} taken-down documents in the shards of {version} "
        f"(takedown list {takedown}, {len(gone)} documents taken down)",
        metadata={"takedown_version": MetadataValue.text(takedown),
                  "taken_down_documents": MetadataValue.int(len(gone)),
                  "still_present": MetadataValue.json(sorted(present)[:20])},
    )


mix_contract = contract_check(MIX, MIX_SUITES, recipe_partitions)


@asset_check(asset=SHARDS, blocking=True, partitions_def=recipe_partitions,
             description=describe([SPANS_SUITE]) + " (the dataset version's spans.parquet)")
def shards_contract(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    store = storage.store
    version = _dataset_version(store, context.op_execution_context.partition_key)
    # The suite judges no uniqueness: nothing spans the batches.
    passed, rows, count = validate_stored(store, [f"{shards_prefix(version)}/spans.parquet"],
                                          SPANS_SUITE, f"{SHARDS}.spans")
    return expectations_result(passed, rows, {"rows": MetadataValue.int(count),
                                              "dataset_version": MetadataValue.text(version)})
