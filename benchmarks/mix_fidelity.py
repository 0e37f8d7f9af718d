"""Mix fidelity: each source's share of the tokens in the shards against the recipe's target.

Real inputs from ``../shared/data``: 181 article pages (the extraction gold set) as the web, the
62 WikiText articles and the 7 Gutenberg books as curated sources, the GPT-2 tokenizer. Each
recipe is mixed and sharded by the project's kernels (`curation.mix`, `curation.shards`), and the
delivered share is read from the shards' `manifest.json`; the allowed miss is what the
`mix_shares_on_target` gate allows (the tolerance, plus half of each source's largest document
over the phase's tokens), and the gate's verdict. Also times the exact token count the mix
makes of every selected document.

    .venv/bin/python benchmarks/mix_fidelity.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from curation.mix import (  # noqa: E402
    count_tokens,
    delivered_tokens,
    gather_candidates,
    share_failures,
)
from curation.partition import PartitionLayout  # noqa: E402
from curation.storage import LocalStore  # noqa: E402
from curation.tokenizer import tokenizer_from_bytes  # noqa: E402
from tests import test_mix_fidelity as corpus  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
RECIPES = (("wiki", 0.8), ("wiki", 0.9), ("books", 0.8))


def main() -> None:
    store = LocalStore(tempfile.mkdtemp(prefix="mix-fidelity-"))
    corpus.write_partition(store, corpus.WEB, corpus.article_pages(SHARED))
    corpus.write_partition(store, "source:wiki", corpus.wiki_articles(SHARED))
    corpus.write_partition(store, "source:books", corpus.books(SHARED))
    corpus._write(store, "cross_dedup", "all", corpus.CLUSTER_SCHEMA.empty_table())
    gpt2 = tokenizer_from_bytes((SHARED / "tokenizers/gpt2/tokenizer.json").read_bytes(),
                                name="gpt2")
    print("| recipe | source | target | delivered | miss | allowed miss | gate "
          "| tokens in shards |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for source, web in RECIPES:
        name = f"{source}-{round(web * 100)}"
        weights = {"web": web, source: round(1 - web, 2)}
        mix = corpus.recipe(name, source, weights, max_epochs=10)
        manifest = corpus.shards_manifest(store, corpus.pipeline(**{source: {}}), mix, gpt2)
        shares = PartitionLayout(store, "mix", name).read_table(name="shares").to_pylist()
        phase_tokens = sum(manifest["tokens_by_source"].values())
        allowed = corpus.TOLERANCE + sum(row["largest_document_tokens"] for row in shares) / 2 \
            / phase_tokens
        failures = share_failures(PartitionLayout(store, "mix", name).read_table(name="shares"),
                                  corpus.TOLERANCE,
                                  delivered_tokens(manifest["tokens_by_phase_source"]))
        for row in shares:
            delivered = corpus.delivered_shares(manifest)[row["source"]]
            target = weights[row["source"]]
            verdict = "fails" if any(f"source {row['source']} " in f for f in failures) \
                else "passes"
            print(f"| {name} | {row['source']} | {target:.2%} | {delivered:.2%} | "
                  f"{abs(delivered - target):.2%} | {allowed:.2%} | {verdict} | "
                  f"{phase_tokens:,} |")
    candidates = gather_candidates(store, [corpus.WEB, "source:wiki", "source:books"])
    started = time.perf_counter()
    counts = count_tokens(store, candidates, gpt2)
    seconds = time.perf_counter() - started
    tokens = sum(counts["tokens"].to_pylist())
    print(f"\nexact token count: {candidates.num_rows:,} documents, {tokens:,} tokens in "
          f"{seconds:.2f} s ({tokens / seconds / 1e6:.2f}M tokens/s, one thread)")


if __name__ == "__main__":
    main()
