"""stage_seconds: a read -> map -> write pipeline's task time by phase, from Ray Data's statistics."""

from __future__ import annotations

from types import SimpleNamespace as NS

from ads_ranking_pipelines.training.data_stats import stage_seconds


def _op(name, wall, prep=0.0, body=0.0, out=0.0):
    s = lambda v: NS(sum=v)  # noqa: E731
    return NS(operator_name=name, wall_time=s(wall), input_prep_time=s(prep), function_body_time=s(body),
              output_build_time=s(out))


class Executed:
    """What ``Dataset.get_stats_summary`` returns after a write: the last operator, then its parents."""

    def get_stats_summary(self):
        read = NS(operators_stats=[_op("ListFiles", 1.0), _op("ReadFilesParquetV2", 2.0)], parents=[])
        score = NS(operators_stats=[_op("MapBatches(score_batch)", 10.0, prep=1.5, body=7.0, out=0.5)],
                   parents=[read])
        return NS(operators_stats=[_op("Write", 3.0)], parents=[score])


def test_phases_of_a_read_map_write_pipeline():
    assert stage_seconds(Executed()) == {"read_s": 3.0, "convert_s": 2.0, "map_s": 8.0, "write_s": 3.0,
                                         "tasks_s": 16.0}


def test_a_fused_read_and_map_keeps_its_batch_conversion_apart():
    fused = NS(get_stats_summary=lambda: NS(
        operators_stats=[_op("ReadFiles->MapBatches(score_batch)", 10.0, prep=2.0, out=1.0)], parents=[]))
    assert stage_seconds(fused) == {"read_s": 7.0, "convert_s": 3.0, "map_s": 0.0, "write_s": 0.0, "tasks_s": 10.0}


def test_no_statistics_is_no_breakdown_not_a_failure():
    def broken():
        raise RuntimeError("stats actor gone")

    assert stage_seconds(NS(get_stats_summary=broken)) == {}
