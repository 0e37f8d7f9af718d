"""The dataset card of an exported dataset version: a `README.md` with Hugging Face's YAML
metadata, generated from the shards' manifest, the funnel report, the recipe and the pipeline
(no Dagster, no storage): sources and licences with their token shares, snapshots, phases,
every filter with its settings and removals, deduplication, decontamination per benchmark
with the export's own re-scan, the PII policy, the tokenizer, how to cite and how to ask for
a takedown. Deterministic: the same inputs give the same bytes (no dates)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from curation.config import PipelineConfig, RecipeConfig

SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                   (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"),
                   (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"),
                   (10_000_000_000, "1B<n<10B"))
"""Hugging Face's `size_categories` by number of rows."""


def size_category(rows: int) -> str:
    for limit, name in SIZE_CATEGORIES:
        if rows < limit:
            return name
    return "n>10B"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.2%}"
        return f"{value:,}" if isinstance(value, int) else str(value).replace("|", "\\|")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _shares(tokens: Mapping[str, int]) -> list[list[Any]]:
    total = sum(tokens.values()) or 1
    return [[name, count, count / total] for name, count in sorted(
        tokens.items(), key=lambda item: (-item[1], item[0]))]


def _metadata(manifest: Mapping[str, Any], recipe: RecipeConfig, fmt: str, rows: int,
              licences: Sequence[str], languages: Sequence[str]) -> str:
    meta: dict[str, Any] = {
        "pretty_name": f"{recipe.name} {manifest['version']}",
        "license": "other",
        "license_name": "mixed: " + ", ".join(licences) if licences else "unspecified",
        "task_categories": ["text-generation"],
        "size_categories": [size_category(rows)],
        "tags": ["pretraining", "corpus-platform", f"dataset-version-{manifest['version']}"],
    }
    if languages:
        meta["language"] = list(languages)
    if fmt == "hf-parquet":
        meta["configs"] = [{"config_name": "default",
                            "data_files": [{"split": "train", "path": "data/train-*"}]}]
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def dataset_card(manifest: Mapping[str, Any], report: Mapping[str, Any] | None,
                 recipe: RecipeConfig, pipeline: PipelineConfig, export: Mapping[str, Any],
                 residual: Mapping[str, int] | None) -> str:
    """The card of an export (`export` is its `export.json` body, `residual` the eval items its
    re-scan found per benchmark, None when it did not scan: nanoGPT's tokens)."""
    licences = sorted(name for name in manifest.get("tokens_by_licence", {}) if name != "(none)")
    languages = sorted(set(recipe.selection.languages or []) | (
        {"code"} if any(pipeline.is_code(f"source:{s}") for s in recipe.sources) else set()))
    totals = manifest["totals"]
    taken = export["taken_down"]
    parts = [
        _metadata(manifest, recipe, export["format"], export["rows"], licences, languages),
        f"# {recipe.name}: dataset version `{manifest['version']}`\n",
        f"A pretraining corpus built by corpus-platform from the recipe `{recipe.name}` "
        f"(recipe hash `{manifest['recipe_hash']}`, pipeline hash `{manifest['pipeline_hash']}`,"
        f" seed {manifest['seed']}). This export (`{export['format']}`) holds "
        f"{export['tokens']:,} tokens in {export['rows']:,} "
        f"{'sequences' if export['format'] == 'nanogpt' else 'document occurrences'}; the "
        f"shards hold {totals['tokens']:,} tokens in {totals['sequences']:,} sequences of "
        f"{manifest['seq_len']:,} tokens ({manifest['packing']} packing). Rebuilding the same "
        "version gives the same bytes: `corpus export` with the same version and takedown "
        "list.\n",
        "## Sources and licences\n",
        _table(["source", "tokens", "share"], _shares(manifest["tokens_by_source"])) + "\n",
        _table(["licence", "tokens", "share"], _shares(manifest["tokens_by_licence"])) + "\n",
        "Web documents carry no licence of their own (`(none)`): they are the crawl's pages, "
        "kept under the terms of the snapshots they come from.\n",
        "## Snapshots\n",
        ", ".join(f"`{snapshot}`" for snapshot in recipe.snapshots)
        + (f"; curated sources: {', '.join(f'`{s}`' for s in recipe.sources)}"
           if recipe.sources else "") + ".\n",
        "## Phases\n",
        _table(["phase", "fraction", "source weights", "tokens"],
               [[phase.name, f"{phase.fraction:g}", json.dumps(phase.weights, sort_keys=True),
                 manifest["tokens_by_phase"].get(phase.name, 0)] for phase in recipe.phases])
        + f"\n\nThe loader serves the phases in this order (`shuffle: {manifest['shuffle']}`).\n",
        *_filters(report, recipe, pipeline),
        *_contamination(report, residual),
        "## Personal information\n",
        f"Scrubbed before selection: {', '.join(pipeline.pii.enabled) or 'nothing'} replaced by "
        "placeholders (" + ", ".join(f"{kind} → `{text}`" for kind, text in sorted(
            pipeline.pii.placeholders.items()) if kind in pipeline.pii.enabled)
        + f"); private IP addresses {'included' if pipeline.pii.include_private_ips else 'left'}"
        ". The mix's gate re-scans the selected text with a matcher written apart from the "
        "scrubber.\n",
        "## Tokenizer\n",
        f"sha256 `{manifest['tokenizer']['sha256']}`, {manifest['tokenizer']['vocab_size']:,} "
        f"ids, EOS id {manifest['eos_id']} after every document, token dtype "
        f"`{manifest['dtype']}`.\n",
        "## Takedowns\n",
        f"This export honours takedown list `{taken['version']}`: {taken['documents']:,} "
        f"documents and their copies, {taken['occurrences']:,} occurrences and "
        f"{taken['tokens']:,} tokens left out. To ask for a page's removal, send its URL to "
        "the dataset's maintainers; they record it (`corpus takedown add --url URL`), and the "
        "next export leaves out the page and every copy of it.\n",
        "## Citation\n",
        "```bibtex\n@misc{" + f"{recipe.name}_{manifest['version']}" + ",\n  title = {"
        + f"{recipe.name}: dataset version {manifest['version']}" + "},\n  note = {Built with "
        "corpus-platform; dataset version " + manifest["version"] + "}\n}\n```\n",
    ]
    return "\n".join(parts)


FILTER_SECTIONS = ("documents", "language", "heuristics", "dedup", "semantic_dedup",
                   "decontamination")
"""The pipeline sections whose settings decide what the filters remove (in the card)."""


def _relative(value: Any, base: str) -> Any:
    """`value` with every path under the deployment folder `base` made relative to it: the
    card describes the version the same way wherever the deployment sits."""
    if isinstance(value, dict):
        return {key: _relative(item, base) for key, item in value.items()}
    if isinstance(value, list):
        return [_relative(item, base) for item in value]
    if isinstance(value, str) and value.startswith(base + "/"):
        return value[len(base) + 1:]
    return value


def _filters(report: Mapping[str, Any] | None, recipe: RecipeConfig,
             pipeline: PipelineConfig) -> list[str]:
    """The recipe's selection settings, the pipeline's filter settings and the funnel's
    removals per stage and reason."""
    settings = _relative({name: getattr(pipeline, name).model_dump(mode="json")
                          for name in FILTER_SECTIONS}, str(pipeline.base_dir.resolve()))
    out = ["## Filters and deduplication\n",
           "Selection settings of the recipe:\n",
           "```yaml\n" + yaml.safe_dump(recipe.selection.model_dump(mode="json"),
                                        sort_keys=True) + "```\n",
           "<details><summary>The pipeline's settings of every filter</summary>\n\n```yaml\n"
           + yaml.safe_dump(settings, sort_keys=True) + "```\n</details>\n"]
    if report is None:
        return [*out, "No funnel report was stored for this version.\n"]
    out.append(_table(["stage", "reason", "documents removed", "tokens removed (est.)"],
                      [[row["stage"], row["reason"], row["dropped"], row["tokens_dropped"] or 0]
                       for row in report["removals"] if row["dropped"]]) + "\n")
    out.append(_table(["duplicate clusters", "clusters", "duplicates", "largest"],
                      [[name, row["clusters"], row["duplicates"], row["largest"]]
                       for name, row in sorted(report["clusters"].items())]) + "\n")
    return out


def _contamination(report: Mapping[str, Any] | None,
                   residual: Mapping[str, int] | None) -> list[str]:
    """Decontamination per benchmark (the report's table) and the export's re-scan."""
    out = ["## Decontamination\n"]
    if report is None or "contamination" not in report:
        out.append("No funnel report of this version lists decontamination per benchmark.\n")
    elif not report["contamination"]:
        out.append("Decontamination found no benchmark item in this version's partitions.\n")
    else:
        out.append(_table(
            ["benchmark", "items found", "documents", "documents removed",
             "tokens removed (est.)", "kept by the recipe", "top domains"],
            [[row["benchmark"], row["items"], row["documents"], row["documents_removed"],
              row["tokens_removed"], row["documents_kept"],
              ", ".join(f"{site['domain']} ({site['documents']})"
                        for site in row["top_domains"]) or "–"]
             for row in report["contamination"]]) + "\n")
    if residual is None:
        out.append("This format holds tokens only: the export did not re-scan its text.\n")
    else:
        found = ", ".join(f"{name} ({count} items)" for name, count in residual.items())
        out.append("Re-scan of every exported document by a matcher written apart from the "
                   f"decontamination scanner: {found or 'no eval item found'}.\n")
    return out
