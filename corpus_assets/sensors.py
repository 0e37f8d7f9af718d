"""Registers the `snapshot` partitions declared in `pipeline.yaml` and the `recipe` partitions
of the recipes folder."""


from dagster import DefaultSensorStatus, SensorEvaluationContext, SensorResult, SkipReason, sensor

from partitions import (
    RECIPE_PARTITIONS_NAME,
    SNAPSHOT_PARTITIONS_NAME,
    recipe_partitions,
    snapshot_partitions,
)
from resources import PipelineResource


@sensor(minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING,
        description="Adds every snapshot and source:NAME of pipeline.yaml to the snapshot "
        "partition set, and every recipe of the recipes folder to the recipe partition set.")
def register_partitions(context: SensorEvaluationContext, pipeline: PipelineResource):
    requests = []
    for name, partitions, declared in (
        (SNAPSHOT_PARTITIONS_NAME, snapshot_partitions, pipeline.load().partition_keys()),
        (RECIPE_PARTITIONS_NAME, recipe_partitions, pipeline.recipe_names()),
    ):
        known = set(context.instance.get_dynamic_partitions(name))
        missing = [key for key in declared if key not in known]
        if missing:
            requests.append(partitions.build_add_request(missing))
    if not requests:
        return SkipReason("every partition in pipeline.yaml and every recipe is registered")
    return SensorResult(dynamic_partitions_requests=requests)
