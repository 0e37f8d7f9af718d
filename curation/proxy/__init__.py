"""The ablation gate: train a small proxy LM on a dataset version's shards, score it zero-shot on
downstream multiple-choice tasks and on held-out text, and compare two versions. Plain Python and
PyTorch, no Dagster; torch is imported only by the functions that need it.

Modules, each importing only those above it: `reports` (settings, report types, bootstrap),
`evalsets` (the benchmark parsers), `model` (the torch model and its training), `scoring`
(zero-shot scores, held-out loss and `run_proxy_eval`, the whole run) and `compare` (the verdict
between two reports and the markdown; it imports only `reports`).
"""
