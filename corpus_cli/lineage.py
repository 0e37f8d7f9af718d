"""Record-level lineage, takedowns and shard inspection from the command line.

`corpus lineage ...` answers "is this URL in version X, and where?" and "whose token is this?";
`corpus takedown ...` records a takedown, rebuilds the dataset versions without the documents
and their duplicates, and purges the intermediate text; `corpus shards ...` verifies and shows
a dataset version.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from corpus_cli.common import open_root, register, validated_recipes
from corpus_cli.deployment import fail, open_instance
from curation.graph import ALL, SHARDS, TOKENIZER

lineage_app = typer.Typer(help="Record-level lineage: URL, token and asset look-ups.",
                          no_args_is_help=True)
takedown_app = typer.Typer(help="Take pages down: record, rebuild, purge, audit.",
                           no_args_is_help=True)
shards_app = typer.Typer(help="Training shards: verify and inspect a dataset version.",
                         no_args_is_help=True)

RootOption = Annotated[str, typer.Option(help="Storage root: folder or s3://bucket/prefix")]
CatalogOption = Annotated[Path | None, typer.Option(
    help="The catalog file (default: ROOT/catalog.duckdb)")]


def _catalog_path(root: str, catalog: Path | None) -> Path:
    return catalog or Path(root) / "catalog.duckdb"


def _open_catalog(root: str, catalog: Path | None):  # noqa: ANN202 - a Catalog
    from curation.catalog import Catalog

    path = _catalog_path(root, catalog)
    if not path.exists():
        typer.secho(f"no catalog at {path}: run `corpus lineage refresh` (or the main job)",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    return Catalog(path)


# --- lineage ---------------------------------------------------------------------------------


@lineage_app.command("url")
def lineage_url(url: str, root: RootOption = "data", catalog: CatalogOption = None) -> None:
    """Where a URL (any spelling) or domain is: every dataset version on disk that holds it
    (current or older), shards and token ranges, or why not."""
    with _open_catalog(root, catalog) as opened:
        found = opened.find_url(url)
        if not found:
            typer.echo(f"{url}: no document with this URL or domain")
            raise typer.Exit(1)
        for location in found:
            typer.echo(location.explain())


def _dataset_version(opened, name: str) -> str:  # noqa: ANN001 - a Catalog
    """A dataset version id, or the current version of the recipe `name`."""
    versions = opened.dataset_versions()
    if any(row["dataset_version"] == name for row in versions):
        return name
    current = [row["dataset_version"] for row in versions
               if row["recipe"] == name and row["current"]]
    return current[0] if current else name


@lineage_app.command("token")
def lineage_token(
    version: Annotated[str, typer.Argument(help="A dataset version, or a recipe (its current)")],
    shard: Annotated[str, typer.Argument(help="Shard index or name (shard-00000)")],
    offset: Annotated[int, typer.Argument(help="Token offset in the shard, padding counted")],
    as_json: Annotated[bool, typer.Option("--json", help="Every detail, as JSON")] = False,
    root: RootOption = "data", catalog: CatalogOption = None,
) -> None:
    """The document behind token OFFSET of SHARD in dataset VERSION, in one line: doc_id, URL,
    source and snapshot, WARC file and offset, phase and token range."""
    with _open_catalog(root, catalog) as opened:
        try:
            where = opened.at_token(_dataset_version(opened, version),
                                    int(shard) if shard.isdigit() else shard, offset)
        except (KeyError, ValueError) as error:
            typer.secho(str(error.args[0]), fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        typer.echo(json.dumps(asdict(where), indent=1, default=str) if as_json
                   else where.explain())


@lineage_app.command("asset")
def lineage_asset(name: str) -> None:
    """An asset's upstream and downstream assets, from the Dagster asset graph."""
    from dagster import AssetKey

    from corpus_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    key = AssetKey(name)
    if not graph.has(key):
        typer.secho(f"{name}: no such asset", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    node = graph.get(key)
    for label, keys in (("upstream", node.parent_keys), ("downstream", node.child_keys)):
        typer.echo(f"{label}: {', '.join(sorted(k.to_user_string() for k in keys)) or '-'}")


@lineage_app.command("refresh")
def lineage_refresh(root: RootOption = "data", catalog: CatalogOption = None) -> None:
    """Rebuild the catalog now (the `catalog` asset does the same in the main job)."""
    from curation.catalog import refresh_catalog

    summary = refresh_catalog(open_root(root), _catalog_path(root, catalog))
    typer.echo(f"{summary.path}: {summary.rows} in {summary.seconds:.1f} s")


# --- takedowns -------------------------------------------------------------------------------


def rebuild_after_takedown(pipeline: Path, root: str, workers: int) -> dict[str, str]:
    """Materializes the takedown list, then every recipe's dataset, then the catalog; returns
    recipe -> dataset version. Nothing upstream of the mix runs."""
    from corpus_assets.definitions import defs
    from corpus_assets.main_job import main_run_config

    register(pipeline)
    instance = open_instance()
    config = main_run_config(str(pipeline), root, workers)
    versions = {}
    plan = [("takedown_list", None), *(("dataset", r) for r in validated_recipes(pipeline)),
            ("lineage", None)]
    for job, partition in plan:
        result = defs.resolve_job_def(job).execute_in_process(
            partition_key=partition, instance=instance, run_config=config,
            raise_on_error=False)
        if not result.success:
            typer.secho(f"{job}[{partition or ALL}] failed", fg=typer.colors.RED, err=True)
            raise typer.Exit(1)
        if job == "dataset":
            from curation.partition import PartitionLayout

            versions[partition] = PartitionLayout(open_root(root), SHARDS, partition)\
                .complete_manifest().version
    return versions


@takedown_app.command("add")
def takedown_add(
    url: Annotated[list[str] | None, typer.Option(help="A URL to take down")] = None,
    domain: Annotated[list[str] | None, typer.Option(help="A domain (and subdomains)")] = None,
    reason: Annotated[str, typer.Option(help="Why (kept in the list and the audit log)")] = "",
    who: Annotated[str, typer.Option(help="Who asked")] = "",
    rebuild: Annotated[bool, typer.Option(help="Rebuild every recipe's dataset now")] = True,
    root: RootOption = "data",
    workers: int = 2,
    pipeline: Annotated[Path, typer.Option(help="pipeline.yaml")] = Path("pipeline.yaml"),
) -> None:
    """Record URLs or domains as a new version of the takedown list, then rebuild."""
    from curation.takedowns import TakedownRequest, add_takedowns

    requests = [TakedownRequest(u, reason, "url") for u in url or []]
    requests += [TakedownRequest(d, reason, "domain") for d in domain or []]
    if not requests or not reason or not who:
        typer.secho("give --url or --domain, and --reason and --who", fg=typer.colors.RED,
                    err=True)
        raise typer.Exit(2)
    store = open_root(root)
    added = add_takedowns(store, requests, who, datetime.now(UTC))
    typer.echo(f"takedown list version {added.version} (#{added.number}): "
               f"{len(added.added)} new entries")
    if rebuild:
        _rebuild_and_record(pipeline, root, workers, who, {"takedown_version": added.version})


@takedown_app.command("list")
def takedown_list(root: RootOption = "data") -> None:
    """The current takedown list."""
    from curation.takedowns import current_takedowns

    current = current_takedowns(open_root(root))
    typer.echo(f"version {current.version} (#{current.number})")
    for entry in current.entries:
        typer.echo(f"{entry.kind}\t{entry.canonical}\t{entry.reason}\t{entry.requested_by}\t"
                   f"{entry.requested_at}")


@takedown_app.command("audit")
def takedown_audit(root: RootOption = "data") -> None:
    """Every takedown event: who asked, when, what, which versions changed."""
    from curation.takedowns import audit_log

    for record in audit_log(open_root(root)):
        typer.echo(json.dumps(record, sort_keys=True, default=str))


def _rebuild_and_record(pipeline: Path, root: str, workers: int, who: str,
                        details: dict[str, str]) -> None:
    from curation.takedowns import record_audit

    started = time.perf_counter()
    versions = rebuild_after_takedown(pipeline, root, workers)
    record_audit(open_root(root), "rebuild", who, datetime.now(UTC), details, versions)
    for recipe, version in versions.items():
        typer.echo(f"recipe {recipe}: dataset version {version}")
    typer.echo(f"rebuilt in {time.perf_counter() - started:.1f} s")


@takedown_app.command("rebuild")
def takedown_rebuild(
    who: Annotated[str, typer.Option(help="Who asked (for the audit log)")],
    root: RootOption = "data",
    workers: int = 2,
    pipeline: Annotated[Path, typer.Option(help="pipeline.yaml")] = Path("pipeline.yaml"),
) -> None:
    """Rebuild the takedown list, every recipe's dataset (mix, shards, report) and the catalog,
    as `takedown add` does: after `takedown purge --no-rebuild`."""
    from curation.takedowns import current_takedowns

    _rebuild_and_record(pipeline, root, workers, who,
                        {"takedown_version": current_takedowns(open_root(root)).version})


@takedown_app.command("purge")
def takedown_purge(
    who: Annotated[str, typer.Option(help="Who runs the purge")],
    delete_old_versions: Annotated[bool, typer.Option(
        help="Also delete dataset versions that still hold the documents")] = False,
    rebuild: Annotated[bool, typer.Option(
        help="Rebuild every recipe's dataset and the catalog now (a purge makes them stale)")
    ] = True,
    root: RootOption = "data",
    workers: int = 2,
    pipeline: Annotated[Path, typer.Option(help="pipeline.yaml")] = Path("pipeline.yaml"),
) -> None:
    """Rewrite the intermediate parts, samples and reports without the taken-down text, then
    rebuild what the purge made stale."""
    from curation.report import rewrite_stored_report
    from curation.takedowns import load_tombstones, purge, versions_holding

    store = open_root(root)
    tombstones = load_tombstones(store)
    if not len(tombstones):
        typer.echo("nothing to purge: no taken-down document (rebuild after `takedown add`)")
        return
    report = purge(store, tombstones.doc_ids, delete_old_versions=delete_old_versions,
                   who=who, when=datetime.now(UTC), rewrite_report=rewrite_stored_report)
    typer.echo(f"purged {report.total_rows_removed} rows from {len(report.rows_removed)} files "
               "(parts, samples, reports); deleted versions: "
               f"{', '.join(report.deleted_versions) or 'none'}")
    if report.needs_rebuild:
        if rebuild:
            _rebuild_and_record(pipeline, root, workers, who,
                                {"takedown_version": tombstones.version, "after": "purge"})
        else:
            changed = ", ".join(sorted(report.data_versions))
            typer.secho(f"the purge changed {changed}: every recipe's dataset (mix, shards, "
                        "report) and the catalog are stale until rebuilt; run\n  corpus takedown "
                        f"rebuild --who {who} --root {root} --pipeline {pipeline}",
                        fg=typer.colors.YELLOW)
    holding = versions_holding(store, tombstones.doc_ids)
    if holding:
        typer.echo(f"older dataset versions still hold their tokens: {', '.join(holding)} "
                   "(`takedown purge --delete-old-versions` deletes them)")


# --- shards ----------------------------------------------------------------------------------


def _shards_folder(store, version: str) -> Path:  # noqa: ANN001 - a Store
    from curation.partition import PartitionLayout
    from curation.stages.dataset import local_shards, shards_prefix

    manifest = PartitionLayout(store, SHARDS, version).read_manifest()
    version = manifest.version if manifest is not None else version  # a recipe name works too
    folder = Path(tempfile.gettempdir()) / f"corpus-shards-{version}"  # S3 roots download here
    return local_shards(store, shards_prefix(version), str(folder))


@shards_app.command("verify")
def shards_verify(version: str, root: RootOption = "data") -> None:
    """Integrity of a dataset version (or a recipe's current one) against its manifest."""
    from curation.shard_integrity import verify_shards

    report = verify_shards(_shards_folder(open_root(root), version))
    typer.echo(report.summary())
    if not report.ok:
        raise typer.Exit(1)


@shards_app.command("inspect")
def shards_inspect(version: str, sequence: Annotated[int | None, typer.Option(
        help="Show this sequence's documents: doc_id, URL, token range and text")] = None,
        root: RootOption = "data", catalog: CatalogOption = None) -> None:
    """A dataset version's manifest summary, and optionally the documents of one sequence."""
    store = open_root(root)
    folder = _shards_folder(store, version)
    manifest = json.loads((folder / "manifest.json").read_text())
    summary = {key: manifest[key] for key in ("version", "dtype", "seq_len", "totals",
                                              "tokens_by_source", "tokens_by_phase")}
    typer.echo(json.dumps(summary, indent=1))
    if sequence is not None:
        for line in sequence_documents(store, folder, manifest, sequence,
                                       _catalog_path(root, catalog)):
            typer.echo(line)


EXCERPT_CHARS = 160


def _shard_of(manifest: dict, sequence: int) -> tuple[int, int]:
    """(shard, sequence within it) of a sequence counted over the whole version."""
    for index, shard in enumerate(manifest["shards"]):
        if shard["first_sequence"] <= sequence < shard["first_sequence"] + shard["sequences"]:
            return index, sequence - shard["first_sequence"]
    total = manifest["totals"]["sequences"]
    raise fail(f"sequence {sequence} is outside {manifest['version']}: valid sequences are 0 "
                f"to {total - 1}")


def _stored_tokenizer(store, sha256: str):  # noqa: ANN001, ANN202 - Store -> PinnedTokenizer
    """The recipe tokenizer with this hash, if a `tokenizer` partition still holds it."""
    from curation.catalog import read_manifests
    from curation.stages.dataset import load_stored_tokenizer

    for _, manifest in read_manifests(store, [TOKENIZER]):
        if manifest.extra.get("sha256") == sha256:
            return load_stored_tokenizer(store, manifest.partition)
    return None


def _urls(catalog_path: Path, doc_ids: list[str]) -> dict[str, str]:
    from curation.catalog import Catalog

    if not catalog_path.exists():
        return {}
    with Catalog(catalog_path) as opened:
        found = (opened.document(doc_id) for doc_id in dict.fromkeys(doc_ids))
        return {location.doc_id: location.url for location in found if location is not None}


def sequence_documents(store, folder: Path, manifest: dict, sequence: int,  # noqa: ANN001
                       catalog_path: Path) -> list[str]:
    """One line per document piece in `sequence` (doc_id, URL, token range, phase) and its text
    decoded with the version's tokenizer, then the padding."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from curation.loader import ShardDataset

    shard, row = _shard_of(manifest, sequence)
    spans = pq.read_table(folder / manifest["spans"]["name"])
    spans = spans.filter(pc.and_(pc.equal(spans["shard"], shard),
                                 pc.equal(spans["sequence"], row))).sort_by("start")
    tokens = ShardDataset(folder)[sequence]
    tokenizer = _stored_tokenizer(store, manifest["tokenizer"]["sha256"])
    urls = _urls(catalog_path, spans["doc_id"].to_pylist())
    lines = [f"sequence {sequence} (shard {shard}, its sequence {row}): {spans.num_rows} "
             "document pieces"]
    for piece in spans.to_pylist():
        lines.append(f"  tokens [{piece['start']}, {piece['end']}) {piece['doc_id']} "
                     f"{urls.get(piece['doc_id'], '(URL: refresh the catalog)')} phase "
                     f"{piece['phase']} occurrence {piece['occurrence']}")
        if tokenizer is not None:
            ids = [t for t in tokens[piece["start"]:piece["end"]].tolist()
                   if t != manifest["eos_id"]]
            text = " ".join(tokenizer.decode(ids).split())
            lines.append(f"    {text[:EXCERPT_CHARS]}{'…' if len(text) > EXCERPT_CHARS else ''}")
    if tokenizer is None:
        lines.append(f"  (tokenizer {manifest['tokenizer']['sha256'][:12]} is no longer stored: "
                     f"first ids {tokens[:32].tolist()})")
    end = int(spans["end"][-1].as_py()) if spans.num_rows else 0
    if end < manifest["seq_len"]:
        lines.append(f"  tokens [{end}, {manifest['seq_len']}) padding")
    return lines
