"""The asset graph's names: every asset, and every list of assets the code walks.

The one place an asset name is typed (a test greps the product code for any other). Plain
strings, no Dagster: kernels, stage runners, the shell and the CLI all read them from here.
Adding a stage means adding its name here and to the lists it belongs to
(docs/adding-a-stage.md).
"""

from __future__ import annotations

# --- per snapshot (and curated source) -------------------------------------------------------
WARC_FILES = "warc_files"
DOCUMENTS = "documents"
LANGUAGE = "language"
HEURISTICS = "heuristics"
MINHASH_SIGNATURES = "minhash_signatures"
URL_DEDUP = "url_dedup"
EXACT_DEDUP = "exact_dedup"
DEDUP_CLUSTERS = "dedup_clusters"
LINE_DEDUP = "line_dedup"
SCRUBBED = "scrubbed"
EMBEDDINGS = "embeddings"
SEMANTIC_DEDUP = "semantic_dedup"
QUALITY_SCORES = "quality_scores"
DECONTAMINATED = "decontaminated"
DOMAINS = "domains"

# --- pipeline-wide (one partition, `ALL`) ----------------------------------------------------
CROSS_DEDUP = "cross_dedup"
QUALITY_CLASSIFIER = "quality_classifier"
TOPIC_MODEL = "topic_model"
EVAL_SUITE = "eval_suite"
TAKEDOWNS = "takedowns"
CATALOG = "catalog"
ALL = "all"
"""The one partition key of a pipeline-wide asset's stored output."""

# --- per recipe ------------------------------------------------------------------------------
TOKENIZER = "tokenizer"
MIX = "mix"
SHARDS = "shards"
REPORT = "report"
PROXY_EVAL = "proxy_eval"
EXPORTS = "exports"

# --- checks ----------------------------------------------------------------------------------
# The checks whose bound is a setting, and the setting: a deployment may make them warnings.
TUNABLE_CHECKS = {
    "documents_survival": "documents.survival",
    "documents_files_readable": "gates.max_problem_files",
    "language_drift": "language.max_drift",
    "heuristics_keep_rate": "gates.heuristics_keep",
    "url_dedup_rate": "gates.max_duplicate_rate",
    "exact_dedup_rate": "gates.max_duplicate_rate",
    "dedup_clusters_rate": "gates.max_duplicate_rate",
    "quality_classifier_separates": "gates.min_classifier_roc_auc",
    "quality_classifier_neural_separates": "gates.min_classifier_roc_auc",
    "mix_shares_on_target": "gates.mix_share_tolerance",
}
# Checks that prove the data is intact or clean (contracts, coverage, residual PII or eval
# text, shard integrity, takedowns): they have no bound to tune and always stop what follows.
CORRECTNESS_CHECKS = (
    "warc_files_listed", "documents_contract", "language_keeps_documents",
    "heuristics_cover_documents", "url_dedup_kept_members_valid",
    "exact_dedup_kept_members_valid", "dedup_clusters_kept_members_valid",
    "cross_dedup_kept_members_valid", "line_dedup_edits_valid", "scrubbed_covers_documents",
    "scrubbed_has_no_residual_pii", "quality_scores_cover_documents",
    "eval_suite_covers_every_benchmark", "decontaminated_covers_documents",
    "mix_has_no_residual_contamination", "mix_has_no_residual_pii", "shards_integrity",
    "shards_exclude_takedowns", "warc_files_contract", "language_contract",
    "heuristics_contract", "minhash_signatures_contract", "url_dedup_contract",
    "exact_dedup_contract", "dedup_clusters_contract", "line_dedup_contract",
    "cross_dedup_contract", "scrubbed_contract", "quality_scores_contract",
    "decontaminated_contract", "mix_contract", "shards_contract",
    "embeddings_cover_documents", "embeddings_norms", "embeddings_contract",
    "semantic_dedup_kept_members_valid", "semantic_dedup_contract",
    "topic_model_describes_domains", "domains_cover_documents", "domains_contract",
    "exports_match_shards",
)


# --- lists -----------------------------------------------------------------------------------
PIPELINE_ORDER = (
    WARC_FILES, DOCUMENTS, LANGUAGE, HEURISTICS, MINHASH_SIGNATURES, URL_DEDUP, EXACT_DEDUP,
    DEDUP_CLUSTERS, LINE_DEDUP, SCRUBBED, EMBEDDINGS, SEMANTIC_DEDUP, CROSS_DEDUP,
    QUALITY_CLASSIFIER, TOPIC_MODEL, QUALITY_SCORES, DOMAINS, EVAL_SUITE, DECONTAMINATED,
    TAKEDOWNS, TOKENIZER, MIX, SHARDS, REPORT, CATALOG, PROXY_EVAL, EXPORTS,
)
"""Every asset, in the order the pipeline runs them (ties in the graph broken by this order)."""

PARTITION_DEDUP = (URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS)
"""The dedup stages whose clusters link documents of one partition."""

CLUSTER_ASSETS = (*PARTITION_DEDUP, CROSS_DEDUP)
"""Every asset holding duplicate clusters: within partitions, then across them."""

SELECTION_VERDICTS: tuple[str, ...] = ()
"""Annotate stages added between `scrubbed` and `mix` (docs/adding-a-stage.md): the mix reads
each one's `keep` column and drops a document it rejects under a rule of the stage's name, after
`empty_after_edits` and before the quality cutoff (curated sources are exempt, as from the other
web filters)."""

MIX_INPUTS = (DOCUMENTS, LANGUAGE, HEURISTICS, QUALITY_SCORES, DECONTAMINATED, SCRUBBED,
              *PARTITION_DEDUP, SEMANTIC_DEDUP, DOMAINS, *SELECTION_VERDICTS)
"""The per-partition assets the mix reads (besides `CROSS_DEDUP`): its version covers theirs."""

CURATED_DEDUP = EXACT_DEDUP
"""The one dedup a curated source's own duplicates go through (its filter policy)."""

PURGE_TARGETS = (DOCUMENTS, SCRUBBED, EMBEDDINGS, f"{DECONTAMINATED}:hits")
"""Tables holding document text, or vectors that can be read back towards it, which a purge
rewrites: `asset` (its main part) or `asset:table`."""

CATALOG_SOURCES = (
    WARC_FILES, DOCUMENTS, LANGUAGE, HEURISTICS, MINHASH_SIGNATURES, URL_DEDUP, EXACT_DEDUP,
    DEDUP_CLUSTERS, LINE_DEDUP, CROSS_DEDUP, QUALITY_CLASSIFIER, QUALITY_SCORES, EVAL_SUITE,
    DECONTAMINATED, SCRUBBED, TOKENIZER, MIX, SHARDS,
)
"""Assets whose manifests the lineage catalog reads (partitions, decisions, rejects, clusters,
the mix)."""

CATALOG_INPUTS = (DOCUMENTS, SCRUBBED, DECONTAMINATED, URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS,
                  LINE_DEDUP, LANGUAGE, HEURISTICS, MIX, SHARDS)
"""The partitioned assets the `catalog` step depends on (every partition of each)."""

WITHOUT_MANIFEST = frozenset({TAKEDOWNS, CATALOG, REPORT})
"""Assets that keep no partition manifest in the store (the takedown list's versions, the
catalog file, the report page)."""

ASSET_MODULES = ("warc_files", "documents", "language", "heuristics", "dedup", "scrubbed",
                 "embeddings", "semantic_dedup", "quality", "domains", "decontamination",
                 "lineage", "dataset", "report", "proxy", "export")
"""The asset families: each a module of `corpus_assets/` (the definitions load their assets)
with its checks in the `checks/` module and its runner in the `curation/stages/` module of the
same name, where it has one."""

POOLED_STAGES = ("documents", "language", "heuristics", "scrubbed", "embeddings",
                 "semantic_dedup", "domains", "decontamination", "quality", "dedup")
"""The `curation.stages` modules whose tasks run in the worker pool."""

WORKER_PRELOAD = tuple(f"curation.stages.{module}" for module in POOLED_STAGES)
"""What a worker pool's fork server imports once, so forked workers start warm."""
