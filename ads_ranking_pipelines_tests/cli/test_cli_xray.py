"""``ads-ranking xray serve`` refuses an unsafe bind before serving anything."""

from __future__ import annotations

from ads_ranking_pipelines_tests.cli.helpers import cli_env, run_cli


def test_non_loopback_bind_without_a_token_exits_2(tmp_path) -> None:
    result = run_cli("xray", "serve", "--host", "0.0.0.0", "--no-kuberay", env=cli_env(tmp_path))
    assert result.returncode == 2
    assert "invalid --host = '0.0.0.0'" in result.stderr and "--token" in result.stderr


def test_bad_port_exits_2(tmp_path) -> None:
    result = run_cli("xray", "serve", "--port", "0", env=cli_env(tmp_path))
    assert result.returncode == 2 and "invalid --port = 0" in result.stderr
