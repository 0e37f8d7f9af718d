"""Quality gates for `embeddings`: a vector per document, each of unit length."""

import numpy as np
import pyarrow as pa
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import TableSuite, between, contract_check, not_null, unique
from checks.policy import covers_documents, skipped_partition
from checks.streams import Tally, iter_parts
from curation.embeddings import DIMENSIONS
from curation.graph import EMBEDDINGS
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import StorageResource

# Float16 components of a unit vector round by at most 2^-11 each: its norm stays well inside.
NORM_TOLERANCE = 0.01

# A partition skipped because the stage is off holds an empty table, which meets it too.
EMBEDDINGS_SUITES = (
    TableSuite("part", (*not_null("doc_id", "tokens"), unique("doc_id"),
                        between("tokens", 2, 512))),
)


@asset_check(asset=EMBEDDINGS, blocking=True, partitions_def=snapshot_partitions,
             description="Exactly one vector per document, in document order.")
def embeddings_cover_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    return skipped_partition(storage.store, EMBEDDINGS, partition) or covers_documents(
        storage.store, EMBEDDINGS, partition, "vectors")


@asset_check(asset=EMBEDDINGS, blocking=True, partitions_def=snapshot_partitions,
             description=f"Every vector has {DIMENSIONS} finite components and unit length "
             f"(within {NORM_TOLERANCE}).")
def embeddings_norms(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    skipped = skipped_partition(storage.store, EMBEDDINGS, partition)
    if skipped:
        return skipped
    norms = Norms()
    tally = Tally(iter_parts(PartitionLayout(storage.store, EMBEDDINGS, partition),
                             ["doc_id", "embedding"]), norms.add)
    rows = sum(len(chunk) for chunk in tally.doc_ids())
    bad = tally.total
    return AssetCheckResult(
        passed=bad == 0, severity=AssetCheckSeverity.ERROR,
        description=f"{EMBEDDINGS}[{partition}]: {bad} of {rows} vectors not of unit length",
        metadata={"min_norm": MetadataValue.float(round(norms.low, 5)),
                  "max_norm": MetadataValue.float(round(norms.high, 5)),
                  "off_unit_length": MetadataValue.int(bad)})


class Norms:
    """The range of the vectors' norms a part at a time; `add` returns the part's vectors
    that are not finite or not of unit length."""

    def __init__(self) -> None:
        self.low, self.high = float("inf"), 0.0

    def add(self, table: pa.Table) -> int:
        if not table.num_rows:
            return 0
        column = table["embedding"].combine_chunks()
        vectors = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        norms = np.linalg.norm(vectors.reshape(len(column), DIMENSIONS), axis=1)
        self.low, self.high = min(self.low, float(norms.min())), max(self.high,
                                                                      float(norms.max()))
        return int((~(np.abs(norms - 1.0) <= NORM_TOLERANCE)).sum())


embeddings_contract = contract_check(EMBEDDINGS, EMBEDDINGS_SUITES, snapshot_partitions)
