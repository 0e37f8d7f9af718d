"""`exports[recipe]` (opt-in): the recipe's dataset version in formats other tools open, under
exports/{dataset version}/{format}/ (`curation.stages.export`; `corpus export` writes the same
files to a local folder)."""

from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from corpus_assets.proxy import OPT_IN_GROUP
from curation.graph import DOCUMENTS, EXPORTS, MIX, SCRUBBED, SHARDS, TAKEDOWNS
from curation.stages.export import (
    EXPORT_CODE_VERSION,
    FORMATS,
    ExportSettings,
    exports_prefix,
    store_exports,
)
from partitions import every_partition, recipe_partitions
from resources import PipelineResource, StorageResource


class ExportConfig(Config):
    formats: list[str] = Field(default_factory=lambda: ["hf-parquet"],
                               description=f"Any of: {', '.join(FORMATS)}")
    rows_per_file: int = Field(default=ExportSettings.rows_per_file, ge=1,
                               description="hf-parquet: rows per file")
    validation_fraction: float = Field(
        default=ExportSettings.validation_fraction, ge=0.0, lt=1.0,
        description="nanogpt: the share of sequences held out into val.bin")


@asset(
    name=EXPORTS,
    partitions_def=recipe_partitions,
    deps=[SHARDS, MIX, TAKEDOWNS, every_partition(SCRUBBED), every_partition(DOCUMENTS)],
    group_name=OPT_IN_GROUP,
    code_version=EXPORT_CODE_VERSION,
    description="The recipe's dataset version as Hugging Face datasets Parquet (text and "
    "lineage per occurrence), MosaicML Streaming MDS or nanoGPT token files, the current "
    "takedown list honoured, under exports/{dataset version}/{format}/; opt-in.",
)
def exports(context: AssetExecutionContext, config: ExportConfig, pipeline: PipelineResource,
            storage: StorageResource) -> MaterializeResult:
    name = context.partition_key
    results = store_exports(storage.store, name, pipeline.recipe(name), pipeline.load(),
                            config.formats,
                            ExportSettings(rows_per_file=config.rows_per_file,
                                           validation_fraction=config.validation_fraction))
    metadata = {"dataset_version": MetadataValue.text(results[0].dataset_version)} \
        if results else {}
    for result in results:
        prefix = exports_prefix(result.dataset_version, result.format)
        metadata |= {
            f"{result.format}.path": MetadataValue.path(storage.store.uri(prefix)),
            f"{result.format}.rows": MetadataValue.int(result.rows),
            f"{result.format}.tokens": MetadataValue.int(result.tokens),
            f"{result.format}.files": MetadataValue.int(len(result.files)),
            f"{result.format}.taken_down_tokens": MetadataValue.int(result.taken_down.tokens)}
    return MaterializeResult(metadata=metadata)
