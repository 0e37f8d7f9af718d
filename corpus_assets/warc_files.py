"""`warc_files[snapshot]`: the partition's input files with sizes, sha256 and ETags."""


from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from curation.config import stable_hash
from curation.graph import WARC_FILES
from curation.inputs import (
    describe,
    ignored_local_files,
    input_files_table,
    list_locations,
    name_files,
)
from curation.partition import Manifest, PartitionLayout
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource

ASSET = WARC_FILES


@asset(
    partitions_def=snapshot_partitions,
    group_name="ingest",
    code_version="warc_files-1",
    description="The selected input files of a snapshot or curated source, with sizes, sha256 "
    "and ETags (S3).",
)
def warc_files(
    context: AssetExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> MaterializeResult:
    config = pipeline.load()
    partition = context.partition_key
    locations = list_locations(config, partition, storage.reader)
    files = [describe(location, storage.reader) for location in locations]
    layout = PartitionLayout(storage.store, ASSET, partition)
    version = stable_hash({"entry": config.partition_entry(partition).model_dump(mode="json"),
                           "files": [file.__dict__ for file in files]})
    with storage.locked(context.run.run_id, ASSET, partition):
        layout.prepare(version)
        part = layout.write_part(0, input_files_table(files))
        manifest = Manifest(ASSET, partition, version, [part])
        layout.write_manifest(manifest)
    total = sum(file.size for file in files)
    ignored = ignored_local_files(config, partition)
    if ignored:
        context.log.warning(f"warc_files[{partition}]: {len(ignored)} file(s) in the folder are "
                            f"not WARC files and were not read: {name_files(ignored)}")
    listing = "\n".join(f"| {f.location} | {f.size} | {f.sha256[:16]} |" for f in files[:50])
    return MaterializeResult(
        metadata={
            "files": MetadataValue.int(len(files)),
            "total_bytes": MetadataValue.int(total),
            "listing": MetadataValue.md("| file | bytes | sha256 |\n| --- | ---: | --- |\n"
                                        + listing),
            "path": MetadataValue.path(storage.store.uri(layout.prefix)),
            # Not WARC (.wet.gz, .wat.gz, ...): named so the CLI and the UI can say so.
            "ignored_files": MetadataValue.json(ignored),
        },
        data_version=DataVersion(manifest.data_version),
    )
