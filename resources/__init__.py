"""Resources: configuration loading, storage and compute. Run configuration, never hashed.

The embedded default is a local folder (`./data`); an `s3://bucket/prefix` root switches every
asset to S3 through dagster-aws's `S3Resource`, set in run configuration, not at import time.
"""


import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource, InitResourceContext
from dagster_aws.s3 import S3Resource
from pydantic import Field, PrivateAttr

from curation.config import PipelineConfig, RecipeConfig, load_pipeline, load_recipe, recipe_names
from curation.executor import use_ray
from curation.storage import InputReader, Store, open_store
from curation.tasks import PartitionLock, hold_locks


class PipelineResource(ConfigurableResource):
    """The deployment's `pipeline.yaml` and recipes, validated when a run first uses them."""

    path: str = Field(default="pipeline.yaml", description="Path to pipeline.yaml")
    recipes: str = Field(default="recipes", description="Folder of recipe files (NAME.yaml; "
                         "NAME is the recipe partition), relative to pipeline.yaml")
    _config: PipelineConfig | None = PrivateAttr(default=None)

    def load(self) -> PipelineConfig:
        if self._config is None:
            self._config = load_pipeline(self.path)
        return self._config

    @property
    def recipes_folder(self) -> Path:
        return Path(self.path).resolve().parent / self.recipes

    def recipe_path(self, name: str) -> Path:
        return self.recipes_folder / f"{name}.yaml"

    def recipe(self, name: str) -> RecipeConfig:
        """The recipe partition `name`, validated against the pipeline."""
        return load_recipe(self.recipe_path(name), self.load())

    def recipe_names(self) -> list[str]:
        return recipe_names(self.recipes_folder)


@dataclass(frozen=True)
class S3ClientFactory:
    """Makes a boto3 client through dagster-aws's `S3Resource` from its plain settings; unlike
    the resource inside a run, it pickles, so worker processes make their own clients."""

    settings: tuple[tuple[str, Any], ...]

    def __call__(self) -> Any:
        return S3Resource(**dict(self.settings)).get_client()


class StorageResource(ConfigurableResource):
    """The storage root: a local folder or `s3://bucket/prefix`; S3 through dagster-aws."""

    root: str = Field(default="data", description="Local folder or s3://bucket/prefix")
    s3: S3Resource

    def _client_factory(self) -> "S3ClientFactory":
        settings = {name: getattr(self.s3, name) for name in S3Resource.model_fields}
        return S3ClientFactory(tuple((k, v) for k, v in settings.items() if v is not None))

    @cached_property
    def store(self) -> Store:
        return open_store(self.root, self._client_factory())

    @cached_property
    def reader(self) -> InputReader:
        return InputReader(self._client_factory())

    def locked(self, run_id: str, asset: str,
               partition: str = "all") -> AbstractContextManager[list[PartitionLock]]:
        """Holds the lock of one partition of a single-step stage while it writes: a second
        run waits for it (logging whom it waits for), then gives up naming the holder."""
        return hold_locks(self.store, [asset], partition, run_id=run_id)


class CatalogResource(ConfigurableResource):
    """Where the lineage catalog (a DuckDB file) lives; only the `catalog` step writes it."""

    path: str = Field(default="data/catalog.duckdb", description="Path of the DuckDB file")


class ComputeResource(ConfigurableResource):
    """Where the per-document work of a partition runs: the local process pool, or a Ray
    cluster when `ray_address` is set ("local" starts one in the run process)."""

    workers: int = Field(default=2, ge=0, description="Worker processes (0: in the run process)")
    ray_address: str | None = Field(default=None,
                                    description="Ray cluster address, or 'local'; None: no Ray")

    def setup_for_execution(self, context: InitResourceContext) -> None:
        use_ray(self.ray_address)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        use_ray(None)


def default_resources() -> dict[str, ConfigurableResource]:
    """Defaults, overridable per run in run configuration; runs that take no run configuration
    (backfills launched by the daemon or the UI) read CORPUS_PIPELINE, CORPUS_ROOT and
    CORPUS_WORKERS (`corpus ui` sets the first two to its deployment's).
    S3 settings come from the standard AWS environment (AWS_ENDPOINT_URL, AWS_REGION,
    credentials); botocore retries once only, so the store's own bounded retry policy
    (`curation.storage.RetryPolicy`) is the one that counts."""
    root = os.environ.get("CORPUS_ROOT", "data")
    return {
        "pipeline": PipelineResource(path=os.environ.get("CORPUS_PIPELINE", "pipeline.yaml")),
        "storage": StorageResource(root=root, s3=S3Resource(max_attempts=1)),
        "compute": ComputeResource(workers=int(os.environ.get("CORPUS_WORKERS", "2"))),
        # Beside a local root, as the CLI's runs put it; an S3 root keeps a local file.
        "catalog": CatalogResource(path=str(Path(root) / "catalog.duckdb")
                                   if "://" not in root else "data/catalog.duckdb"),
    }
