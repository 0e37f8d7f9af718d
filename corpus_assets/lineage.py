"""`takedowns` (the versioned takedown list) and `catalog` (record-level lineage in DuckDB)."""

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from curation.catalog import refresh_catalog
from curation.graph import CATALOG, CATALOG_INPUTS, CROSS_DEDUP, TAKEDOWNS
from curation.takedowns import current_takedowns
from partitions import every_partition
from resources import CatalogResource, StorageResource

CATALOG_CODE_VERSION = "catalog-1"


@asset(
    name=TAKEDOWNS,
    group_name="models",
    code_version="takedowns-1",
    description="The current version of the takedown list (URLs and domains with reasons, "
    "added with `corpus takedown add`); its version is part of every dataset version.",
)
def takedowns(storage: StorageResource) -> MaterializeResult:
    current = current_takedowns(storage.store)
    return MaterializeResult(
        metadata={"version": MetadataValue.text(current.version),
                  "number": MetadataValue.int(current.number),
                  "urls": MetadataValue.int(len(current.urls)),
                  "domains": MetadataValue.int(len(current.domains))},
        data_version=DataVersion(current.version),
    )


@asset(
    name=CATALOG,
    deps=[*map(every_partition, CATALOG_INPUTS), CROSS_DEDUP, TAKEDOWNS],
    group_name="lineage",
    code_version=CATALOG_CODE_VERSION,
    description="DuckDB views over the Parquet outputs (documents without text, decisions, "
    "selections, spans, clusters) plus sorted look-up tables, refreshed by this one step only "
    "(DuckDB allows one writer); no extension is installed at run time.",
)
def catalog(context: AssetExecutionContext, storage: StorageResource,
            catalog: CatalogResource) -> MaterializeResult:
    with storage.locked(context.run.run_id, CATALOG):
        summary = refresh_catalog(storage.store, catalog.path)
    rows = "\n".join(f"| {name} | {count:,} |" for name, count in sorted(summary.rows.items()))
    context.log.info(f"catalog refreshed at {summary.path} in {summary.seconds:.1f} s")
    return MaterializeResult(
        metadata={"path": MetadataValue.path(summary.path),
                  "mode": MetadataValue.text(summary.mode),
                  "rows": MetadataValue.md(f"| relation | rows |\n| --- | ---: |\n{rows}"),
                  "dataset_versions": MetadataValue.json(summary.dataset_versions),
                  "takedown_version": MetadataValue.text(summary.takedown_version),
                  "bytes": MetadataValue.int(summary.bytes),
                  "wall_seconds": MetadataValue.float(round(summary.seconds, 2))},
    )
