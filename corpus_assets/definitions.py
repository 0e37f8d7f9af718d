"""The code location: every asset, check, job, sensor and resource in one place."""


from dagster import AssetSelection, Definitions, define_asset_job, load_asset_checks_from_modules

import checks.documents
import checks.language
import checks.warc_files
from corpus_assets.documents import documents
from corpus_assets.language import language
from corpus_assets.sensors import register_partitions
from corpus_assets.warc_files import warc_files
from resources import default_resources

# Opt-in assets (the ablation gate) carry this group and stay out of the main job.
OPT_IN_GROUP = "opt_in"

per_snapshot_job = define_asset_job(
    "per_snapshot",
    selection=AssetSelection.all() - AssetSelection.groups(OPT_IN_GROUP),
    description="Every per-snapshot asset and its checks, for one snapshot or source partition.",
)

defs = Definitions(
    assets=[warc_files, documents, language],
    asset_checks=load_asset_checks_from_modules(
        [checks.warc_files, checks.documents, checks.language]
    ),
    jobs=[per_snapshot_job],
    sensors=[register_partitions],
    resources=default_resources(),
)
