"""The stage floor: Dagster-free runners, one module per asset family (named like its
`corpus_assets/` and `checks/` modules). A runner reads its upstream partitions, calls the
kernels in `curation/`, and writes a versioned partition with its manifest
(docs/architecture.md, "The stage floor")."""
