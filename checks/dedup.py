"""Quality gates for the dedup stages: every duplicate names a kept document that exists and is
not itself a duplicate; duplicate rates within the pipeline's bounds."""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import (
    TableSuite,
    between,
    contract_check,
    decisions_suite,
    in_set,
    not_null,
    of_type,
    unique,
)
from checks.policy import gate_severity
from checks.streams import count_absent, register_stored
from curation.duck import duckdb_session, scalar
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DEDUP_CLUSTERS,
    DOCUMENTS,
    EXACT_DEDUP,
    LINE_DEDUP,
    URL_DEDUP,
)
from curation.partition import PartitionLayout
from curation.stages.dedup import REASONS
from curation.stats import StageStats
from curation.storage import Store
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource


def cluster_suites(asset: str) -> tuple[TableSuite, ...]:
    """The members of the duplicate clusters a dedup stage found, and its drops."""
    return (
        TableSuite("part", (*not_null("doc_id", "cluster_id", "kept_doc_id", "keep"),
                            unique("doc_id"), between("cluster_size", 2),
                            of_type("keep", "bool"))),
        TableSuite("decisions", (*decisions_suite(asset, [REASONS[asset]]).expectations,
                                 *not_null("kept_doc_id"))),
    )


URL_DEDUP_SUITES = cluster_suites(URL_DEDUP)
EXACT_DEDUP_SUITES = cluster_suites(EXACT_DEDUP)
DEDUP_CLUSTERS_SUITES = cluster_suites(DEDUP_CLUSTERS)
CROSS_DEDUP_SUITES = cluster_suites(CROSS_DEDUP)
LINE_DEDUP_SUITES = (
    TableSuite("part", (*not_null("doc_id", "lines_removed", "empty_after_edits"),
                        unique("doc_id"), between("lines_removed", 0),
                        of_type("empty_after_edits", "bool"))),
    TableSuite("edits", (*not_null("doc_id", "line"), in_set("stage", [LINE_DEDUP]),
                         in_set("kind", ["boilerplate_line"]), between("line", 0))),
    decisions_suite(LINE_DEDUP, ["empty_after_edits"]),
)


def kept_members_valid(store: Store, asset: str, partition: str) -> AssetCheckResult:
    layout = PartitionLayout(store, asset, partition)
    with duckdb_session() as con:
        register_stored(con, "members", layout, ["doc_id", "keep"])
        register_stored(con, "decisions", layout, ["kept_doc_id"], "decisions")
        con.execute("CREATE TEMP VIEW kept AS SELECT DISTINCT doc_id FROM members WHERE keep")
        con.execute("CREATE TEMP VIEW named AS SELECT DISTINCT kept_doc_id AS doc_id"
                    " FROM decisions")
        members = scalar(con, "SELECT count(*) FROM members")
        kept = scalar(con, "SELECT count(*) FROM kept")
        duplicates = scalar(con, "SELECT count(*) FROM decisions")
        missing = count_absent(con, "named", "members")
        not_kept = count_absent(con, "named", "kept")
    return AssetCheckResult(
        passed=not missing and not not_kept and duplicates == members - kept,
        severity=AssetCheckSeverity.ERROR,
        description=f"{asset}[{partition}]: {duplicates} duplicates of {kept} kept "
        f"members; {missing} name a kept member not in their cluster, {not_kept} "
        "name a kept member that is itself a duplicate",
        metadata={"duplicates": MetadataValue.int(duplicates),
                  "kept_members": MetadataValue.int(kept),
                  "kept_not_in_cluster": MetadataValue.int(missing),
                  "kept_is_a_duplicate": MetadataValue.int(not_kept)},
    )


def _rate_within_bounds(pipeline: PipelineResource, storage: StorageResource, asset: str,
                        partition: str) -> AssetCheckResult:
    manifest = PartitionLayout(storage.store, asset, partition).complete_manifest()
    stats = StageStats.from_dict(manifest.extra["stats"])
    rate = stats.rejected / stats.candidates if stats.candidates else 0.0
    gates = pipeline.load().gates
    limit = gates.max_duplicate_rate
    return AssetCheckResult(passed=rate <= limit, severity=gate_severity(gates, f"{asset}_rate"),
                            description=f"{asset}[{partition}]: duplicate rate {rate:.2%}, "
                            f"{'within' if rate <= limit else 'over'} gates.max_duplicate_rate "
                            f"{limit:.2%}",
                            metadata={"duplicate_rate": MetadataValue.float(round(rate, 4)),
                                      "max": MetadataValue.float(limit)})


def _partition_checks(name: str):  # noqa: ANN202 - a check factory
    @asset_check(asset=name, name=f"{name}_kept_members_valid", blocking=True,
                 partitions_def=snapshot_partitions,
                 description="Every duplicate names a kept member that exists in its cluster "
                 "and is not itself a duplicate.")
    def kept_valid(context: AssetCheckExecutionContext,
                   storage: StorageResource) -> AssetCheckResult:
        return kept_members_valid(storage.store, name, context.op_execution_context.partition_key)

    @asset_check(asset=name, name=f"{name}_rate", blocking=True,
                 partitions_def=snapshot_partitions,
                 description="Duplicate rate within gates.max_duplicate_rate (a warning "
                 "where gates.severity says warn).")
    def rate(context: AssetCheckExecutionContext, pipeline: PipelineResource,
             storage: StorageResource) -> AssetCheckResult:
        return _rate_within_bounds(pipeline, storage, name,
                                   context.op_execution_context.partition_key)

    return kept_valid, rate


url_dedup_kept_valid, url_dedup_rate = _partition_checks(URL_DEDUP)
exact_dedup_kept_valid, exact_dedup_rate = _partition_checks(EXACT_DEDUP)
near_kept_valid, near_rate = _partition_checks(DEDUP_CLUSTERS)
url_dedup_contract = contract_check(URL_DEDUP, URL_DEDUP_SUITES, snapshot_partitions)
exact_dedup_contract = contract_check(EXACT_DEDUP, EXACT_DEDUP_SUITES, snapshot_partitions)
dedup_clusters_contract = contract_check(DEDUP_CLUSTERS, DEDUP_CLUSTERS_SUITES,
                                         snapshot_partitions)
cross_dedup_contract = contract_check(CROSS_DEDUP, CROSS_DEDUP_SUITES, None)
line_dedup_contract = contract_check(LINE_DEDUP, LINE_DEDUP_SUITES, snapshot_partitions)


@asset_check(asset=CROSS_DEDUP, blocking=True,
             description="Every cross-partition duplicate names a kept member that exists.")
def cross_dedup_kept_members_valid(storage: StorageResource) -> AssetCheckResult:
    return kept_members_valid(storage.store, CROSS_DEDUP, ALL)


@asset_check(asset=LINE_DEDUP, blocking=True, partitions_def=snapshot_partitions,
             description="Every edit names a document of the partition; empty_after_edits drops "
             "only edited documents.")
def line_dedup_edits_valid(context: AssetCheckExecutionContext,
                           storage: StorageResource) -> AssetCheckResult:
    return edits_valid(storage.store, context.op_execution_context.partition_key)


def edits_valid(store: Store, partition: str) -> AssetCheckResult:
    """`line_dedup_edits_valid` of a partition: DuckDB anti-joins over the stored parts (they
    spill), nothing held in Python."""
    layout = PartitionLayout(store, LINE_DEDUP, partition)
    with duckdb_session() as con:
        register_stored(con, "partition_ids", PartitionLayout(store, DOCUMENTS, partition),
                        ["doc_id"])
        register_stored(con, "edits", layout, ["doc_id"], "edits")
        register_stored(con, "drops", layout, ["doc_id"], "decisions")
        edits = scalar(con, "SELECT count(*) FROM edits")
        drops = scalar(con, "SELECT count(*) FROM drops")
        passed = (count_absent(con, "edits", "partition_ids") == 0
                  and count_absent(con, "(SELECT DISTINCT doc_id FROM drops)", "edits") == 0)
    return AssetCheckResult(passed=bool(passed), severity=AssetCheckSeverity.ERROR,
                            description=f"{LINE_DEDUP}[{partition}]: {edits} edits, "
                            f"{drops} empty_after_edits drops"
                            + ("" if passed else " (an edit names a document not in the "
                               "partition, or a drop an unedited document)"),
                            metadata={"edits": MetadataValue.int(edits),
                                      "empty_after_edits": MetadataValue.int(drops)})
