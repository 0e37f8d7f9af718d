"""Resources: configuration loading, storage and compute. Run configuration, never hashed.

The embedded default is a local folder (`./data`); an `s3://bucket/prefix` root switches every
asset to S3 through dagster-aws's `S3Resource`, set in run configuration, not at import time.

A setting left unset in run configuration is read from the environment when a run starts
(`CORPUS_PIPELINE`, `CORPUS_ROOT`, `CORPUS_WORKERS`, through `dagster.EnvVar`), never when the
definitions are imported: the code location loads once and its runs follow the environment
they start in. A plain `EnvVar` field would refuse a run whose variable is unset, so the
fields default to None and `create_resource` fills them in, with the defaults below.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Self

from dagster import ConfigurableResource, EnvVar, InitResourceContext
from dagster_aws.s3 import S3Resource
from pydantic import Field, PrivateAttr, model_validator

from curation.config import PipelineConfig, RecipeConfig, load_pipeline, load_recipe, recipe_names
from curation.duck import (
    DEFAULT_MEMORY_GB,
    MEMORY_ENV,
    MIN_TASK_MEMORY_GB,
    restore_budget,
    use_budget,
)
from curation.executor import use_ray
from curation.graph import ALL
from curation.storage import InputReader, S3Settings, Store, open_store
from curation.tasks import PartitionLock, hold_locks

PIPELINE_ENV, ROOT_ENV, WORKERS_ENV = "CORPUS_PIPELINE", "CORPUS_ROOT", "CORPUS_WORKERS"
RAY_ENV = "CORPUS_RAY_ADDRESS"
DEFAULT_PIPELINE, DEFAULT_ROOT, DEFAULT_WORKERS = "pipeline.yaml", "data", 2
CATALOG_FILE = "catalog.duckdb"


def root_from_environment() -> str:
    return EnvVar(ROOT_ENV).get_value(DEFAULT_ROOT)


def catalog_beside(root: str) -> str:
    """The catalog file beside a local root, as the CLI's runs put it; an S3 root keeps one in
    the default local root."""
    return str(Path(root if "://" not in root else DEFAULT_ROOT) / CATALOG_FILE)


class EnvironmentResource(ConfigurableResource):
    """A resource whose unset (None) fields are read from the environment when a run starts:
    `ENVIRONMENT` maps each such field to what reads it."""

    ENVIRONMENT: ClassVar[dict[str, Callable[[], Any]]] = {}

    def from_environment(self) -> Self:
        """This resource with every unset field read from the environment now."""
        unset = {name: read() for name, read in self.ENVIRONMENT.items()
                 if getattr(self, name) is None}
        return self.model_copy(update=unset) if unset else self

    def create_resource(self, context: InitResourceContext) -> Self:
        return self.from_environment()


class PipelineResource(EnvironmentResource):
    """The deployment's `pipeline.yaml` and recipes, validated when a run first uses them."""

    ENVIRONMENT: ClassVar[dict[str, Callable[[], Any]]] = {
        "path": lambda: EnvVar(PIPELINE_ENV).get_value(DEFAULT_PIPELINE)}

    path: str | None = Field(default=None, description=f"Path to pipeline.yaml; unset: "
                             f"${PIPELINE_ENV} when a run starts, else {DEFAULT_PIPELINE}")
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


class StorageResource(EnvironmentResource):
    """The storage root: a local folder or `s3://bucket/prefix`; S3 through dagster-aws."""

    ENVIRONMENT: ClassVar[dict[str, Callable[[], Any]]] = {"root": root_from_environment}

    root: str | None = Field(default=None, description=f"Local folder or s3://bucket/prefix; "
                             f"unset: ${ROOT_ENV} when a run starts, else {DEFAULT_ROOT}")
    s3: S3Resource

    def _client_factory(self) -> S3Settings:
        return S3Settings(**{name: getattr(self.s3, name) for name in S3Resource.model_fields})

    @cached_property
    def store(self) -> Store:
        return open_store(self.root, self._client_factory())

    @cached_property
    def reader(self) -> InputReader:
        return InputReader(self._client_factory())

    def locked(self, run_id: str, asset: str,
               partition: str = ALL) -> AbstractContextManager[list[PartitionLock]]:
        """Holds the lock of one partition of a single-step stage while it writes: a second
        run waits for it (logging whom it waits for), then gives up naming the holder."""
        return hold_locks(self.store, [asset], partition, run_id=run_id)


class CatalogResource(EnvironmentResource):
    """Where the lineage catalog (a DuckDB file) lives; only the `catalog` step writes it."""

    ENVIRONMENT: ClassVar[dict[str, Callable[[], Any]]] = {
        "path": lambda: catalog_beside(root_from_environment())}

    path: str | None = Field(default=None, description=f"Path of the DuckDB file; unset: "
                             f"{CATALOG_FILE} in ${ROOT_ENV} when a run starts (a local root), "
                             f"else in {DEFAULT_ROOT}")


class ComputeResource(EnvironmentResource):
    """Where the per-document work of a partition runs: the local process pool, or a Ray
    cluster when `ray_address` is set ("local" starts one in the run process)."""

    ENVIRONMENT: ClassVar[dict[str, Callable[[], Any]]] = {
        "workers": lambda: int(EnvVar(WORKERS_ENV).get_value(str(DEFAULT_WORKERS))),
        "ray_address": lambda: EnvVar(RAY_ENV).get_value() or None}

    workers: int | None = Field(default=None, ge=0, description=f"Worker processes (0: in the "
                                f"run process); unset: ${WORKERS_ENV} when a run starts, else "
                                f"{DEFAULT_WORKERS}")
    ray_address: str | None = Field(default=None,
                                    description=f"Ray cluster address, or 'local'; unset: "
                                    f"${RAY_ENV} when a run starts, else no Ray")
    memory_gb: float | None = Field(
        default=None, ge=MIN_TASK_MEMORY_GB, description=f"Memory one global step may hold "
        f"(GB) before it spills to disk, shared by the tasks it runs at once on a machine "
        f"(docs/scale.md); at least {MIN_TASK_MEMORY_GB} per worker; unset: ${MEMORY_ENV}, "
        f"else {DEFAULT_MEMORY_GB}")
    spill_directory: str | None = Field(
        default=None, description="Local folder the global steps spill to; unset: the system "
        "temporary folder")

    @model_validator(mode="after")
    def _budget_per_worker(self) -> Self:
        if self.memory_gb is not None and self.workers and \
                self.memory_gb / self.workers < MIN_TASK_MEMORY_GB:
            raise ValueError(
                f"memory_gb={self.memory_gb} shared by workers={self.workers} leaves each task "
                f"under {MIN_TASK_MEMORY_GB} GB: raise memory_gb or lower workers")
        return self

    _replaced_budget: dict[str, str] = PrivateAttr(default_factory=dict)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        use_ray(self.ray_address)
        self._replaced_budget = use_budget(self.memory_gb, self.spill_directory)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        # A process that runs several jobs in process (the CLI, tests) gets its budget back.
        use_ray(None)
        restore_budget(self._replaced_budget)


def default_resources() -> dict[str, ConfigurableResource]:
    """Defaults, overridable per run in run configuration; what a run's configuration leaves
    unset (backfills launched by the daemon or the UI set nothing) is read when the run starts
    from CORPUS_PIPELINE, CORPUS_ROOT and CORPUS_WORKERS (`corpus ui` sets the first two to
    its deployment's). S3 settings come from the standard AWS environment (AWS_ENDPOINT_URL,
    AWS_REGION, credentials); botocore retries once only, so the store's own bounded retry
    policy (`curation.storage.RetryPolicy`) is the one that counts."""
    return {
        "pipeline": PipelineResource(),
        "storage": StorageResource(s3=S3Resource(max_attempts=1)),
        "compute": ComputeResource(),
        "catalog": CatalogResource(),
    }
