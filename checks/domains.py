"""Quality gates for the topic domains: every domain described, every document in a domain."""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import TableSuite, between, contract_check, not_null, unique
from checks.policy import covers_documents, skipped_partition
from curation.domains import MIN_DOCUMENTS
from curation.graph import ALL, DOMAINS, TOPIC_MODEL
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import StorageResource

# A partition skipped because embeddings are off holds an empty table, which meets it too.
DOMAINS_SUITES = (
    TableSuite("part", (*not_null("doc_id", "domain", "similarity"), unique("doc_id"),
                        between("domain", 0), between("similarity", -1.01, 1.01))),
)


@asset_check(asset=TOPIC_MODEL, blocking=True,
             description=f"Every domain of {MIN_DOCUMENTS} or more sampled documents has top "
             "terms, and the domains' shares of the sample add up to one.")
def topic_model_describes_domains(storage: StorageResource) -> AssetCheckResult:
    skipped = skipped_partition(storage.store, TOPIC_MODEL, ALL)
    if skipped:
        return skipped
    model = PartitionLayout(storage.store, TOPIC_MODEL, ALL).read_table(
        ["domain", "documents", "share", "terms"]).to_pylist()
    mute = [row["domain"] for row in model
            if row["documents"] >= MIN_DOCUMENTS and not row["terms"]]
    total = sum(row["share"] for row in model)
    passed = not mute and abs(total - 1.0) < 1e-6
    return AssetCheckResult(
        passed=passed, severity=AssetCheckSeverity.ERROR,
        description=f"{TOPIC_MODEL}: {len(model)} domains, shares summing to {total:.6f}"
        + (f"; domains without terms: {mute}" if mute else ""),
        metadata={"domains": MetadataValue.int(len(model)),
                  "domains_without_terms": MetadataValue.int(len(mute))})


@asset_check(asset=DOMAINS, blocking=True, partitions_def=snapshot_partitions,
             description="Exactly one domain per document, in document order.")
def domains_cover_documents(context: AssetCheckExecutionContext,
                            storage: StorageResource) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    return skipped_partition(storage.store, DOMAINS, partition) or covers_documents(
        storage.store, DOMAINS, partition, "assigned")


domains_contract = contract_check(DOMAINS, DOMAINS_SUITES, snapshot_partitions)
