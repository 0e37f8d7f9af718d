"""Registers the `snapshot` partitions declared in `pipeline.yaml`."""


from dagster import DefaultSensorStatus, SensorEvaluationContext, SensorResult, SkipReason, sensor

from partitions import SNAPSHOT_PARTITIONS_NAME, snapshot_partitions
from resources import PipelineResource


@sensor(minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING,
        description="Adds every snapshot and source:NAME of pipeline.yaml to the snapshot "
        "partition set.")
def register_partitions(context: SensorEvaluationContext, pipeline: PipelineResource):
    declared = pipeline.load().partition_keys()
    known = set(context.instance.get_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME))
    missing = [key for key in declared if key not in known]
    if not missing:
        return SkipReason("every partition in pipeline.yaml is registered")
    return SensorResult(
        dynamic_partitions_requests=[snapshot_partitions.build_add_request(missing)]
    )
