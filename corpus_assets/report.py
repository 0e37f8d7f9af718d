"""`report[recipe]`: the funnel report of a dataset version (`curation.report`), stored as one
self-contained HTML page with its plots under `reports/{recipe}/`, and its main figures as
metadata (Markdown tables, numbers to plot across runs, the funnel plot inline)."""

from pathlib import Path

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from curation.config import stable_hash
from curation.graph import CROSS_DEDUP, MIX, MIX_INPUTS, REPORT, SHARDS, TOPIC_MODEL
from curation.report import (
    EDITS,
    REPORT_VERSION,
    build_report,
    contamination_markdown,
    domains_markdown,
    duplicates_markdown,
    funnel_markdown,
    markdown_image,
    mixture_markdown,
    removals_markdown,
    render_plots,
    served_phases_markdown,
    write_report,
)
from curation.storage import LocalStore
from partitions import every_partition, recipe_partitions
from resources import PipelineResource, StorageResource

METADATA_PLOT_DPI = 60  # a smaller copy of the plots for the event log


@asset(
    name=REPORT,
    partitions_def=recipe_partitions,
    deps=[SHARDS, MIX, *map(every_partition, MIX_INPUTS), CROSS_DEDUP, TOPIC_MODEL],
    group_name="dataset",
    code_version=REPORT_VERSION,
    description="The recipe's funnel report: documents and estimated tokens through every stage "
    "per partition, removals per reason, language mix, quality scores with the recipe's "
    "cutoff, duplicate cluster sizes and the duplicate rule's removals per cluster size, the "
    "achieved mixture, the phase order as the loader serves it, and sampled kept and removed "
    "documents, as one self-contained HTML page under reports/{recipe}/.",
)
def report(context: AssetExecutionContext, pipeline: PipelineResource,
           storage: StorageResource) -> MaterializeResult:
    name = context.partition_key
    store = storage.store
    with storage.locked(context.run.run_id, REPORT, name):
        recipe = pipeline.recipe(name)
        built = build_report(store, recipe)
        keys = write_report(store, built)
    data, summary = built.data, built.data["summary"]
    location = store.uri(keys["html"])
    url = Path(location).as_uri() if isinstance(store, LocalStore) else location
    small = render_plots(data, dpi=METADATA_PLOT_DPI, names=("funnel", "mixture"))
    context.log.info(f"report[{name}]: {location}")
    metadata = {
        "report_path": MetadataValue.path(location),
        "report_url": MetadataValue.url(url),
        "dataset_version": MetadataValue.text(str(data["dataset_version"])),
        "records_tried": MetadataValue.int(summary["records_tried"]),
        "documents_in": MetadataValue.int(summary["documents"]),
        "documents_out": MetadataValue.int(summary["documents_selected"]),
        "document_tokens_est": MetadataValue.int(summary["document_tokens"]),
        "selected_tokens_est": MetadataValue.int(summary["selected_tokens"]),
        "occurrences": MetadataValue.int(summary["occurrences"]),
        "mix_tokens_est": MetadataValue.int(summary["mix_tokens"] or 0),
        "shard_tokens": MetadataValue.int(summary["shard_tokens"] or 0),
        "shards": MetadataValue.int(summary["shards"]),
        "funnel": MetadataValue.md(funnel_markdown(data)),
        "removals_by_reason": MetadataValue.md(removals_markdown(data)),
        "mixture": MetadataValue.md(mixture_markdown(data)),
        "duplicates_by_cluster_size": MetadataValue.md(duplicates_markdown(data)),
        "served_phases": MetadataValue.md(served_phases_markdown(data)),
        "domains": MetadataValue.md(domains_markdown(data)),
        "contamination": MetadataValue.md(contamination_markdown(data)),
        "funnel_plot": MetadataValue.md(markdown_image(small["funnel"], "funnel")),
        "mixture_plot": MetadataValue.md(markdown_image(small["mixture"], "mixture")),
    }
    for row in data["funnel"]["total"]:
        if row["stage"] == EDITS:  # drops no document, only text
            metadata["edits.tokens_removed_est"] = MetadataValue.int(row["tokens_dropped"])
        else:
            metadata[f"dropped.{row['stage']}"] = MetadataValue.int(row["dropped"])
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(stable_hash(data)))
