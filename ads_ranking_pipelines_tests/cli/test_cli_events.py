"""``ads-ranking events import`` as a user runs it."""

import json

from ads_ranking_pipelines_tests.events.test_file_import import write_criteo

from .helpers import cli_env, run_cli


def _yaml(tmp_path, body):
    path = tmp_path / "src" / "source.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    return path


def test_events_import_writes_days_once_and_reports_json(tmp_path):
    (tmp_path / "src").mkdir()
    write_criteo(tmp_path / "src" / "train.txt", 250)
    src = _yaml(tmp_path, "kind: criteo_tsv\nuri: train.txt\nstart_date: 2026-11-01\nrows_per_day: 100\n")
    env = cli_env(tmp_path)
    first = run_cli("events", "import", "--source", str(src), env=env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout.strip().splitlines()[-1])
    assert report["rows_written"] == 250 and report["days"] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert report["events_uri"].startswith(str(tmp_path / "ads_home" / "events" / "criteo_tsv-"))
    again = run_cli("events", "import", "--source", str(src), env=env)
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["skipped"]
    assert "already imported" in again.stderr


def test_events_import_bad_line_and_bad_kind_exit_2(tmp_path):
    (tmp_path / "src").mkdir()
    write_criteo(tmp_path / "src" / "train.txt", 120, extra={57: "1\tnot\tenough"})
    src = _yaml(tmp_path, "kind: criteo_tsv\nuri: train.txt\nstart_date: 2026-11-01\nrows_per_day: 100\n")
    bad = run_cli("events", "import", "--source", str(src), env=cli_env(tmp_path))
    # the stderr in full on failure: a rare abort at exit (SIGABRT, see benchmarks/DESIGN_MEASUREMENTS.md)
    # prints every thread's stack there (PYTHONFAULTHANDLER), which the result's repr cuts off
    assert bad.returncode == 2 and f"{tmp_path / 'src' / 'train.txt'}:58: expected 40" in bad.stderr, \
        f"exit {bad.returncode}\n{bad.stderr[-8000:]}"
    par = _yaml(tmp_path, "kind: parquet\nuri: /x\nlabel_column: y\nsparse_columns: [a]\n")
    out = run_cli("events", "import", "--source", str(par), env=cli_env(tmp_path))
    assert out.returncode == 2 and "only criteo_tsv and avazu_csv" in out.stderr
    missing = _yaml(tmp_path, "kind: criteo_tsv\nuri: train.txt\nstart_date: 2026-11-01\n")
    out = run_cli("events", "import", "--source", str(missing), env=cli_env(tmp_path))
    assert out.returncode == 2 and "rows_per_day" in out.stderr
