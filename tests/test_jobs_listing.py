"""job-ls over hostile job directories: jobs.list_jobs opens jobs/ once and
each job's directory once in it (paths.open_dir(at=)), reading the files by
name in that descriptor. It must answer exactly as reading every job by its
paths does (the one path opener checking each file's directories): the same
rows, the same marked errors, for a link, a FIFO, a directory, garbage, a
file too long, a job directory that is a link or a file; one bad job is one
marked row and never stops the others."""
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from crewfile.background import jobs
from crewfile.core import paths
from crewfile.core.errors import BadInput, CrewfileError, NotFound, SystemFailure
from crewfile.core.paths import Crew
from crewfile.core.records import is_timestamp

TS = "2026-11-30T21:27:45.111Z"
ROW = {"label": "l", "session": None, "created": TS, "code": 3, "signal": None, "ended": TS}
SPEC = {"handle": "h", "argv": ["true"], "label": "l", "session": None, "cwd": "/",
        "created": TS, "output_limit": 4096}
RESULT = {"exit": 3, "signal": None, "code": 3, "started": TS, "ended": TS, "seconds": 0.1}
HEARD = {"by": "wait", "at": TS, **ROW}
NOTICE = {"posted": False, "reason": "no owning session", "at": TS, **ROW}

# what a job directory's file can be
FILE_KINDS = ["good", "absent", "garbage", "truncated", "wrong-shape", "symlink", "dir", "fifo",
              "huge", "empty", "not-utf8"]
# what an entry of jobs/ can be
ENTRY_KINDS = ["job", "job", "job", "link-to-job", "file", "fifo", "empty-dir", "dot", "bad-name"]


def _file(d, name, good, kind):
    path = os.path.join(d, name)
    text = json.dumps(good).encode()
    body = {"good": text, "garbage": b"\x00\xffnot json", "truncated": text[:-3], "empty": b"",
            "wrong-shape": json.dumps({**good, "code": "x", "by": 1, "posted": 2}).encode(),
            "not-utf8": text.replace(b'"l"', b'"\xff"')}
    if kind in body:
        with open(path, "wb") as f:
            f.write(body[kind])
    elif kind == "symlink":
        outside = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(d))),
                               f"outside-{name}")
        with open(outside, "wb") as f:
            f.write(text)
        os.symlink(outside, path)
    elif kind == "dir":
        os.mkdir(path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":            # past jobs.FILE_LIMIT: sparse, read in bounded memory
        with open(path, "wb") as f:
            f.truncate(jobs.FILE_LIMIT + 10)


def _job(root, handle, kinds):
    d = os.path.join(root, handle)
    os.mkdir(d)
    for name, good in (("spec", dict(SPEC, handle=handle)), ("result", RESULT),
                       ("heard", HEARD), ("notice", NOTICE)):
        _file(d, name, good, kinds.get(name, "good"))


def _by_paths(crew, now, full):
    """The listing as reading every job by its paths gives it (the reference)."""
    out = []
    for handle in jobs.handles(crew):
        try:
            out.append(jobs.info(jobs.Job(crew, handle), now, full))
        except (FileNotFoundError, NotFound, BadInput):
            continue
        except CrewfileError as e:
            out.append({"handle": handle, "error": str(e), "created": None})
    out.sort(key=lambda r: (r["created"] or "", r["handle"]))
    return out


files = st.fixed_dictionaries({}, optional={
    name: st.sampled_from(FILE_KINDS) for name in ("spec", "result", "heard", "notice")})


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.tuples(st.sampled_from(ENTRY_KINDS), files), min_size=1, max_size=7))
def test_the_listing_answers_as_reading_each_job_by_its_paths(tmp_path_factory, entries):
    crew = Crew(str(tmp_path_factory.mktemp("c") / "crew"))
    root = crew.ensure_sub(paths.JOBS)
    elsewhere = os.path.join(os.path.dirname(crew.root), "elsewhere")
    os.mkdir(elsewhere)
    for i, (what, kinds) in enumerate(entries):
        handle = f"j-{i:04d}"
        if what == "job":
            _job(root, handle, kinds)
        elif what == "link-to-job":
            _job(elsewhere, handle, {})
            os.symlink(os.path.join(elsewhere, handle), os.path.join(root, handle))
        elif what == "file":
            with open(os.path.join(root, handle), "w") as f:
                f.write("{}")
        elif what == "fifo":
            os.mkfifo(os.path.join(root, handle))
        elif what == "empty-dir":
            os.mkdir(os.path.join(root, handle))
        elif what == "dot":
            _job(root, "." + handle, {})
        elif what == "bad-name":
            _job(root, f"-{handle} x", {})
    for full in (False, True):
        want = _by_paths(crew, 1e9, full)
        assert jobs.list_jobs(crew, 1e9, full) == want
    good = sum(1 for what, kinds in entries
               if what == "job" and all(k == "good" for k in kinds.values()))
    rows = jobs.list_jobs(crew, 1e9, False)
    assert sum(1 for r in rows if "error" not in r) >= good


def test_each_hostile_job_is_one_marked_row_and_the_others_are_listed(tmp_path):
    crew = Crew(str(tmp_path / "crew"))
    root = crew.ensure_sub(paths.JOBS)
    _job(root, "j-good1", {})
    _job(root, "j-fifo", {"heard": "fifo"})
    _job(root, "j-huge", {"heard": "huge"})
    _job(root, "j-link", {"heard": "symlink"})
    _job(str(tmp_path), "j-away", {})
    os.symlink(str(tmp_path / "j-away"), os.path.join(root, "j-linkdir"))
    with open(os.path.join(root, "j-file"), "w") as f:
        f.write("x")
    _job(root, "j-good2", {})
    _job(root, "j-open", {})
    os.chmod(os.path.join(root, "j-open"), 0o777)      # job-wait and job-sweep refuse it too
    rows = {r["handle"]: r for r in jobs.list_jobs(crew, full=False)}
    assert set(rows) == {"j-good1", "j-good2", "j-fifo", "j-huge", "j-link", "j-linkdir", "j-file",
                         "j-open"}
    assert rows["j-good1"]["code"] == rows["j-good2"]["code"] == 3
    assert rows["j-fifo"]["error"].endswith("j-fifo/heard: not a regular file")
    assert rows["j-huge"]["error"].endswith(f"j-huge/heard: longer than {jobs.FILE_LIMIT} bytes")
    assert rows["j-link"]["error"].endswith("j-link/heard: a symlink is not followed")
    assert rows["j-linkdir"]["error"].endswith("jobs/j-linkdir: a symlink is not followed")
    assert rows["j-file"]["error"].endswith("jobs/j-file: not a directory")
    assert rows["j-open"]["error"].endswith("jobs/j-open: writable by group or others: not believed"
                                            " (fix: chmod go-w " + os.path.join(root, "j-open") + ")")


def test_open_dir_in_a_directory_refuses_a_link_and_a_non_directory(tmp_path):
    crew = Crew(str(tmp_path / "crew"))
    root = crew.ensure_sub(paths.JOBS)
    os.mkdir(os.path.join(root, "d"))
    os.symlink(os.path.join(root, "d"), os.path.join(root, "l"))
    os.mkfifo(os.path.join(root, "p"))
    at = paths.open_dir(root)
    try:
        os.close(paths.open_dir(os.path.join(root, "d"), at=at))
        with pytest.raises(SystemFailure, match="/l: a symlink is not followed"):
            paths.open_dir(os.path.join(root, "l"), at=at)
        with pytest.raises(SystemFailure, match="/p: not a directory"):
            paths.open_dir(os.path.join(root, "p"), at=at)
        with pytest.raises(FileNotFoundError):
            paths.open_dir(os.path.join(root, "gone"), at=at)
    finally:
        os.close(at)


def _is_timestamp_by_position(ts):
    """records.is_timestamp as it was written, position by position."""
    if not (len(ts) == 24 and ts[4] == ts[7] == "-" and ts[10] == "T" and ts[13] == ts[16] == ":"
            and ts[19] == "." and ts[23] == "Z"):
        return False
    digits = ts[0:4] + ts[5:7] + ts[8:10] + ts[11:13] + ts[14:16] + ts[17:19] + ts[20:23]
    return digits.isascii() and digits.isdigit()


def _near_timestamps():
    chars = st.sampled_from("0123456789-T:.Zd ٢²\x00é") | st.characters()
    return st.builds(lambda pos, c: TS[:pos] + c + TS[pos + 1:], st.integers(0, 23), chars) | \
        st.text(st.sampled_from("0123456789-T:.Z٢"), max_size=26) | st.text(max_size=30)


@settings(max_examples=2000, deadline=None)
@given(ts=_near_timestamps())
def test_is_timestamp_answers_as_the_position_by_position_test(ts):
    assert is_timestamp(ts) == _is_timestamp_by_position(ts)
