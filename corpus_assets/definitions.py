"""The code location: every asset, check, job, sensor and resource in one place."""

from dagster import AssetSelection, Definitions, define_asset_job, load_asset_checks_from_modules

import checks.dataset
import checks.decontamination
import checks.dedup
import checks.documents
import checks.heuristics
import checks.language
import checks.quality
import checks.scrubbed
import checks.warc_files
from corpus_assets.dataset import mix, shards, tokenizer
from corpus_assets.decontamination import decontaminated, eval_suite
from corpus_assets.dedup import cross_dedup, dedup_clusters, exact_dedup, line_dedup, url_dedup
from corpus_assets.documents import documents
from corpus_assets.heuristics import heuristics
from corpus_assets.language import language
from corpus_assets.lineage import catalog, takedowns
from corpus_assets.proxy import proxy_eval
from corpus_assets.quality import quality_classifier, quality_scores
from corpus_assets.report import report
from corpus_assets.scrubbed import scrubbed
from corpus_assets.sensors import register_partitions
from corpus_assets.warc_files import warc_files
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
    selection=AssetSelection.assets("takedowns"),
    description="Records the current takedown list's version (then run `dataset` per recipe).",
)
lineage_job = define_asset_job(
    "lineage",
    selection=AssetSelection.groups("lineage"),
    description="Refreshes the DuckDB lineage catalog over every output (its only writer).",
)
MAIN_JOBS = ("per_snapshot", "models", "scores", "dataset", "lineage")

defs = Definitions(
    assets=[warc_files, documents, language, heuristics, url_dedup, exact_dedup,
            dedup_clusters, line_dedup, scrubbed, cross_dedup, quality_classifier,
            quality_scores, eval_suite, decontaminated, takedowns, tokenizer, mix, shards, report,
            catalog, proxy_eval],
    asset_checks=load_asset_checks_from_modules(
        [checks.warc_files, checks.documents, checks.language, checks.heuristics,
         checks.dedup, checks.scrubbed, checks.quality, checks.decontamination,
         checks.dataset]
    ),
    jobs=[per_snapshot_job, models_job, scores_job, dataset_job, lineage_job,
          takedown_list_job],
    sensors=[register_partitions],
    resources=default_resources(),
)
