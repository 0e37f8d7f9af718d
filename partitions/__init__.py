"""Partition sets, defined once and imported wherever needed.

`snapshot` holds Common Crawl snapshot ids and curated sources (`source:NAME`); its keys are
registered from `pipeline.yaml` (`corpus snapshots register`, or the `register_partitions` sensor).
`recipe` holds the recipe names (`recipes/NAME.yaml`), registered the same ways; the dataset
assets (tokenizer, mix, shards) are partitioned by it.
"""

import warnings

from dagster import AllPartitionMapping, AssetDep, DynamicPartitionsDefinition, PreviewWarning

# Partitioned asset checks (one result per snapshot) are a Dagster preview feature; the gates
# depend on them, so the warning is acknowledged once here rather than printed on every load.
warnings.filterwarnings("ignore", category=PreviewWarning, message=".*partitions_def.*")

SNAPSHOT_PARTITIONS_NAME = "snapshot"

snapshot_partitions = DynamicPartitionsDefinition(name=SNAPSHOT_PARTITIONS_NAME)

RECIPE_PARTITIONS_NAME = "recipe"

recipe_partitions = DynamicPartitionsDefinition(name=RECIPE_PARTITIONS_NAME)


def every_partition(asset: object) -> AssetDep:
    """A dependency on all partitions of `asset` (a pipeline-wide or per-recipe asset reads
    every snapshot's)."""
    return AssetDep(asset, partition_mapping=AllPartitionMapping())
