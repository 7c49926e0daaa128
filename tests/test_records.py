"""The record line: format, escaping, parsing, limits."""
import pytest

from crewfile.core import records
from crewfile.core.errors import BadInput


def test_round_trip_escapes_every_control_character():
    text = "a\nb\rc\td\\e\x00f\x1b[31mg\x7fh\u0085i\u2028j é ✓"
    line = records.new_line("note", text)
    assert line.count("\n") == 1 and line.endswith("\n")
    assert all(c >= " " or c == "\n" for c in line)
    rec = records.parse(line)
    assert rec.kind == "note" and rec.text == text


def test_format_without_text_has_no_colon():
    line = records.format_line("2026-11-29T22:01:17.123Z", "idle")
    assert line == "2026-11-29T22:01:17.123Z idle\n"
    assert records.parse(line) == records.Record("2026-11-29T22:01:17.123Z", "idle", "")


def test_timestamp_shape_and_value():
    assert records.timestamp(0.5) == "1970-01-01T00:00:00.500Z"
    ts = records.timestamp(1796596877.1239)
    assert ts == "2026-12-06T22:41:17.123Z"
    assert records.parse_timestamp(ts) == pytest.approx(1796596877.123)


@pytest.mark.parametrize("kind", ["", "Idle", "turn ended", "x" * 33, "-x", "1x", "é", "a_b"])
def test_bad_kinds_are_refused(kind):
    with pytest.raises(BadInput):
        records.new_line(kind)


def test_oversized_record_is_refused_not_cut():
    records.new_line("note", "x" * (records.MAX_LINE - 40))
    with pytest.raises(BadInput, match="longer than"):
        records.new_line("note", "x" * records.MAX_LINE)


def test_text_that_is_not_utf8_is_refused():
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")
    with pytest.raises(BadInput, match="UTF-8"):
        records.new_line("note", bad)


@pytest.mark.parametrize("raw", [
    b"", b"garbage", b"2026-11-29T22:01:17Z idle", b"2026-11-29T22:01:17.123Z Idle",
    b"2026-11-29T22:01:17.123Z idle: caf\xe9", b"2026-11-29 22:01:17.123Z idle",
])
def test_garbage_does_not_parse(raw):
    assert records.parse(raw) is None
