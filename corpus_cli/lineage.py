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

lineage_app = typer.Typer(help="Record-level lineage: URL, token and asset look-ups.",
                          no_args_is_help=True)
takedown_app = typer.Typer(help="Take pages down: record, rebuild, purge, audit.",
                           no_args_is_help=True)
shards_app = typer.Typer(help="Training shards: verify and inspect a dataset version.",
                         no_args_is_help=True)

RootOption = Annotated[str, typer.Option(help="Storage root: folder or s3://bucket/prefix")]
CatalogOption = Annotated[Path | None, typer.Option(
    help="The catalog file (default: ROOT/catalog.duckdb)")]


def _store(root: str):  # noqa: ANN202 - a curation Store
    from dagster_aws.s3 import S3Resource

    from resources import StorageResource

    return StorageResource(root=root, s3=S3Resource()).store


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
    """Where a URL (any spelling) or domain is: versions, shards and token ranges, or why not."""
    with _open_catalog(root, catalog) as opened:
        found = opened.find_url(url)
        if not found:
            typer.echo(f"{url}: no document with this URL or domain")
            raise typer.Exit(1)
        for location in found:
            typer.echo(location.explain())


@lineage_app.command("token")
def lineage_token(version: str, shard: str, offset: int, root: RootOption = "data",
                  catalog: CatalogOption = None) -> None:
    """The document behind token OFFSET of SHARD (index or name) in dataset VERSION."""
    with _open_catalog(root, catalog) as opened:
        where = opened.at_token(version, int(shard) if shard.isdigit() else shard, offset)
        typer.echo(json.dumps(asdict(where), indent=1, default=str))


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

    summary = refresh_catalog(_store(root), _catalog_path(root, catalog))
    typer.echo(f"{summary.path}: {summary.rows} in {summary.seconds:.1f} s")


# --- takedowns -------------------------------------------------------------------------------


def rebuild_after_takedown(pipeline: Path, root: str, workers: int) -> dict[str, str]:
    """Materializes the takedown list, then every recipe's dataset, then the catalog; returns
    recipe -> dataset version. Nothing upstream of the mix runs."""
    from corpus_assets.definitions import defs
    from corpus_assets.main_job import main_run_config
    from corpus_cli.main import _instance, _recipes, register

    register(pipeline)
    instance = _instance()
    config = main_run_config(str(pipeline), root, workers)
    versions = {}
    plan = [("takedown_list", None), *(("dataset", r) for r in _recipes(pipeline)),
            ("lineage", None)]
    for job, partition in plan:
        result = defs.resolve_job_def(job).execute_in_process(
            partition_key=partition, instance=instance, run_config=config,
            raise_on_error=False)
        if not result.success:
            typer.secho(f"{job}[{partition or 'all'}] failed", fg=typer.colors.RED, err=True)
            raise typer.Exit(1)
        if job == "dataset":
            from curation.partition import PartitionLayout

            versions[partition] = PartitionLayout(_store(root), "shards", partition)\
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
    from curation.takedowns import TakedownRequest, add_takedowns, record_audit

    requests = [TakedownRequest(u, reason, "url") for u in url or []]
    requests += [TakedownRequest(d, reason, "domain") for d in domain or []]
    if not requests or not reason or not who:
        typer.secho("give --url or --domain, and --reason and --who", fg=typer.colors.RED,
                    err=True)
        raise typer.Exit(2)
    store = _store(root)
    added = add_takedowns(store, requests, who, datetime.now(UTC))
    typer.echo(f"takedown list version {added.version} (#{added.number}): "
               f"{len(added.added)} new entries")
    if rebuild:
        started = time.perf_counter()
        versions = rebuild_after_takedown(pipeline, root, workers)
        record_audit(store, "rebuild", who, datetime.now(UTC),
                     {"takedown_version": added.version}, versions)
        for recipe, version in versions.items():
            typer.echo(f"recipe {recipe}: dataset version {version}")
        typer.echo(f"rebuilt in {time.perf_counter() - started:.1f} s")


@takedown_app.command("list")
def takedown_list(root: RootOption = "data") -> None:
    """The current takedown list."""
    from curation.takedowns import current_takedowns

    current = current_takedowns(_store(root))
    typer.echo(f"version {current.version} (#{current.number})")
    for entry in current.entries:
        typer.echo(f"{entry.kind}\t{entry.canonical}\t{entry.reason}\t{entry.requested_by}\t"
                   f"{entry.requested_at}")


@takedown_app.command("audit")
def takedown_audit(root: RootOption = "data") -> None:
    """Every takedown event: who asked, when, what, which versions changed."""
    from curation.takedowns import audit_log

    for record in audit_log(_store(root)):
        typer.echo(json.dumps(record, sort_keys=True, default=str))


@takedown_app.command("purge")
def takedown_purge(
    who: Annotated[str, typer.Option(help="Who runs the purge")],
    delete_old_versions: Annotated[bool, typer.Option(
        help="Also delete dataset versions that still hold the documents")] = False,
    root: RootOption = "data",
) -> None:
    """Rewrite the intermediate parts and samples without the taken-down text."""
    from curation.takedowns import load_tombstones, purge

    store = _store(root)
    tombstones = load_tombstones(store)
    if not len(tombstones):
        typer.echo("nothing to purge: no taken-down document (rebuild after `takedown add`)")
        return
    report = purge(store, tombstones.doc_ids, delete_old_versions=delete_old_versions,
                   who=who, when=datetime.now(UTC))
    removed = sum(report.rows_removed.values())
    typer.echo(f"purged {removed} rows from {len(report.rows_removed)} files; deleted "
               f"versions: {', '.join(report.deleted_versions) or 'none'}")


# --- shards ----------------------------------------------------------------------------------


def _shards_folder(store, version: str) -> Path:  # noqa: ANN001 - a Store
    from curation.dataset_stage import local_shards, shards_prefix
    from curation.partition import PartitionLayout

    manifest = PartitionLayout(store, "shards", version).read_manifest()
    version = manifest.version if manifest is not None else version  # a recipe name works too
    folder = Path(tempfile.gettempdir()) / f"corpus-shards-{version}"  # S3 roots download here
    return local_shards(store, shards_prefix(version), str(folder))


@shards_app.command("verify")
def shards_verify(version: str, root: RootOption = "data") -> None:
    """Integrity of a dataset version (or a recipe's current one) against its manifest."""
    from curation.shards import verify_shards

    report = verify_shards(_shards_folder(_store(root), version))
    typer.echo(report.summary())
    if not report.ok:
        raise typer.Exit(1)


@shards_app.command("inspect")
def shards_inspect(version: str, sequence: Annotated[int | None, typer.Option(
        help="Show this sequence's documents and its first tokens")] = None,
        root: RootOption = "data") -> None:
    """A dataset version's manifest summary, and optionally one sequence."""
    from curation.loader import ShardDataset

    folder = _shards_folder(_store(root), version)
    manifest = json.loads((folder / "manifest.json").read_text())
    summary = {key: manifest[key] for key in ("version", "dtype", "seq_len", "totals",
                                              "tokens_by_source", "tokens_by_phase")}
    typer.echo(json.dumps(summary, indent=1))
    if sequence is not None:
        data = ShardDataset(folder)
        typer.echo(f"sequence {sequence}: boundaries {data.document_boundaries(sequence)}; "
                   f"first tokens {data[sequence][:32].tolist()}")
