"""Typed, validated `pipeline.yaml` and recipe files.

Both files are validated on load: an invalid file raises `ConfigError` naming the field and the
reason before any work starts. Every per-partition stage's version covers only its own section of
the pipeline and its own partition's entry (`PipelineConfig.section_hash`), so adding a snapshot or
a source re-versions nothing else.
"""

from __future__ import annotations

import difflib
import glob
import hashlib
import json
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pycountry
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from curation.decontamination import DecontaminationSettings
from curation.dedup import Verification
from curation.domains import DomainSettings
from curation.embeddings import EmbeddingSettings
from curation.graph import CORRECTNESS_CHECKS, TUNABLE_CHECKS
from curation.heuristics import SUITES, Annotator, HeuristicsSettings
from curation.minhash import MinHashSettings
from curation.pii import PiiSettings
from curation.quality import QualityClassifierSettings
from curation.semantic_dedup import SemanticDedupSettings

SOURCE_PREFIX = "source:"
SNAPSHOT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a configuration: the file, the field, what is wrong, how to fix it."""

    file: str
    field: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = ": ".join(part for part in (self.file, self.field, self.message) if part)
        return f"{text}; {self.fix}" if self.fix else text


class ConfigError(ValueError):
    """A configuration file is invalid; the message names the file, the field and the reason,
    one problem a line (`problems` holds them)."""

    def __init__(self, problems: str | list[Problem]) -> None:
        self.problems = [Problem("", "", problems)] if isinstance(problems, str) \
            else list(problems)
        super().__init__("\n".join(map(str, self.problems)))


ISO_CODE = re.compile(r"[a-z]{2,3}")


def check_language_codes(codes: list[str]) -> list[str]:
    """ISO 639 codes such as 'en' (what lid.176 predicts), else a ValueError that suggests the
    code of a language name ('english': did you mean 'en'?)."""
    bad = bad_language_code(codes)
    if bad:
        raise ValueError("; ".join(part for part in bad if part))
    return codes


def bad_language_code(codes: list[str]) -> tuple[str, str] | None:
    """(what is wrong, a suggestion or "") for the first code that is not ISO 639."""
    for code in codes:
        if not ISO_CODE.fullmatch(code):
            return f"{code!r} is not an ISO 639 language code such as 'en'", _suggested_code(code)
    return None


def _suggested_code(name: str) -> str:
    try:
        language = pycountry.languages.lookup(name.strip())
    except LookupError:
        return ""
    code = getattr(language, "alpha_2", None) or language.alpha_3
    return f"did you mean {code!r}?"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- snapshot inputs -------------------------------------------------------------------------


class Sample(_Strict):
    """Which files of a long listing to take: the first N, or N drawn with a seed."""

    files: Annotated[int, Field(gt=0)]
    method: Literal["first", "random"] = "first"
    seed: int = 0


class LocalWarcInput(_Strict):
    """A local folder (every *.warc, *.warc.gz directly in it; in its subfolders too with
    `recursive: true`) or a glob pattern (`**` in the pattern descends)."""

    path: str
    # Off by default: a snapshot folder's subfolders often hold other crawls.
    recursive: bool = False

    @model_validator(mode="after")
    def _recursion_of_a_folder(self) -> LocalWarcInput:
        if self.recursive and glob.has_magic(self.path):
            raise ValueError(f"recursive applies to a folder, and {self.path!r} is a glob: "
                             "write ** in the pattern to descend (e.g. crawl/**/*.warc.gz)")
        return self


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
    """A curated source: a folder or glob of JSONL, Parquet or plain-text files with a licence,
    or (`format: files`) a folder whose every file is one document, as a code repository is.

    `kind: code` makes it a code source (docs/architecture.md, "Code"): language ID and the
    prose suites give way to the language of the file's extension and the code suite, near
    duplicates come from code shingles, eval items are looked for in code tokens too, and a
    recipe's licence allow-list judges each file. Code rows (JSONL or Parquet, as The Stack
    ships) name the file's path, repository and licence in `path_field`, `repository_field`
    and `licence_field`; `licence` is then the licence of rows without one."""

    path: str
    format: Literal["jsonl", "parquet", "text", "files"] = "jsonl"
    kind: Literal["text", "code"] = "text"
    licence: Annotated[str, Field(min_length=1)]
    text_field: str = "text"
    url_field: str | None = None
    path_field: str | None = None
    repository_field: str | None = None
    licence_field: str | None = None
    # Larger files are rejected by the documents stage (`file_too_large`), never read whole.
    max_file_bytes: Annotated[int, Field(ge=1)] = 10_000_000
    classifier_positive: bool = False
    # Which filters judge the source in the recipe's selection (`curation.mix`). `curated`:
    # only what fits edited text (exact duplicates, eval contamination, PII scrubbing, empty
    # after edits); the web's language, heuristics, URL and near-duplicate verdicts are still
    # annotated but drop nothing, and the per-partition gates do not judge it by web bounds.
    # `web`: the crawl's filters too (language, heuristics, URL and near duplicates); the
    # quality cutoff ranks the crawl's documents only.
    filters: Literal["curated", "web"] = "curated"

    @model_validator(mode="after")
    def _code_fields(self) -> SourceConfig:
        if self.kind == "code" and self.filters == "web":
            raise ValueError("filters: a code source is judged by the code filters, not the "
                             "web's; leave filters out")
        if self.kind == "code" and self.classifier_positive:
            raise ValueError("classifier_positive: the quality classifier learns prose; a code "
                             "source cannot be its positives")
        code_only = [name for name in ("path_field", "repository_field")
                     if getattr(self, name) is not None]
        if code_only and self.kind != "code":
            raise ValueError(f"{code_only[0]}: only a code source (kind: code) names file paths "
                             "and repositories")
        return self


# --- the documents stage ---------------------------------------------------------------------


class TrafilaturaSettings(_Strict):
    """FineWeb's precision settings (datatrove's `Trafilatura` extractor) by default, and one
    departure: `rescue_forms`, a second pass with forms kept for a page whose text holds no
    running text while a `<form>` holds some (`curation.form_rescue`; trafilatura deletes
    forms, and with them the main text of shop pages such as the 29 Japanese ClueWeb09 pages;
    no English gold page changes)."""

    favor_precision: bool = True
    include_comments: bool = False
    include_tables: bool = True
    deduplicate: bool = True
    rescue_forms: bool = True


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
        return check_language_codes(languages)


class LanguageSettings(_Strict):
    """A language-ID model over the whole document (fastText lid.176 by default, or py3langid:
    `curation.language_models`); keeps the target languages above threshold. The models'
    scores are on different scales: FineWeb's 0.65 is lid.176's (py3langid scores higher, so
    the same threshold keeps more; benchmarks/results/language_id_models.md)."""

    model: Literal["lid176", "py3langid"] = "lid176"
    languages: Annotated[list[str], Field(min_length=1)] = ["en"]
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.65
    thresholds: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = {}
    # Total variation distance between a partition's language mix and the next lower
    # snapshot's above which the drift check warns.
    max_drift: Annotated[float, Field(gt=0.0, le=1.0)] = 0.25

    @field_validator("languages")
    @classmethod
    def _codes(cls, languages: list[str]) -> list[str]:
        return check_language_codes(languages)

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
    # `signature`: the stored compact signature re-banded into near_dup_bands x near_dup_rows,
    # each candidate pair kept only when its signatures agree on near_dup_threshold of their
    # rows (curation.dedup.Verification; benchmarks/results/near_dup_recall.md). `none`:
    # FineWeb's minhash.bands x minhash.rows band hashes, every candidate an edge (parity).
    near_dup_verification: Literal["signature", "none"] = "signature"
    near_dup_threshold: Annotated[float, Field(gt=0.0, le=1.0)] = 0.6
    near_dup_bands: Annotated[int, Field(ge=1)] = 28
    near_dup_rows: Annotated[int, Field(ge=1)] = 4
    # Where the connected components run (dedup_clusters', cross_dedup's and the mix's
    # duplicate groups; curation.star_components.on_tasks): `tasks`, large-star/small-star
    # rounds of tasks over the exchange (the pool or the Ray cluster); `parent`, the step's own
    # DuckDB session; `auto`, tasks on a Ray cluster once the edges outgrow the parent's
    # in-memory union-find, else the parent. The clusters are the same, and so are versions.
    components: Literal["auto", "tasks", "parent"] = "auto"

    @model_validator(mode="after")
    def _verification_fits(self) -> DedupSettings:
        if self.near_dup_bands * self.near_dup_rows > self.minhash.permutations:
            raise ValueError(
                f"near_dup_bands * near_dup_rows = {self.near_dup_bands} * "
                f"{self.near_dup_rows} needs more signature rows than minhash stores "
                f"({self.minhash.bands} * {self.minhash.rows} = {self.minhash.permutations})")
        return self

    def shaping(self) -> dict[str, Any]:
        """The settings that shape the results (`model_dump`), for versions: not where the
        components run, which gives the same clusters."""
        return self.model_dump(mode="json", exclude={"components"})

    def verification(self) -> Verification | None:
        """The near-duplicate verification these settings ask for (None: FineWeb parity)."""
        if self.near_dup_verification == "none":
            return None
        return Verification(bands=self.near_dup_bands, rows=self.near_dup_rows,
                            threshold=self.near_dup_threshold, seed=self.minhash.seed)


class Gates(_Strict):
    """Bounds of the verdict-rate and share checks, and each tunable check's severity."""

    heuristics_keep: RateBounds = RateBounds(min=0.05, max=1.0)
    # Share of a partition's documents a dedup stage may mark as duplicates.
    max_duplicate_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9
    min_classifier_roc_auc: Annotated[float, Field(ge=0.5, le=1.0)] = 0.8
    # How far a source's delivered share of its phase may be from the recipe's target, on top
    # of what whole documents force (the largest document's share of the phase).
    mix_share_tolerance: Annotated[float, Field(gt=0.0, le=1.0)] = 0.01
    # Input files of a partition that may be empty, cut short, unreadable or not WARC at all.
    max_problem_files: Annotated[int, Field(ge=0)] = 0
    # `warn`: a failure is reported as a warning and stops nothing downstream.
    severity: dict[str, Literal["error", "warn"]] = {}

    @field_validator("severity")
    @classmethod
    def _known_checks(cls, severity: dict[str, str]) -> dict[str, str]:
        for name in severity:
            if name in CORRECTNESS_CHECKS:
                raise ValueError(f"{name!r} is a correctness check (it proves the data is "
                                 "intact or clean) and cannot be made a warning; tunable: "
                                 f"{', '.join(TUNABLE_CHECKS)}")
            if name not in TUNABLE_CHECKS:
                close = difflib.get_close_matches(name, [*TUNABLE_CHECKS, *CORRECTNESS_CHECKS],
                                                  n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(f"{name!r} is not a check; {hint}tunable checks: "
                                 f"{', '.join(TUNABLE_CHECKS)}")
        return severity

    def severity_of(self, check: str) -> Literal["error", "warn"]:
        """The severity a failure of `check` reports (`error` unless set to `warn`)."""
        default: Literal["error", "warn"] = "warn" if check == "language_drift" else "error"
        return self.severity.get(check, default)


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
    embeddings: EmbeddingSettings = EmbeddingSettings()
    semantic_dedup: SemanticDedupSettings = SemanticDedupSettings()
    domains: DomainSettings = DomainSettings()
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
        for snapshot in self.domains.training_snapshots or []:
            if snapshot not in self.snapshots:
                raise ValueError(f"domains.training_snapshots: {snapshot!r} is not a snapshot "
                                 "declared under snapshots")
        return self

    def classifier_skipped(self) -> str | None:
        """Why the quality classifier and its scores are skipped; None when they are made."""
        if self.quality is None:
            return "pipeline.yaml has no quality: section"
        if not any(source.classifier_positive for source in self.sources.values()):
            return "no source in pipeline.yaml is marked classifier_positive: true"
        return None

    def curated_sources(self) -> set[str]:
        """The text sources judged by the curated filter policy (`sources.NAME.filters:
        curated`); code sources have their own (`code_sources`)."""
        return {name for name, source in self.sources.items()
                if source.filters == "curated" and source.kind == "text"}

    def code_sources(self) -> set[str]:
        """The sources of `kind: code`."""
        return {name for name, source in self.sources.items() if source.kind == "code"}

    def is_code(self, partition: str) -> bool:
        """Whether a partition is a code source's."""
        entry = self.partition_entry(partition)
        return isinstance(entry, SourceConfig) and entry.kind == "code"

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


class SignalBound(_Strict):
    """Bounds on one stored heuristics signal: a document passes when `min <= value <= max`. A
    null signal (a ratio over nothing) passes, as it does in the heuristics' own rules."""

    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _a_bound(self) -> SignalBound:
        if self.min is None and self.max is None:
            raise ValueError("give 'min', 'max' or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g} is above max {self.max:g}")
        return self


class HeuristicsSelection(_Strict):
    """A recipe's heuristic filter, re-thresholded from the signals `heuristics` stored (no
    per-snapshot asset runs again). `suites`: the suites whose stored verdict (`keep_<suite>`,
    under pipeline.yaml's thresholds) still applies; None: the overall verdict, every enabled
    suite. `signals`: bounds on signal columns (`gopher_alpha_words_frac`,
    `fineweb_line_punct_ratio`, ...), applied on top. A suite left out of `suites` and restated
    in `signals` takes the recipe's thresholds instead of the pipeline's, looser or stricter."""

    suites: list[Literal[SUITES]] | None = None  # type: ignore[valid-type]
    signals: dict[str, SignalBound] = {}


class Selection(_Strict):
    """What the mix keeps of the annotated documents (applied by `mix`, never upstream)."""

    languages: list[str] | None = None
    # SPDX ids a curated or code document's licence must be one of (None: any); web documents
    # carry no licence and are not judged by it. The Stack v2 keeps permissive licences only.
    licences: list[str] | None = None
    drop_contaminated: bool = True
    quality_top_fraction: Annotated[float, Field(gt=0, le=1)] | None = None
    # The score every quality cut (and `cluster_policy: quality`) reads: fastText's P(hq), the
    # neural head's on the embeddings, or the mean of the two models' percentile ranks among
    # held-out web documents (`curation.neural_quality.combined_scores`). The last two need
    # `embeddings.enabled` in pipeline.yaml.
    quality_scorer: Literal["fasttext", "neural", "combined"] = "fasttext"
    # Join the `semantic_dedup` groups (SemDeDup on the embeddings, within each web
    # partition) to the duplicate groups: a rewrite of a kept page is dropped as `duplicate`.
    # Needs `embeddings.enabled` in pipeline.yaml.
    semantic_dedup: bool = False
    heuristics: HeuristicsSelection = HeuristicsSelection()


class RehydrationBucket(_Strict):
    """Duplicate groups of `min_size` to `max_size` documents (None: no upper end): their kept
    member's occurrences are multiplied by `weight`."""

    min_size: Annotated[int, Field(ge=1)]
    max_size: Annotated[int, Field(ge=1)] | None = None
    weight: Annotated[float, Field(ge=0)]

    @property
    def label(self) -> str:
        if self.max_size is None:
            return f"{self.min_size}+"
        return str(self.min_size) if self.max_size == self.min_size else \
            f"{self.min_size}-{self.max_size}"


_SIZES = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d+)|(\+))?\s*$")


def _bucket(key: Any, weight: Any) -> dict[str, Any]:
    """A rehydration table's entry (`3-4: 3`, `101+: 8`, `1: 1`) as a `RehydrationBucket`."""
    match = _SIZES.match(str(key))
    if match is None:
        raise ValueError(f"bucket {key!r}: write a size (2), a range (3-4) or an open end (101+)")
    low = int(match.group(1))
    high = None if match.group(4) else int(match.group(3) or low)
    return {"min_size": low, "max_size": high, "weight": weight}


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
    # How the loader serves the sequences: within_phase keeps the curriculum (each phase
    # shuffled on its own, phases in this order, every epoch); global shuffles them together.
    shuffle: Literal["within_phase", "global"] = "within_phase"
    tokens_per_shard: Annotated[int, Field(ge=1024)] = 1 << 26
    seed: int = 0
    # FineWeb-2's rehydration: a kept member's occurrences times its duplicate group's weight,
    # by group size (`{1: 1, 2: 2, "3-4": 3, "5-100": 5, "101+": 8}` or a list of buckets).
    rehydration: list[RehydrationBucket] | None = None
    # Topic domains weighted like sources, inside each source's pool: a document of domain d
    # counts `domain_weights[d]` times in its pool (0 leaves it out, 2 doubles its
    # occurrences against the rest; unnamed domains weigh 1). Needs embeddings.enabled.
    domain_weights: dict[Annotated[int, Field(ge=0)], Annotated[float, Field(ge=0)]] = {}
    # Topic domains capped like a share: in each source's pool of each phase, domain d carries
    # at most `domain_caps[d]` of the pool's tokens (after the weights); the excess goes to
    # the other domains in proportion to their weights. Needs embeddings.enabled.
    domain_caps: dict[Annotated[int, Field(ge=0)], Annotated[float, Field(gt=0, le=1)]] = {}

    @field_validator("rehydration", mode="before")
    @classmethod
    def _bucket_table(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return [_bucket(key, weight) for key, weight in value.items()]
        return value

    @field_validator("rehydration")
    @classmethod
    def _buckets_cover_sizes(cls, value: list[RehydrationBucket] | None
                             ) -> list[RehydrationBucket] | None:
        if value is None:
            return None
        buckets = sorted(value, key=lambda bucket: bucket.min_size)
        expected = 1
        for bucket in buckets:
            if bucket.max_size is not None and bucket.max_size < bucket.min_size:
                raise ValueError(f"bucket {bucket.label}: max_size is below min_size")
            if bucket.min_size != expected:
                raise ValueError(f"bucket {bucket.label}: " + (
                    f"sizes {expected}-{bucket.min_size - 1} are in no bucket"
                    if bucket.min_size > expected else f"overlaps sizes below {expected}"))
            if bucket.max_size is None:
                if bucket is not buckets[-1]:
                    raise ValueError(f"bucket {bucket.label}: only the last bucket is open-ended")
                return buckets
            expected = bucket.max_size + 1
        raise ValueError(f"sizes from {expected} up are in no bucket: end with an open bucket "
                         f"(\"{expected}+\")")

    @model_validator(mode="after")
    def _phases_sum_to_one(self) -> RecipeConfig:
        total = sum(phase.fraction for phase in self.phases)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"phases: fractions sum to {total:g}, not 1")
        return self

    def partition_keys(self) -> list[str]:
        """The `snapshot` partitions the recipe reads: its snapshots, then `source:NAME` keys,
        in the recipe's order."""
        return [*self.snapshots, *(SOURCE_PREFIX + name for name in self.sources)]

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
        chosen = self.selection.heuristics
        annotator = Annotator(pipeline.heuristics)
        for suite in chosen.suites or []:
            if suite not in annotator.suites:
                raise ConfigError(f"recipe {self.name}: selection.heuristics.suites: {suite!r} "
                                  "is disabled in pipeline.yaml, so heuristics stores no verdict")
        for name in chosen.signals:
            if name not in annotator.signal_names:
                raise ConfigError(f"recipe {self.name}: selection.heuristics.signals.{name}: not "
                                  "a signal heuristics stores; one of "
                                  + ", ".join(annotator.signal_names))


# --- loading and hashing ---------------------------------------------------------------------


def stable_hash(payload: Any, length: int = 16) -> str:
    """sha256 of canonical JSON: key order and whitespace never change a version."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError([Problem(str(path), "", "file not found")])
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError([Problem(str(path), "", f"not valid YAML: {error}")]) from error


def _not_a_mapping(path: Path) -> ConfigError:
    return ConfigError([Problem(str(path), "(top level)", "expected a mapping of settings")])


def _explain(path: Path, error: ValidationError, model: type[BaseModel]) -> ConfigError:
    problems = []
    for item in error.errors():
        loc = tuple(_model_name(part) for part in item["loc"])
        field = ".".join(str(part) for part in loc) or "(top level)"
        fix = _did_you_mean(model, loc) if item["type"] == "extra_forbidden" else ""
        problems.append(Problem(str(path), field, item["msg"], fix))
    return ConfigError(problems)


# pydantic names a union member that has a model validator by the validator, e.g.
# `function-after[_check(), LocalWarcInput]`; the user wrote a LocalWarcInput.
_VALIDATED_MEMBER = re.compile(r"^function-\w+\[.*, (\w+)\]$")


def _model_name(part: str | int) -> str | int:
    match = _VALIDATED_MEMBER.match(part) if isinstance(part, str) else None
    return match.group(1) if match else part


def _did_you_mean(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    """A close allowed key for a mistyped one (`qualty` -> `quality`), else a list of them."""
    allowed = _allowed_keys(model, loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"allowed here: {', '.join(allowed)}" if allowed else ""


def _allowed_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The keys of the mapping at `loc`, walking the models' annotations the way pydantic's
    error locations do (a dict key or list index, then the value; a union member's name)."""
    annotation: Any = model
    for part in loc:
        annotation = _step(annotation, part)
    return sorted(name for member in _members(annotation) if _is_model(member)
                  for name, info in member.model_fields.items() if not info.exclude)


def _step(annotation: Any, part: str | int) -> Any:
    for member in _members(annotation):
        if _is_model(member):
            if part == member.__name__:
                return member
            if part in member.model_fields:
                return member.model_fields[part].annotation
        elif get_origin(member) in (dict, list):
            return get_args(member)[-1]
    return None


def _members(annotation: Any) -> list[Any]:
    """The types an annotation admits: through Annotated, Optional and unions."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [member for arg in get_args(annotation) for member in _members(arg)]
    return [annotation]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def load_pipeline(path: str | Path) -> PipelineConfig:
    path = Path(path)
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise _not_a_mapping(path)
    try:
        pipeline = PipelineConfig.model_validate({**raw, "base_dir": path.resolve().parent})
    except ValidationError as error:
        raise _explain(path, error, PipelineConfig) from None
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
            raise ConfigError([Problem(str(path), f"documents.url_filter.{name}",
                                       f"file not found: {resolved[name]}")])
    documents = pipeline.documents.model_copy(
        update={"url_filter": url_filter.model_copy(update=resolved)})
    return pipeline.model_copy(update={"documents": documents,
                                       "decontamination": _resolved_evals(pipeline, path)})


def _resolved_evals(pipeline: PipelineConfig, path: Path) -> DecontaminationSettings:
    benchmarks = []
    for index, benchmark in enumerate(pipeline.decontamination.benchmarks):
        resolved = pipeline.resolve(benchmark.path)
        if not glob.glob(resolved):
            raise ConfigError([Problem(str(path), f"decontamination.benchmarks.{index}.path",
                                       f"no file matches {resolved}")])
        benchmarks.append(benchmark.model_copy(update={"path": resolved}))
    return pipeline.decontamination.model_copy(update={"benchmarks": benchmarks})


def recipe_names(folder: str | Path) -> list[str]:
    """The recipes of a folder: the stems of its `*.yaml` files (the `recipe` partitions)."""
    return sorted(path.stem for path in Path(folder).glob("*.yaml"))


def load_recipe(path: str | Path, pipeline: PipelineConfig | None = None) -> RecipeConfig:
    path = Path(path)
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise _not_a_mapping(path)
    try:
        recipe = RecipeConfig.model_validate(raw)
    except ValidationError as error:
        raise _explain(path, error, RecipeConfig) from None
    if pipeline is not None:
        recipe.check_against(pipeline)
    problems = _recipe_file_problems(recipe, path)
    if pipeline is not None:
        problems += _recipe_pipeline_problems(recipe, path, pipeline)
    if problems:
        raise ConfigError(problems)
    return recipe


def _recipe_file_problems(recipe: RecipeConfig, path: Path) -> list[Problem]:
    """What a recipe must say of itself: its file's name (the `recipe` partition, and where
    the report and shards look), and language codes the language stage predicts."""
    problems = []
    if recipe.name != path.stem:
        problems.append(Problem(str(path), "name", f"{recipe.name!r} differs from the file "
                                f"name {path.name!r}; the recipe partition is the file name",
                                f"set name: {path.stem} or rename the file to "
                                f"{recipe.name}.yaml"))
    bad = bad_language_code(recipe.selection.languages or [])
    if bad:
        message, suggestion = bad
        problems.append(Problem(str(path), "selection.languages", message,
                                suggestion or "use ISO 639-1 codes such as [en, de]"))
    return problems


def _recipe_pipeline_problems(recipe: RecipeConfig, path: Path,
                              pipeline: PipelineConfig) -> list[Problem]:
    """What a recipe needs of the pipeline: its pinned tokenizer file, and the quality
    classifier when it selects or ranks by score."""
    problems = []
    if recipe.tokenizer.path is not None:
        resolved = pipeline.resolve(recipe.tokenizer.path)
        if "://" in resolved or not Path(resolved).is_file():
            problems.append(Problem(str(path), "tokenizer.path", f"file not found: {resolved}",
                                    "give a local tokenizer.json, absolute or relative to "
                                    f"{pipeline.base_dir}, or train_vocab_size to train one"))
    skipped = pipeline.classifier_skipped()
    if skipped:
        for field in _fields_needing_scores(recipe):
            problems.append(Problem(
                str(path), field, f"needs quality scores, but the classifier is skipped: "
                f"{skipped}", "add a quality: section with training_snapshots and mark a "
                "curated source classifier_positive: true, or remove this setting"))
    if recipe.selection.quality_scorer != "fasttext" and not pipeline.embeddings.enabled:
        problems.append(Problem(
            str(path), "selection.quality_scorer", f"{recipe.selection.quality_scorer} needs "
            "the neural head, which trains on the embeddings, but embeddings.enabled is false",
            "set embeddings: {enabled: true} in pipeline.yaml, or quality_scorer: fasttext"))
    for name in ("domain_weights", "domain_caps"):
        problems += _domain_problems(path, name, getattr(recipe, name), pipeline)
    if recipe.selection.semantic_dedup and not pipeline.embeddings.enabled:
        problems.append(Problem(
            str(path), "selection.semantic_dedup", "needs the semantic_dedup groups, which "
            "compare the embeddings, but embeddings.enabled is false",
            "set embeddings: {enabled: true} in pipeline.yaml, or semantic_dedup: false"))
    return problems


def _domain_problems(path: Path, name: str, domains: Mapping[int, float],
                     pipeline: PipelineConfig) -> list[Problem]:
    """A recipe's `domain_weights` or `domain_caps`: they need the topic domains, and name
    domains that `domains.count` has."""
    if not domains:
        return []
    if not pipeline.embeddings.enabled:
        return [Problem(str(path), name, "needs the topic domains, which cluster the "
                        "embeddings, but embeddings.enabled is false",
                        f"set embeddings: {{enabled: true}} in pipeline.yaml, or remove {name}")]
    return [Problem(str(path), f"{name}.{domain}", f"there are domains 0-"
                    f"{pipeline.domains.count - 1} (domains.count in pipeline.yaml)",
                    "name a domain the topic_model asset lists")
            for domain in sorted(d for d in domains if d >= pipeline.domains.count)]


def _fields_needing_scores(recipe: RecipeConfig) -> list[str]:
    fields = ["selection.quality_top_fraction"] \
        if recipe.selection.quality_top_fraction is not None else []
    fields += [f"phases.{phase.name}.quality_top_fraction" for phase in recipe.phases
               if phase.quality_top_fraction is not None]
    return fields + (["cluster_policy"] if recipe.cluster_policy == "quality" else [])


def dataset_version(
    recipe: RecipeConfig,
    pipeline: PipelineConfig,
    *,
    takedown_version: str,
    input_data_versions: dict[str, str],
    code_versions: dict[str, str],
) -> str:
    """The dataset version: the same id always means the same bytes (docs/architecture.md).

    Covers the recipe, the pipeline sections and partition entries it depends on, the takedown
    list version, the data versions of its inputs and the code versions (with library versions)
    of the assets that build it. Run configuration (root, workers, backend) is never included.
    """
    sections = {
        "documents": pipeline.documents.model_dump(mode="json"),
        "partitions": {p: pipeline.partition_entry(p).model_dump(mode="json")
                       for p in recipe.partition_keys()},
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
