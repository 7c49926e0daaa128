"""The fast path of reading a schedule listing never weakens its checks:
schedules.load_all (each file opened in one descriptor on nudges/) reports
and skips every bad file (garbage, wrong shape, a link, a directory, a
FIFO, empty) exactly as reading it by its path does, and keeps every good
one. And a schedule's every field, broken, is named."""
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from crewfile.nudges import schedules
from crewfile.core import shapes
from crewfile.core.errors import BadFile, CrewfileError
from crewfile.core.paths import Crew


class Int(int):
    pass


def test_every_field_of_a_valid_schedule_broken_is_still_named():
    good = {"id": "n1", "every": 60, "message": "m", "max": 3, "attempts": 0, "armed": True,
            "base": {"wall": 1.0, "mono": None, "boot": None}, "created": "2026-11-30T21:27:45.111Z"}
    assert shapes.check("schedule", dict(good), "p")
    for field, bad in [("every", 0), ("every", 10 ** 9 + 1), ("every", True), ("every", 1.0),
                       ("armed", 1), ("id", 5), ("created", "2026-11-30"), ("base", {"wall": "1"}),
                       ("attempts", -1), ("max", Int(3))]:
        with pytest.raises(BadFile) as e:
            shapes.check("schedule", dict(good, **{field: bad}), "p")
        assert f"field {field!r} must be" in str(e.value)


def _schedule(sid):
    return {"id": sid, "every": 60, "message": "m", "max": 3, "attempts": 0, "armed": True,
            "base": {"wall": 1.0}}


ENTRIES = st.sampled_from(["good", "garbage", "truncated", "wrong-shape", "wrong-id", "empty",
                           "symlink", "dir", "fifo", "dot", "bom", "not-utf8"])


def _make(d, name, what):
    path = os.path.join(d, name)
    body = {"good": json.dumps(_schedule(name)).encode(), "garbage": b"\x00\xffnot json",
            "truncated": json.dumps(_schedule(name)).encode()[:-3],
            "wrong-shape": json.dumps({**_schedule(name), "every": "x"}).encode(),
            "wrong-id": json.dumps(_schedule("n_other")).encode(), "empty": b"",
            "bom": b"\xef\xbb\xbf" + json.dumps(_schedule(name)).encode(),
            "not-utf8": json.dumps(_schedule(name)).encode().replace(b'"m"', b'"\xff"')}
    if what in body:
        with open(path, "wb") as f:
            f.write(body[what])
    elif what == "symlink":
        good = os.path.join(os.path.dirname(d), "outside")
        with open(good, "w") as f:
            json.dump(_schedule(name), f)
        os.symlink(good, path)
    elif what == "dir":
        os.mkdir(path)
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "dot":
        with open(os.path.join(d, "." + name), "w") as f:
            f.write("{")


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(ENTRIES, min_size=1, max_size=8))
def test_a_listing_reports_and_skips_each_bad_file_as_reading_it_by_path_does(tmp_path_factory,
                                                                               kinds):
    root = tmp_path_factory.mktemp("c") / "crew"
    crew = Crew(str(root))
    d = crew.ensure_sub("nudges")
    for i, what in enumerate(kinds):
        _make(d, f"n{i:010d}", what)
    want_good, want_bad = [], []
    for name in sorted(os.listdir(d)):
        if name.startswith("."):
            continue
        try:
            obj = schedules._read(os.path.join(d, name))    # by its path: the slow way
        except CrewfileError as e:
            want_bad.append((name, type(e), str(e)))
            continue
        want_good.append(obj)
    bad = []
    got = schedules.load_all(crew, bad)
    assert got == want_good
    assert sorted((n, type(e), str(e)) for n, e in bad) == want_bad
    assert len(got) == kinds.count("good") + kinds.count("not-utf8")   # read as U+FFFD


def test_a_linked_nudges_directory_is_refused_as_before(tmp_path):
    crew = Crew(str(tmp_path / "crew"))
    crew.ensure()
    os.mkdir(tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", os.path.join(crew.root, "nudges"))
    with pytest.raises(CrewfileError, match="a symlink is not followed"):
        schedules.load_all(crew)
