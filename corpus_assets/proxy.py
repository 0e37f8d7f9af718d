"""`proxy_eval[recipe]`: the ablation gate (opt-in; the main job skips it).

A small decoder-only model is trained on the recipe's shards through the project's loader for a
fixed token budget (the same for every recipe: matched compute), then scored on held-out
reference text and zero-shot multiple-choice tasks (`curation.proxy`). Needs torch, which stays
out of the lock file (`scripts/test.sh` installs a CPU build). With `baseline` set, the metadata
also holds the side-by-side comparison and the verdict (`corpus ablation` prints the same).
"""

import json
import tempfile
from pathlib import Path

from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from curation.graph import PROXY_EVAL, SHARDS, TOKENIZER
from curation.partition import PartitionLayout
from curation.proxy.compare import ComparisonRule, compare, render_comparison, render_report
from curation.proxy.reports import ProxyReport, ProxySettings
from curation.proxy.scoring import run_proxy_eval
from curation.stages.dataset import load_stored_tokenizer, local_shards, shards_prefix
from curation.storage import Store
from partitions import recipe_partitions
from resources import PipelineResource, StorageResource

# Opt-in assets carry this group and stay out of the main job.
OPT_IN_GROUP = "opt_in"


class ProxyEvalConfig(Config):
    evals_dir: str | None = Field(
        default=None, description="Folder of an llm-foundry eval export (the layout of "
        "shared/data/evals) for the built-in benchmarks; those declared with fields in "
        "pipeline.yaml's decontamination.benchmarks need none")
    heldout: str = Field(description="A text file no recipe trains on (held-out loss)")
    settings: dict = Field(default_factory=dict,
                           description="ProxySettings overrides, e.g. {token_budget: 65536}")
    gpu: bool = Field(default=False, description="Start from ProxySettings.gpu()")
    baseline: str | None = Field(default=None, description="A recipe to compare against")


def report_key(recipe: str) -> str:
    return f"{PROXY_EVAL}/{recipe}/report.json"


def load_report(store: Store, recipe: str) -> ProxyReport:
    return ProxyReport.from_json(store.read_bytes(report_key(recipe)).decode())


def ablation(store: Store, baseline: str, candidate: str) -> tuple[str, bool]:
    """The side-by-side table and whether the candidate ships, by the default rule."""
    comparison = compare(load_report(store, baseline), load_report(store, candidate),
                         ComparisonRule())
    return render_comparison(comparison), comparison.ships


@asset(
    name=PROXY_EVAL,
    partitions_def=recipe_partitions,
    deps=[SHARDS, TOKENIZER],
    group_name=OPT_IN_GROUP,
    code_version="proxy-eval-1",
    description="Trains a small proxy LM on the recipe's shards at a fixed token budget and "
    "scores it (held-out loss, zero-shot multiple choice with bootstrap intervals); opt-in.",
)
def proxy_eval(context: AssetExecutionContext, config: ProxyEvalConfig,
               storage: StorageResource, pipeline: PipelineResource) -> MaterializeResult:
    name = context.partition_key
    store = storage.store
    base = (ProxySettings.gpu() if config.gpu else ProxySettings()).model_dump()
    overrides = dict(config.settings)
    base["eval"] |= overrides.pop("eval", {})
    settings = ProxySettings.model_validate(base | overrides)  # validated, unlike model_copy
    version = PartitionLayout(store, SHARDS, name).complete_manifest().version
    heldout = [Path(config.heldout).read_text(encoding="utf-8")]
    with tempfile.TemporaryDirectory(prefix="proxy-") as folder:
        shards = local_shards(store, shards_prefix(version), folder)
        report = run_proxy_eval(shards, load_stored_tokenizer(store, name), heldout,
                                config.evals_dir, settings,
                                pipeline.load().decontamination.benchmarks)
    store.write_bytes(report_key(name), report.to_json().encode())
    metadata = {"dataset_version": MetadataValue.text(version),
                "report": MetadataValue.md(render_report(report)),
                "mean_accuracy": MetadataValue.float(round(report.mean_accuracy, 4)),
                "tokens_trained": MetadataValue.int(report.tokens_trained),
                "summary": MetadataValue.json(json.loads(report.to_json())["heldout"])}
    if config.baseline:
        table, ships = ablation(store, config.baseline, name)
        metadata["comparison"] = MetadataValue.md(table)
        metadata["ships"] = MetadataValue.bool(ships)
    return MaterializeResult(metadata=metadata)
