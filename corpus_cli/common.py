"""What several command groups share: the deployment's pipeline and recipes, registering their
partitions, and the storage root. The command modules import this one and never each other.
"""

from __future__ import annotations

from pathlib import Path

from corpus_cli.deployment import HOW_TO_CHOOSE, fail, open_instance
from curation.config import ConfigError, PipelineConfig, load_pipeline, load_recipe, recipe_names
from curation.storage import Store


def load_pipeline_or_exit(path: Path) -> PipelineConfig:
    """The validated pipeline; exit 2 naming the problem when it is missing or invalid."""
    if not path.is_file():
        raise fail(f"{path.resolve()}: no such file. {HOW_TO_CHOOSE}")
    try:
        return load_pipeline(path)
    except ConfigError as error:
        raise fail(str(error)) from None


def validated_recipes(pipeline: Path) -> list[str]:
    """The recipe partitions: every recipe beside the pipeline, validated now."""
    config = load_pipeline_or_exit(pipeline)
    folder = pipeline.resolve().parent / "recipes"
    for name in recipe_names(folder):
        try:
            load_recipe(folder / f"{name}.yaml", config)
        except ConfigError as error:
            raise fail(str(error)) from None
    return recipe_names(folder)


def register(pipeline: Path) -> list[str]:
    """Adds the pipeline's partitions and the recipes beside it to the instance; returns the
    ones that were new."""
    from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME

    config = load_pipeline_or_exit(pipeline)
    instance = open_instance()
    added = []
    for name, declared in ((SNAPSHOT_PARTITIONS_NAME, config.partition_keys()),
                           (RECIPE_PARTITIONS_NAME, validated_recipes(pipeline))):
        known = set(instance.get_dynamic_partitions(name))
        missing = [key for key in declared if key not in known]
        if missing:
            instance.add_dynamic_partitions(name, missing)
        added += missing
    return added


def open_root(root: str) -> Store:
    """The storage root (a folder or `s3://bucket/prefix`) as the runs open it: S3 through
    dagster-aws with the standard AWS environment."""
    from dagster_aws.s3 import S3Resource

    from resources import StorageResource

    return StorageResource(root=root, s3=S3Resource()).store
