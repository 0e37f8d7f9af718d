"""The code location: every asset, check, job, sensor and resource in one place.

Assets come from the modules `curation.graph.ASSET_MODULES` names, checks from every module of
`checks/` (`checks.registry`): adding a stage registers nothing here."""

import importlib

from dagster import AssetSelection, Definitions, define_asset_job, load_assets_from_modules

from checks.registry import ASSET_CHECKS
from corpus_assets.sensors import register_partitions
from curation.graph import ASSET_MODULES, TAKEDOWNS
from resources import default_resources

# The main job runs in this order, since pipeline-wide models read every snapshot's signals and
# the scores read the models: per-snapshot ingest, signals and the text rewrite, then models,
# then scores.
per_snapshot_job = define_asset_job(
    "per_snapshot",
    selection=AssetSelection.groups("ingest", "signals", "dedup", "scrub"),
    description="Ingest, signals, dedup and the scrubbed text for one snapshot or source "
    "partition, with their checks.",
)
models_job = define_asset_job(
    "models",
    selection=AssetSelection.groups("models"),
    description="Pipeline-wide assets built from every snapshot's signals: the quality "
    "classifier, the cross-partition duplicate links, the eval-suite index and the takedown "
    "list.",
)
scores_job = define_asset_job(
    "scores",
    selection=AssetSelection.groups("scores", "decontamination"),
    description="Per-snapshot annotations from the pipeline-wide models: quality scores and "
    "eval-suite hits.",
)
dataset_job = define_asset_job(
    "dataset",
    selection=AssetSelection.groups("dataset"),
    description="One recipe's dataset version: tokenizer, mix and shards, with their checks.",
)
takedown_list_job = define_asset_job(
    "takedown_list",
    selection=AssetSelection.assets(TAKEDOWNS),
    description="Records the current takedown list's version (then run `dataset` per recipe).",
)
lineage_job = define_asset_job(
    "lineage",
    selection=AssetSelection.groups("lineage"),
    description="Refreshes the DuckDB lineage catalog over every output (its only writer).",
)
MAIN_JOBS = ("per_snapshot", "models", "scores", "dataset", "lineage")

defs = Definitions(
    assets=load_assets_from_modules(
        [importlib.import_module(f"corpus_assets.{name}") for name in ASSET_MODULES]),
    asset_checks=ASSET_CHECKS,
    jobs=[per_snapshot_job, models_job, scores_job, dataset_job, lineage_job,
          takedown_list_job],
    sensors=[register_partitions],
    resources=default_resources(),
)
