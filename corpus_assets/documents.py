"""`documents[snapshot]`: records to main text in the document contract; rejects logged."""


from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from checks.documents import problem_files_metadata
from checks.expectations import import_in_background
from corpus_assets.metadata import samples_preview, stage_metadata, task_logger
from corpus_assets.warc_files import warc_files
from curation.config import SOURCE_PREFIX, SourceConfig, stable_hash
from curation.graph import WARC_FILES
from curation.partition import PartitionLayout
from curation.schema import WEB_SOURCE
from curation.stages.documents import (
    KERNEL_VERSION,
    describe_problem_files,
    partition_problem_files,
    run_documents,
    run_version,
)
from curation.versions import library_versions
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    partitions_def=snapshot_partitions,
    deps=[warc_files],
    group_name="ingest",
    code_version=f"{KERNEL_VERSION}+{stable_hash(library_versions(), 8)}",
    description="Every HTML response (or curated source record) as one document row: stable "
    "doc_id, url, domain, WARC file and offset, fetch time, charset and main text.",
)
def documents(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    config = pipeline.load()
    partition = context.partition_key
    inputs = PartitionLayout(storage.store, WARC_FILES, partition).read_table().to_pylist()
    locations = [row["location"] for row in inputs]
    entry = config.partition_entry(partition)
    source_config = entry if isinstance(entry, SourceConfig) else None
    settings = config.documents
    version = run_version(settings, locations, entry, [row["sha256"] for row in inputs])
    if compute.workers > 0:  # this process waits on the workers: import the contract's GX now
        import_in_background()

    run = run_documents(
        partition,
        locations,
        storage.store,
        settings,
        compute.workers,
        reader=storage.reader,
        source=partition.removeprefix(SOURCE_PREFIX) if source_config else WEB_SOURCE,
        source_config=source_config,
        source_root=config.resolve(source_config.path) if source_config else None,
        version=version,
        on_task_done=task_logger(context, partition),
    )
    metadata = stage_metadata(run.stats, run.wall_seconds)
    metadata.update(samples_preview(run.samples,
                                    storage.store.uri(f"samples/documents/{partition}.jsonl")))
    metadata["path"] = MetadataValue.path(storage.store.uri(f"documents/{partition}"))
    metadata["rejects_path"] = MetadataValue.path(storage.store.uri(f"rejects/{partition}"))
    metadata["version"] = MetadataValue.text(version)
    problems = partition_problem_files(storage.store, partition)
    metadata.update(problem_files_metadata(problems))
    if problems:
        context.log.warning(f"documents[{partition}]: {len(problems)} of {len(locations)} input "
                            f"files gave no documents or only part of theirs: "
                            f"{describe_problem_files(problems)} (rejects: "
                            f"{storage.store.uri(f'rejects/{partition}')})")
    return MaterializeResult(metadata=metadata, data_version=DataVersion(run.manifest.data_version))
