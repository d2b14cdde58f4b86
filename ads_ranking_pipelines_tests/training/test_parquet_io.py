"""Parquet reads start one footer-reading actor per batch of 10 files, not Ray Data's 32."""

from __future__ import annotations

from ads_ranking_pipelines.training.parquet_io import FOOTER_ACTORS_ENV, footer_actor_count, footer_readers


def test_one_footer_actor_per_batch_of_ten_files_up_to_rays_default():
    assert [footer_actor_count(n) for n in (0, 1, 10, 11, 95, 10_000)] == [1, 1, 1, 2, 10, 32]


def test_the_setting_lasts_for_the_read_only_and_a_users_value_wins():
    env: dict[str, str] = {}
    with footer_readers(3, env):
        assert env == {FOOTER_ACTORS_ENV: "1"}
    assert env == {}
    mine = {FOOTER_ACTORS_ENV: "16"}
    with footer_readers(3, mine):
        assert mine == {FOOTER_ACTORS_ENV: "16"}
    assert mine == {FOOTER_ACTORS_ENV: "16"}


def test_rays_parquet_reader_still_reads_the_variable():
    """Guards the pin: if Ray renames the knob, this setting silently stops working."""
    import inspect

    from ray.data._internal.datasource_v2.formats.parquet import footer_file_indexer

    assert FOOTER_ACTORS_ENV in inspect.getsource(footer_file_indexer)
