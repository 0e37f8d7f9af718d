"""Typed, validated `pipeline.yaml` and recipe files.

Both files are validated on load: an invalid file raises `ConfigError` naming the field and the
reason before any work starts. Every per-partition stage's version covers only its own section of
the pipeline and its own partition's entry (`PipelineConfig.section_hash`), so adding a snapshot or
a source re-versions nothing else.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from curation.decontamination import DecontaminationSettings
from curation.heuristics import HeuristicsSettings
from curation.minhash import MinHashSettings
from curation.pii import PiiSettings
from curation.quality import QualityClassifierSettings

SOURCE_PREFIX = "source:"
SNAPSHOT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ConfigError(ValueError):
    """A configuration file is invalid; the message names the file, the field and the reason."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- snapshot inputs -------------------------------------------------------------------------


class Sample(_Strict):
    """Which files of a long listing to take: the first N, or N drawn with a seed."""

    files: Annotated[int, Field(gt=0)]
    method: Literal["first", "random"] = "first"
    seed: int = 0


class LocalWarcInput(_Strict):
    """A local folder (every *.warc, *.warc.gz in it) or a glob pattern."""

    path: str


class S3WarcInput(_Strict):
    """Every WARC object under an S3 prefix."""

    s3_prefix: Annotated[str, Field(pattern=r"^s3://[^/]+/.*$")]


class ListingWarcInput(_Strict):
    """A Common Crawl `warc.paths.gz` listing (local path, s3:// or https://), relative paths
    resolved against `base`."""

    listing: str
    base: str = "s3://commoncrawl/"
    sample: Sample | None = None


WarcInput = LocalWarcInput | S3WarcInput | ListingWarcInput


class SnapshotConfig(_Strict):
    warc: WarcInput


class SourceConfig(_Strict):
    """A curated source: a folder or glob of JSONL, Parquet or plain-text files with a licence."""

    path: str
    format: Literal["jsonl", "parquet", "text"] = "jsonl"
    licence: Annotated[str, Field(min_length=1)]
    text_field: str = "text"
    url_field: str | None = None
    classifier_positive: bool = False


# --- the documents stage ---------------------------------------------------------------------


class TrafilaturaSettings(_Strict):
    """FineWeb's precision settings (datatrove's `Trafilatura` extractor) by default."""

    favor_precision: bool = True
    include_comments: bool = False
    include_tables: bool = True
    deduplicate: bool = True


class LanguagePrecheck(_Strict):
    """Cheap language pre-check before the expensive extraction; lenient on purpose: a page is
    kept when any target language scores at least `threshold` among the top predictions."""

    enabled: bool = True
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.10
    min_chars: Annotated[int, Field(ge=0)] = 200
    top_k: Annotated[int, Field(ge=1, le=20)] = 5


class RateBounds(_Strict):
    """The range a gate's rate (documents out over documents in) must fall in."""

    min: Annotated[float, Field(ge=0.0, le=1.0)] = 0.2
    max: Annotated[float, Field(ge=0.0, le=1.0)] = 1.0

    @model_validator(mode="after")
    def _ordered(self) -> RateBounds:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class UrlFilterSettings(_Strict):
    """Applied before extraction: a domain blocklist (a domain blocks its subdomains) and banned
    substrings of host and path, the project's default list and/or a file of your own."""

    domain_blocklist: str | None = None
    banned_substrings: str | None = None
    use_default_substrings: bool = True


class DocumentsSettings(_Strict):
    # hybrid: the fast path, resiliparse main content with boilerplate pruning
    # (curation/extract_fast.py; F1 and speed in benchmarks/results/extraction_frontier.md).
    extractor: Literal["trafilatura", "resiliparse", "hybrid"] = "trafilatura"
    trafilatura: TrafilaturaSettings = TrafilaturaSettings()
    timeout_seconds: Annotated[float, Field(gt=0)] = 5.0
    min_html_bytes: Annotated[int, Field(ge=0)] = 100
    max_html_bytes: Annotated[int, Field(gt=0)] = 2_000_000
    min_text_chars: Annotated[int, Field(ge=1)] = 1
    url_filter: UrlFilterSettings = UrlFilterSettings()
    languages: list[str] = []
    language_precheck: LanguagePrecheck = LanguagePrecheck()
    sample_size: Annotated[int, Field(ge=0, le=100)] = 5
    # Fraction of HTML responses that must become documents.
    survival: RateBounds = RateBounds()

    @field_validator("languages")
    @classmethod
    def _iso_codes(cls, languages: list[str]) -> list[str]:
        for code in languages:
            if not re.fullmatch(r"[a-z]{2,3}", code):
                raise ValueError(f"{code!r} is not an ISO 639 language code such as 'en'")
        return languages


class LanguageSettings(_Strict):
    """fastText lid.176 over the whole document; keeps the target languages above threshold."""

    languages: Annotated[list[str], Field(min_length=1)] = ["en"]
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.65
    thresholds: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = {}
    # Total variation distance between a partition's language mix and the next lower
    # snapshot's above which the drift check warns.
    max_drift: Annotated[float, Field(gt=0.0, le=1.0)] = 0.25

    @field_validator("languages")
    @classmethod
    def _codes(cls, languages: list[str]) -> list[str]:
        for code in languages:
            if not re.fullmatch(r"[a-z]{2,3}", code):
                raise ValueError(f"{code!r} is not an ISO 639 language code such as 'en'")
        return languages

    def threshold_for(self, language: str) -> float:
        return self.thresholds.get(language, self.threshold)


class DedupSettings(_Strict):
    """URL, exact, near-duplicate and boilerplate-line dedup (Llama 3's three granularities)."""

    minhash: MinHashSettings = MinHashSettings()
    # A band bucket larger than this is capped to a deterministic sample (counted in metadata).
    max_bucket_size: Annotated[int, Field(ge=2)] = 10_000
    # A normalised line in more than this many documents of a partition is boilerplate
    # (Llama 3: more than 6 in buckets of 30M documents; scale it with the partition size).
    line_max_documents: Annotated[int, Field(ge=1)] = 6
    line_min_chars: Annotated[int, Field(ge=1)] = 5
    # Near-duplicate links across partitions in cross_dedup (URL and exact links always).
    cross_near_duplicates: bool = False


class Gates(_Strict):
    """Bounds for the verdict-rate checks of the annotating stages."""

    heuristics_keep: RateBounds = RateBounds(min=0.05, max=1.0)
    # Share of a partition's documents a dedup stage may mark as duplicates.
    max_duplicate_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9
    min_classifier_roc_auc: Annotated[float, Field(ge=0.5, le=1.0)] = 0.8


# --- the pipeline ----------------------------------------------------------------------------


class PipelineConfig(_Strict):
    version: Literal[1] = 1
    snapshots: dict[str, SnapshotConfig]
    sources: dict[str, SourceConfig] = {}
    documents: DocumentsSettings = DocumentsSettings()
    language: LanguageSettings = LanguageSettings()
    heuristics: HeuristicsSettings = HeuristicsSettings()
    dedup: DedupSettings = DedupSettings()
    quality: QualityClassifierSettings | None = None
    decontamination: DecontaminationSettings = DecontaminationSettings()
    pii: PiiSettings = PiiSettings()
    gates: Gates = Gates()
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("snapshots")
    @classmethod
    def _snapshot_ids(cls, snapshots: dict[str, SnapshotConfig]) -> dict[str, SnapshotConfig]:
        for snapshot in snapshots:
            if not SNAPSHOT_ID.match(snapshot):
                raise ValueError(f"{snapshot!r} is not a valid snapshot id (letters, digits, -_.)")
        return snapshots

    @field_validator("sources")
    @classmethod
    def _source_names(cls, sources: dict[str, SourceConfig]) -> dict[str, SourceConfig]:
        for name in sources:
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name):
                raise ValueError(f"{name!r} is not a valid source name (lower-case, digits, -_)")
        return sources

    @model_validator(mode="after")
    def _training_snapshots_declared(self) -> PipelineConfig:
        for snapshot in self.quality.training_snapshots if self.quality else []:
            if snapshot not in self.snapshots:
                raise ValueError(f"quality.training_snapshots: {snapshot!r} is not a snapshot "
                                 "declared under snapshots")
        return self

    def partition_keys(self) -> list[str]:
        """Every partition of the `snapshot` set: snapshot ids, then `source:NAME` keys."""
        return sorted(self.snapshots) + [SOURCE_PREFIX + name for name in sorted(self.sources)]

    def resolve(self, path: str) -> str:
        """A path relative to the pipeline file's folder; URIs are returned unchanged."""
        if "://" in path or Path(path).is_absolute():
            return path
        return str(self.base_dir / path)

    def partition_entry(self, partition: str) -> SnapshotConfig | SourceConfig:
        if partition.startswith(SOURCE_PREFIX):
            name = partition.removeprefix(SOURCE_PREFIX)
            if name not in self.sources:
                raise KeyError(f"source {name!r} is not declared in pipeline.yaml")
            return self.sources[name]
        if partition not in self.snapshots:
            raise KeyError(f"snapshot {partition!r} is not declared in pipeline.yaml")
        return self.snapshots[partition]

    def section_hash(self, section: str, partition: str | None = None) -> str:
        """Hash of one pipeline section plus, optionally, one partition's entry."""
        payload: dict[str, Any] = {"section": getattr(self, section).model_dump(mode="json")}
        if partition is not None:
            payload["partition"] = self.partition_entry(partition).model_dump(mode="json")
        return stable_hash(payload)


# --- recipes ---------------------------------------------------------------------------------


class Phase(_Strict):
    """A share of the tokens (`fraction`) with its own source weights; an anneal phase can ask
    for a higher-quality web mix (`quality_top_fraction` of the selected web documents)."""

    name: Annotated[str, Field(min_length=1)]
    fraction: Annotated[float, Field(gt=0, le=1)]
    weights: dict[str, Annotated[float, Field(ge=0)]]
    quality_top_fraction: Annotated[float, Field(gt=0, le=1)] | None = None


class TokenizerSpec(_Strict):
    """A pinned tokenizer.json, or a byte-level BPE trained with `vocab_size`."""

    path: str | None = None
    train_vocab_size: Annotated[int, Field(ge=256)] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TokenizerSpec:
        if (self.path is None) == (self.train_vocab_size is None):
            raise ValueError("give exactly one of 'path' or 'train_vocab_size'")
        return self


class Selection(_Strict):
    """What the mix keeps of the annotated documents (applied by `mix`, never upstream)."""

    languages: list[str] | None = None
    drop_contaminated: bool = True
    quality_top_fraction: Annotated[float, Field(gt=0, le=1)] | None = None


class RecipeConfig(_Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]
    snapshots: Annotated[list[str], Field(min_length=1)]
    sources: list[str] = []
    selection: Selection = Selection()
    cluster_policy: Literal["earliest", "longest", "quality"] = "earliest"
    phases: Annotated[list[Phase], Field(min_length=1)]
    max_epochs: Annotated[float, Field(ge=1)] = 4.0
    # Tokens of the dataset; None: as many as the sources allow without passing max_epochs.
    total_tokens: Annotated[int, Field(ge=1)] | None = None
    tokenizer: TokenizerSpec
    seq_len: Annotated[int, Field(ge=8)] = 2048
    # concat: the token stream cut every seq_len; best_fit: documents kept whole where they
    # fit, the padding counted in the manifest.
    packing: Literal["concat", "best_fit"] = "concat"
    tokens_per_shard: Annotated[int, Field(ge=1024)] = 1 << 26
    seed: int = 0

    @model_validator(mode="after")
    def _phases_sum_to_one(self) -> RecipeConfig:
        total = sum(phase.fraction for phase in self.phases)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"phases: fractions sum to {total:g}, not 1")
        return self

    def check_against(self, pipeline: PipelineConfig) -> None:
        """Fails when the recipe names snapshots or sources the pipeline does not declare."""
        for index, snapshot in enumerate(self.snapshots):
            if snapshot not in pipeline.snapshots:
                raise ConfigError(
                    f"recipe {self.name}: snapshots.{index}: {snapshot!r} is not a snapshot "
                    "declared in pipeline.yaml"
                )
        for index, source in enumerate(self.sources):
            if source not in pipeline.sources:
                raise ConfigError(
                    f"recipe {self.name}: sources.{index}: {source!r} is not a source declared "
                    "in pipeline.yaml"
                )
        known = {"web", *self.sources}
        for phase in self.phases:
            for name in phase.weights:
                if name not in known:
                    raise ConfigError(
                        f"recipe {self.name}: phases.{phase.name}.weights.{name}: not 'web' or "
                        "one of the recipe's sources"
                    )


# --- loading and hashing ---------------------------------------------------------------------


def stable_hash(payload: Any, length: int = 16) -> str:
    """sha256 of canonical JSON: key order and whitespace never change a version."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from error


def _explain(path: Path, error: ValidationError) -> ConfigError:
    lines = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"{path}: {field}: {item['msg']}")
    return ConfigError("\n".join(lines))


def load_pipeline(path: str | Path) -> PipelineConfig:
    path = Path(path)
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: (top level): expected a mapping of settings")
    try:
        pipeline = PipelineConfig.model_validate({**raw, "base_dir": path.resolve().parent})
    except ValidationError as error:
        raise _explain(path, error) from None
    return _with_resolved_files(pipeline, path)


def _with_resolved_files(pipeline: PipelineConfig, path: Path) -> PipelineConfig:
    """Files the stages read are resolved against the pipeline's folder and must exist now,
    not halfway through a run."""
    url_filter = pipeline.documents.url_filter
    resolved = {}
    for name in ("domain_blocklist", "banned_substrings"):
        value = getattr(url_filter, name)
        if value is None:
            continue
        resolved[name] = pipeline.resolve(value)
        if "://" not in resolved[name] and not Path(resolved[name]).is_file():
            raise ConfigError(
                f"{path}: documents.url_filter.{name}: file not found: {resolved[name]}")
    documents = pipeline.documents.model_copy(
        update={"url_filter": url_filter.model_copy(update=resolved)})
    return pipeline.model_copy(update={"documents": documents,
                                       "decontamination": _resolved_evals(pipeline, path)})


def _resolved_evals(pipeline: PipelineConfig, path: Path) -> DecontaminationSettings:
    benchmarks = []
    for index, benchmark in enumerate(pipeline.decontamination.benchmarks):
        resolved = pipeline.resolve(benchmark.path)
        if not glob.glob(resolved):
            raise ConfigError(f"{path}: decontamination.benchmarks.{index}.path: no file "
                              f"matches {resolved}")
        benchmarks.append(benchmark.model_copy(update={"path": resolved}))
    return pipeline.decontamination.model_copy(update={"benchmarks": benchmarks})


def recipe_names(folder: str | Path) -> list[str]:
    """The recipes of a folder: the stems of its `*.yaml` files (the `recipe` partitions)."""
    return sorted(path.stem for path in Path(folder).glob("*.yaml"))


def load_recipe(path: str | Path, pipeline: PipelineConfig | None = None) -> RecipeConfig:
    path = Path(path)
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: (top level): expected a mapping of settings")
    try:
        recipe = RecipeConfig.model_validate(raw)
    except ValidationError as error:
        raise _explain(path, error) from None
    if pipeline is not None:
        recipe.check_against(pipeline)
    return recipe


def dataset_version(
    recipe: RecipeConfig,
    pipeline: PipelineConfig,
    *,
    takedown_version: str,
    input_data_versions: dict[str, str],
    code_versions: dict[str, str],
) -> str:
    """The dataset version: the same id always means the same bytes (architecture.md).

    Covers the recipe, the pipeline sections and partition entries it depends on, the takedown
    list version, the data versions of its inputs and the code versions (with library versions)
    of the assets that build it. Run configuration (root, workers, backend) is never included.
    """
    partitions = [*recipe.snapshots, *(SOURCE_PREFIX + s for s in recipe.sources)]
    sections = {
        "documents": pipeline.documents.model_dump(mode="json"),
        "partitions": {p: pipeline.partition_entry(p).model_dump(mode="json") for p in partitions},
    }
    return stable_hash(
        {
            "recipe": recipe.model_dump(mode="json"),
            "pipeline": sections,
            "takedowns": takedown_version,
            "inputs": dict(sorted(input_data_versions.items())),
            "code": dict(sorted(code_versions.items())),
        }
    )
