"""Selection fidelity on a materialized sample: the quality cut over distinct documents, and
rehydration's token shares per duplicate-group size bucket.

Reads a data root where the built-in sample is materialized (the `sample_run` fixture's, or
`corpus run` on the sample) and mixes the sample recipe with the project's kernel
(`curation.mix.build_mix`, byte-estimated tokens): the distinct documents the quality cut keeps
against the distinct documents it judges, then the web token share of each group-size bucket
without rehydration and with a FineWeb-2-like weights table.

    .venv/bin/python benchmarks/selection_fidelity.py DATA_ROOT
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from curation.config import RecipeConfig, load_recipe  # noqa: E402
from curation.mix import build_mix, gather_candidates  # noqa: E402
from curation.storage import LocalStore  # noqa: E402

WEIGHTS = {1: 1, 2: 2, "3-4": 3, "5-100": 5, "101+": 8}
FRACTIONS = (0.1, 0.3, 0.5)


def main(root: str) -> None:
    store = LocalStore(root)
    sample = load_recipe(REPO / "recipes" / "sample.yaml")
    raw = sample.model_dump(mode="json")
    candidates = gather_candidates(store, sample.partition_keys(), sample.sources)
    sizes = Counter(Counter(candidates["group_id"].to_pylist()).values())
    print(f"candidates {candidates.num_rows}; duplicate groups by size: "
          + ", ".join(f"{size}: {count}" for size, count in sorted(sizes.items())))

    web = {doc_id for doc_id, source in zip(candidates["doc_id"].to_pylist(),
                                            candidates["source"].to_pylist(), strict=True)
           if source == "web"}
    print("\n| quality_top_fraction | distinct web documents judged | kept | kept share | "
          "copies dropped as duplicate | cut before dedup: pool | cut before dedup: distinct "
          "kept (share) |\n|---:|---:|---:|---:|---:|---:|---:|")
    for fraction in FRACTIONS:
        selection = {**raw["selection"], "quality_top_fraction": fraction}
        result = build_mix(store, RecipeConfig.model_validate({**raw, "selection": selection}))
        rules = {doc_id: rule for doc_id, rule in zip(result.decisions["doc_id"].to_pylist(),
                                                      result.decisions["rule"].to_pylist(),
                                                      strict=True) if doc_id in web}
        counts = Counter(rules.values())
        judged = counts["selected"] + counts["quality"]
        # the former order: the cut over every web document still in, copies too, then dedup
        facts = [row for row in candidates.to_pylist() if rules.get(row["doc_id"]) in
                 ("selected", "quality", "duplicate")]
        survivors = set()
        for language in {row["language"] for row in facts}:
            pool = sorted((row for row in facts if row["language"] == language),
                          key=lambda row: (-row["quality_score"], row["doc_id"]))
            survivors |= {row["group_id"] for row in pool[:math.ceil(fraction * len(pool))]}
        print(f"| {fraction} | {judged} | {counts['selected']} | "
              f"{counts['selected'] / judged:.3f} | {counts['duplicate']} | {len(facts)} | "
              f"{len(survivors)} ({len(survivors) / judged:.3f}) |")

    print("\n| rehydration | phase | bucket | weight | documents | copies | occurrences | "
          "tokens | share of web tokens |\n|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name, table in (("none (weights 1)", dict.fromkeys(WEIGHTS, 1)),
                        ("FineWeb-2-like", WEIGHTS)):
        recipe = RecipeConfig.model_validate({**raw, "rehydration": table})
        for row in build_mix(store, recipe).rehydration.to_pylist():
            print(f"| {name} | {row['phase']} | {row['bucket']} | {row['weight']:g} | "
                  f"{row['documents']} | {row['copies']} | {row['occurrences']} | "
                  f"{row['achieved_tokens']} | {row['achieved_share']:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
