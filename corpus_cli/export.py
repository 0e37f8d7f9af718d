"""`corpus export`: a dataset version in a format other tools open (`curation.stages.export`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from corpus_cli.common import load_pipeline_or_exit, open_root, validated_recipes
from corpus_cli.deployment import fail
from curation.config import load_recipe
from curation.stages.export import FORMATS, ExportError, ExportSettings, export_dataset, recipe_of


def export(
    version: Annotated[str, typer.Argument(help="A dataset version, or a recipe name for its "
                                                "current version")],
    format: Annotated[str, typer.Option(  # noqa: A002 - the option users type
        "--format", help=f"One of: {', '.join(FORMATS)}")],
    out: Annotated[Path, typer.Option(help="The folder to write (its export files replaced)")],
    root: Annotated[str, typer.Option(help="Storage root: folder or s3://bucket/prefix")] = "data",
    pipeline: Annotated[Path, typer.Option(help="The deployment's pipeline.yaml")] = Path(
        "pipeline.yaml"),
    rows_per_file: Annotated[int, typer.Option(help="hf-parquet: rows per file", min=1)] = (
        ExportSettings.rows_per_file),
    validation_fraction: Annotated[float, typer.Option(
        help="nanogpt: the share of sequences held out into val.bin (the loader's split)",
        min=0.0, max=0.99)] = ExportSettings.validation_fraction,
) -> None:
    """Export a dataset version: hf-parquet (Hugging Face datasets), mds (MosaicML Streaming)
    or nanogpt (flat token files); the current takedown list is honoured."""
    if format not in FORMATS:
        raise fail(f"--format {format}: use one of {', '.join(FORMATS)}")
    config = load_pipeline_or_exit(pipeline)
    store = open_root(root)
    try:
        name = recipe_of(store, version, validated_recipes(pipeline))
        recipe = load_recipe(pipeline.resolve().parent / "recipes" / f"{name}.yaml", config)
        result = export_dataset(store, name, recipe, config, format, out, ExportSettings(
            rows_per_file=rows_per_file, validation_fraction=validation_fraction))
    except ExportError as error:
        raise fail(str(error)) from None
    unit = "sequences" if format == "nanogpt" else "occurrences"
    typer.echo(f"{result.dataset_version} ({name}) as {format}: {result.rows:,} {unit}, "
               f"{result.tokens:,} tokens, {len(result.files)} files in {out}")
    if result.taken_down.documents:
        typer.echo(f"takedowns {result.taken_down.version}: {result.taken_down.documents} "
                   f"documents, {result.taken_down.occurrences} occurrences and "
                   f"{result.taken_down.tokens:,} tokens left out")
