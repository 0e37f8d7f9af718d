"""Quality gate of the exports: every export of the recipe's current version accounts for the
shards' tokens (what it holds plus what the takedowns cut) and lists files that are stored."""

import json

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from curation.graph import EXPORTS
from curation.stages.dataset import shards_prefix
from curation.stages.export import FORMATS, MANIFEST, current_version, exports_prefix
from partitions import recipe_partitions
from resources import StorageResource


@asset_check(asset=EXPORTS, blocking=True, partitions_def=recipe_partitions,
             description="Each export of the current dataset version holds the shards' tokens "
             "less those its takedowns cut (and, per occurrence, their occurrences), and every "
             "file its export.json lists is stored.")
def exports_match_shards(context: AssetCheckExecutionContext,
                         storage: StorageResource) -> AssetCheckResult:
    store = storage.store
    version = current_version(store, context.op_execution_context.partition_key)
    totals = json.loads(store.read_bytes(f"{shards_prefix(version)}/manifest.json"))["totals"]
    problems, checked = [], []
    for fmt in FORMATS:
        key = f"{exports_prefix(version, fmt)}/{MANIFEST}"
        if not store.exists(key):
            continue
        checked.append(fmt)
        export = json.loads(store.read_bytes(key))
        cut = export["taken_down"]
        if export["tokens"] + cut["tokens"] != totals["tokens"]:
            problems.append(f"{fmt}: {export['tokens']} tokens + {cut['tokens']} cut, the shards "
                            f"hold {totals['tokens']}")
        if fmt != "nanogpt" and export["rows"] + cut["occurrences"] != totals["occurrences"]:
            problems.append(f"{fmt}: {export['rows']} rows + {cut['occurrences']} cut, the "
                            f"shards hold {totals['occurrences']} occurrences")
        stored = set(store.list(exports_prefix(version, fmt)))
        missing = [entry["name"] for entry in export["files"]
                   if f"{exports_prefix(version, fmt)}/{entry['name']}" not in stored]
        if missing:
            problems.append(f"{fmt}: {', '.join(missing)} listed but not stored")
    return AssetCheckResult(
        passed=bool(checked) and not problems, severity=AssetCheckSeverity.ERROR,
        description="; ".join(problems) or (f"{', '.join(checked)} of {version} account for "
                                             "the shards" if checked else "no export stored"),
        metadata={"dataset_version": MetadataValue.text(version),
                  "formats": MetadataValue.json(checked),
                  "problems": MetadataValue.json(problems)})
