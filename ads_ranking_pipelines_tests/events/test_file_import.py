"""The criteo_tsv / avazu_csv sources: streaming import, row-count check, bad input with file:line."""

import datetime as dt
import json
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.file_import import (
    IMPORT_RECORD, ImportFormatError, import_record, import_source,
)
from ads_ranking_pipelines.events.importers import shared_datasets_dir
from ads_ranking_pipelines.events.layout import available_days, read_days, read_marker
from ads_ranking_pipelines.events.window_checks import check_labels, validate_schema

DAY = dt.date(2026, 11, 1)
DATASETS = shared_datasets_dir()
needs_datasets = pytest.mark.needs_datasets


def criteo_line(label, i=0, dense=None, cats=None):
    dense = dense if dense is not None else [str(i % 7), "" if i % 3 else "-1"] + [str(i)] * 11
    cats = cats if cats is not None else [f"{(i * 2654435761) % 4096:08x}", ""] + ["68fd1e64"] * 24
    return "\t".join([str(label), *dense, *cats])


def write_criteo(path, n, positive_every=4, extra=None):
    lines = [criteo_line(1 if i % positive_every == 0 else 0, i) for i in range(n)]
    for at, line in (extra or {}).items():
        lines[at] = line
    path.write_text("\n".join(lines) + "\n")
    return path


def source(tmp_path, path, kind="criteo_tsv", rows_per_day=100, **kw):
    return SourceConfig(kind=kind, uri=str(path), start_date=DAY, rows_per_day=rows_per_day,
                        **kw).with_root(str(tmp_path / "home"))


def test_criteo_rows_are_laid_onto_days_in_file_order(tmp_path):
    src = source(tmp_path, write_criteo(tmp_path / "train.txt", 250))
    report = import_source(src, chunk_bytes=4096, log=lambda m: None)
    days = [DAY + dt.timedelta(days=i) for i in range(3)]
    assert report.days == [d.isoformat() for d in days] and report.rows_written == 250
    assert report.partial_last_day and read_marker(src.events_uri, days[2])["partial"] is True
    view = src.events_source()
    assert view.kind == "parquet" and available_days(view.uri) == days
    schema = validate_schema(view, days[0])
    assert schema.field("I2").type == pa.int64() and schema.field("C2").type == pa.string()
    t = read_days(view, days)
    assert t.num_rows == 250 and t.column("I1").to_pylist()[:3] == [0, 1, 2]
    assert t.column("I2").null_count > 0 and -1 in t.column("I2").to_pylist()  # empty, negative
    assert t.column("C2").null_count == 250
    assert [read_days(view, [d]).num_rows for d in days] == [100, 100, 50]
    assert check_labels(view, days)["positives"] == 63
    assert read_marker(src.events_uri, days[1])["lines"].endswith(":101-200")


def test_import_runs_once_and_again_when_the_file_changes(tmp_path):
    path = write_criteo(tmp_path / "train.txt", 200)
    src = source(tmp_path, path)
    assert not import_source(src, log=lambda m: None).skipped
    assert import_record(src)["rows_written"] == 200
    assert import_source(src, log=lambda m: None).skipped
    write_criteo(path, 300)
    again = import_source(src, log=lambda m: None)
    assert not again.skipped and again.rows_written == 300


@pytest.mark.parametrize("line, reason", [
    ("\t".join(["0"] * 39), "expected 40 tab-separated fields, found 39"),
    (criteo_line(0, dense=["x1"] + ["1"] * 12), "column 'I1' must be an integer"),
    (criteo_line(2), "label 'label' must be 0 or 1"),
    ("", "label 'label' must be 0 or 1"),
])
def test_a_malformed_line_fails_with_file_and_line(tmp_path, line, reason):
    path = write_criteo(tmp_path / "train.txt", 300, extra={250: line})
    src = source(tmp_path, path)
    with pytest.raises(ImportFormatError) as err:
        import_source(src, chunk_bytes=2048, log=lambda m: None)
    assert f"{path}:251: " in str(err.value) and reason in str(err.value)
    assert err.value.line == 251
    # days before the bad line are complete; the day holding it never became visible
    assert available_days(src.events_uri) == [DAY, DAY + dt.timedelta(days=1)]
    assert import_record(src) is None


def test_tolerated_bad_rows_are_skipped_and_counted(tmp_path):
    path = write_criteo(tmp_path / "train.txt", 300, extra={10: "1\t2", 20: criteo_line(7)})
    src = source(tmp_path, path, max_bad_rows=2)
    report = import_source(src, chunk_bytes=2048, log=lambda m: None)
    assert report.rows_written == 298 and report.rows_skipped == 2
    assert sorted(s["line"] for s in report.skipped_samples) == [11, 21]
    assert json.loads((tmp_path / "home").joinpath(
        src.events_uri.split("/home/")[1], IMPORT_RECORD).read_text())["rows_skipped"] == 2


def test_a_file_of_another_format_is_refused_at_line_1(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("id,click,hour\n1,0,14102100\n")
    with pytest.raises(ImportFormatError, match=r"train.csv:1: expected 40 tab-separated fields, found 1"):
        import_source(source(tmp_path, path), log=lambda m: None)
    with pytest.raises(ImportFormatError, match=r"train.csv:1: header .* is not the avazu_csv header"):
        import_source(source(tmp_path, path, kind="avazu_csv"), log=lambda m: None)


def test_a_day_without_clicks_fails_naming_its_lines(tmp_path):
    lines = [criteo_line(1 if (i < 100 and i % 5 == 0) else 0, i) for i in range(200)]
    path = tmp_path / "train.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError, match=r"day 2026-11-02 \(100 rows, .*train.txt:101-200\) has no positive"):
        import_source(source(tmp_path, path), log=lambda m: None)


AVAZU_HEADER = ("id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,app_domain,"
                "app_category,device_id,device_ip,device_model,device_type,device_conn_type,"
                "C14,C15,C16,C17,C18,C19,C20,C21")


def avazu_line(i, click):
    return (f"{1000 + i},{click},141021{i % 24:02d},1005,0,1fbe01fe,f3845767,28905ebd,ecad2386,"
            f"7801e8d9,07d7df22,a99f214a,ddd2926e,44956a24,1,2,15706,320,50,1722,0,35,-1,79")


def test_avazu_files_continue_each_other_with_or_without_header(tmp_path):
    a = tmp_path / "a.csv"
    b = tmp_path / "b.csv"
    a.write_text("\n".join([AVAZU_HEADER] + [avazu_line(i, int(i % 3 == 0)) for i in range(150)]) + "\n")
    b.write_text("\n".join(avazu_line(i, int(i % 3 == 0)) for i in range(150, 200)))  # no final newline
    src = source(tmp_path, f"{a},{b}", kind="avazu_csv")
    report = import_source(src, chunk_bytes=1024, log=lambda m: None)
    assert report.rows_written == 200 and len(report.days) == 2
    t = read_days(src.events_source(), [DAY, DAY + dt.timedelta(days=1)], ["id", "hour_of_day", "C20"])
    assert t.column("id").to_pylist()[148:152] == ["1148", "1149", "1150", "1151"]
    assert t.column("hour_of_day").to_pylist()[:3] == [0, 1, 2]
    assert t.column("C20").to_pylist()[0] == -1
    assert src.sparse_columns[-1] == "hour_of_day" and "id" not in src.sparse_columns


def test_streaming_import_keeps_memory_flat(tmp_path):
    """Peak Arrow memory of an import does not grow with the file: 8x the rows, same peak."""
    script = textwrap.dedent("""
        import sys, pyarrow as pa
        from ads_ranking_pipelines.config.source import SourceConfig
        from ads_ranking_pipelines.events.file_import import import_source
        src = SourceConfig(kind="criteo_tsv", uri=sys.argv[1], start_date="2026-11-01",
                           rows_per_day=int(sys.argv[2])).with_root(sys.argv[3])
        r = import_source(src, chunk_bytes=1 << 16, log=lambda m: None)
        print(r.rows_written, pa.default_memory_pool().max_memory())
    """)
    peaks = {}
    for n in (6_000, 48_000):
        path = write_criteo(tmp_path / f"t{n}.txt", n)
        assert path.stat().st_size > 50 * (1 << 16) * n / 48_000
        out = subprocess.run([sys.executable, "-c", script, str(path), str(n // 2), str(tmp_path / f"h{n}")],
                             capture_output=True, text=True, check=True, timeout=300).stdout.split()
        assert int(out[0]) == n
        peaks[n] = int(out[1])
    # the big file is ~12 MB and 40+ chunks; a whole-file read would need many times the chunk
    assert peaks[48_000] < 1.5 * peaks[6_000] + (1 << 20), peaks
    assert peaks[48_000] < 16 * (1 << 16) + (4 << 20), peaks


@needs_datasets
def test_the_shared_samples_import(tmp_path):
    crit = source(tmp_path, DATASETS / "criteo-sample" / "train_head_10k.txt", rows_per_day=2000)
    r = import_source(crit, log=lambda m: None)
    assert r.rows_written == 10_000 and len(r.days) == 5 and r.rows_skipped == 0
    files = ",".join(str(DATASETS / "avazu-sample" / f) for f in ("avazu_part_a.csv", "avazu_part_b.csv"))
    av = source(tmp_path, files, kind="avazu_csv", rows_per_day=2000)
    r = import_source(av, log=lambda m: None)
    assert r.rows_written == 9_999 and r.days[-1] == "2026-11-05" and r.partial_last_day
    counts = check_labels(av.events_source(), [DAY + dt.timedelta(days=i) for i in range(5)])
    assert 0.1 < counts["positives"] / counts["rows"] < 0.3
