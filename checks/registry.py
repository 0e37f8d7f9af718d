"""Every asset check of the code location, and which of them block their asset's downstream.

The checks are found in the `checks` package itself (a new check module needs no registration),
and the blocking map is read from their own specs, so the cross-run gates
(`corpus_assets.gates`) learn which checks block without importing the definitions.
"""

from collections.abc import Sequence

from dagster import AssetChecksDefinition, load_asset_checks_from_package_module

import checks

ASSET_CHECKS: Sequence[AssetChecksDefinition] = load_asset_checks_from_package_module(checks)


def _blocking(definitions: Sequence[AssetChecksDefinition]) -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for definition in definitions:
        for spec in definition.check_specs:
            if spec.blocking:
                found.setdefault(spec.asset_key.to_user_string(), []).append(spec.name)
    return {asset: tuple(sorted(names)) for asset, names in sorted(found.items())}


BLOCKING_CHECKS: dict[str, tuple[str, ...]] = _blocking(ASSET_CHECKS)
"""Asset name -> the names of its blocking checks."""
