"""A session's own schedules without the CLI: the hook's `crons` record from a
Stop payload, the reader of .claude/scheduled_tasks.json (a damaged file is
not believed, said once, holds nothing), ownloop's own_loop rule and
nudge-tick's hold (tests/test_native_schedules_e2e.py runs the real CLI)."""
import json
import os
import time

import pytest

import model_server             # tests/, beside conftest
from conftest import cmd

from crewfile.agents import claudecron
from crewfile.core import logfile
from crewfile.nudges import nudge, schedules
from crewfile.session import ownloop, verdict
from crewfile.session.sessions import Session, register

SID = "5683c0de-0000-4000-8000-0000000000c1"
DAY = 86400


def stop(run, **fields):
    data = {"session_id": SID, "transcript_path": f"/tmp/h/{SID}.jsonl", "cwd": "/tmp",
            "hook_event_name": "Stop", "stop_hook_active": False, **fields}
    p = run("crew-hook", input=json.dumps(data), env={"CREWFILE_SESSION": "w1"})
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def recs(crew, name="w1"):
    return [(r.kind, r.text) for r in Session(crew, name).last_records(100, logfile.TailStats())]


def cron(ident, schedule, prompt, recurring=True):
    return {"id": ident, "schedule": schedule, "recurring": recurring, "prompt": prompt}


# -- the hook ---------------------------------------------------------------------

def test_a_stop_listing_session_crons_records_them_after_the_turns_end(crew, run):
    register(crew, "w1")
    stop(run, background_tasks=[], session_crons=[cron("c5828ad7", "7 3 * * *", "check the build")])
    assert recs(crew)[-2:] == [("turn-ended", ""), ("crons", "1 cron (c5828ad7 7 3 * * *: check the build)")]
    stop(run, background_tasks=[], session_crons=[])
    assert recs(crew)[-1] == ("turn-ended", "")
    assert [k for k, _ in recs(crew)].count("crons") == 1


def test_a_crons_record_names_three_escapes_and_follows_a_background_end(crew, run):
    register(crew, "w1")
    crons = [cron("a", "* * * * *", "one\x1b[2J"), cron("b", "0 9 * * 1", "two", recurring=False),
             cron("c", "5 * * * *", "x" * 100), cron("d", "6 * * * *", "four"), "garbage", 7]
    stop(run, background_tasks=[{"id": "t", "type": "shell", "command": "sleep 9"}],
         session_crons=crons)
    got = recs(crew)
    assert got[-2][0] == "background"
    assert got[-1] == ("crons", "4 crons (a * * * * *: one\x1b[2J; b 0 9 * * 1 once: two;"
                                f" c 5 * * * *: {'x' * 60}; ...)")
    raw = open(Session(crew, "w1").status_path, "rb").read()
    assert b"\x1b" not in raw and b"one\\x1b[2J" in raw        # escaped in the file


@pytest.mark.parametrize("value", [None, "3 crons", {"id": "a"}, [1, "x", None]])
def test_a_stop_whose_session_crons_is_no_list_of_jobs_records_none(crew, run, value):
    register(crew, "w1")
    stop(run, session_crons=value)
    assert recs(crew)[-1] == ("turn-ended", "")
    assert "crons" not in [k for k, _ in recs(crew)]


# -- scheduled_tasks.json ----------------------------------------------------------

NOW = 1.8e9


def task(ident="d6598c2c", created=NOW - 60, **over):
    t = {"id": ident, "cron": "9 4 * * *", "prompt": "durable job",
         "createdAt": int(created * 1000), "recurring": True, "maxAgeMs": 30 * DAY * 1000,
         "createdBySessionId": SID}
    t.update(over)
    return t


def write_tasks(project, doc):
    os.makedirs(os.path.join(project, ".claude"), exist_ok=True)
    path = os.path.join(project, claudecron.FILE)
    with open(path, "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_the_reader_takes_armed_jobs_and_leaves_expired_ones_out(tmp_path):
    project = str(tmp_path)
    assert claudecron.durable_jobs(project, NOW) == ([], None)          # no file: none
    write_tasks(project, {"tasks": [
        task("a"), task("b", recurring=False),
        task("old", created=NOW - 31 * DAY),                             # past 2.1.332's 30 days
        task("short", created=NOW - 8 * DAY, maxAgeMs=7 * DAY * 1000),   # 2.1.197's 7 days
        {k: v for k, v in task("noage", created=NOW - 31 * DAY).items() if k != "maxAgeMs"}]})
    jobs, problem = claudecron.durable_jobs(project, NOW)
    assert problem is None
    assert [(j.id, j.cron, j.prompt, j.recurring) for j in jobs] == [
        ("a", "9 4 * * *", "durable job", True), ("b", "9 4 * * *", "durable job", False)]


@pytest.mark.parametrize("doc, why", [
    ("{\"tasks\": [", "not JSON"),
    ("[]", "no list of tasks"),
    ('{"tasks": {"a": 1}}', "no list of tasks"),
    (json.dumps({"tasks": [task(), "x"]}), "a task that is not {id, cron, prompt, createdAt}"),
    (json.dumps({"tasks": [task(cron=5)]}), "a task that is not {id, cron, prompt, createdAt}"),
    (json.dumps({"tasks": [task(createdAt="soon")]}), "a task that is not {id, cron, prompt, createdAt}"),
    (json.dumps({"tasks": [task(maxAgeMs=float("nan"))]}),
     "a task that is not {id, cron, prompt, createdAt}"),
    (json.dumps({"tasks": [task(recurring="yes")]}), "a task that is not {id, cron, prompt, createdAt}"),
    ('{"tasks": []}' + " " * (claudecron.MAX_BYTES + 1), f"longer than {claudecron.MAX_BYTES} bytes"),
])
def test_a_damaged_file_is_not_believed_and_holds_nothing(tmp_path, doc, why):
    path = write_tasks(str(tmp_path), doc)
    jobs, problem = claudecron.durable_jobs(str(tmp_path), NOW)
    assert jobs == []
    assert problem.startswith(f"{path}: ") and problem.endswith(why)


def test_a_fifo_or_a_link_in_its_place_is_not_read(tmp_path):
    os.makedirs(tmp_path / ".claude")
    path = tmp_path / claudecron.FILE
    os.mkfifo(path)
    jobs, problem = claudecron.durable_jobs(str(tmp_path), NOW)       # never blocks on it
    assert jobs == [] and problem.startswith(f"{path}: ")
    os.unlink(path)
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"tasks": [task()]}))
    os.symlink(real, path)
    jobs, problem = claudecron.durable_jobs(str(tmp_path), NOW)
    assert jobs == [] and problem.startswith(f"{path}: ")


# -- the verdict's rule and nudge-tick's hold ---------------------------------------

class Idle(nudge.World):
    """One session, always live, idle and alone; what is typed is kept."""

    def __init__(self, crew, sent):
        super().__init__(crew)
        self.sent = sent

    def live(self, name):
        return verdict.LIVE

    def busy(self, name, screen):
        return None

    def deliver(self, name, text):
        self.sent.append(text)
        return True, verdict.Answer("delivered")


@pytest.fixture
def setup(crew, tmp_path):
    project = str(tmp_path / "project")
    os.makedirs(project)
    sess = register(crew, "w1", tmux="%99", cwd=project)
    sid = schedules.add(crew, 60, "go", session="w1", user="u")["id"]
    sent = []

    def tick():
        sched = schedules.load_all(crew)[0]
        sched["base"]["mono"] -= 61                    # due: its floor has passed
        sched["base"]["wall"] -= 61
        schedules.store(crew, sched)
        with nudge.tick_lock(crew):
            return nudge.tick(crew, Idle(crew, sent))
    return sess, sid, project, sent, tick


def nudge_recs(crew):
    return [(k, t) for k, t in recs(crew) if k.startswith("nudge") or k == "problem"]


def test_a_crons_record_holds_the_nudge_once_said_until_a_stop_lists_none(crew, setup):
    sess, sid, project, sent, tick = setup
    sess.append("turn-ended")
    sess.append("crons", "1 cron (c1 7 3 * * *: check the build)")
    why = "the session's own loop is armed: 1 cron (c1 7 3 * * *: check the build)"
    assert ownloop.own_loop(sess) == (verdict.Answer(ownloop.OWN_LOOP, why), None)
    tick()
    tick()
    assert sent == []
    assert nudge_recs(crew) == [("nudge-refused", f"{sid} own-loop: {why}")]   # said once
    sess.append("turn-started")
    sess.append("turn-ended")                          # the next Stop listed none
    assert ownloop.own_loop(sess) == (None, None)
    tick()
    assert sent == ["go"]


@pytest.mark.parametrize("kind", ["started", "registered", "ended"])
def test_a_new_life_or_an_end_disarms_the_session_only_jobs(crew, setup, kind):
    sess = setup[0]
    sess.append("crons", "1 cron (c1 7 3 * * *: x)")
    sess.append(kind)
    assert ownloop.own_loop(sess) == (None, None)


def test_a_crons_record_older_than_thirty_days_holds_nothing(crew, setup):
    sess = setup[0]
    sess.append("crons", "1 cron (c1 7 3 * * *: x)", now=time.time() - 30 * DAY - 5)
    assert ownloop.own_loop(sess) == (None, None)
    assert ownloop.own_loop(sess, now=time.time() - 10 * DAY)[0].code == ownloop.OWN_LOOP


def test_a_durable_job_in_the_sessions_directory_holds_the_nudge(crew, setup):
    sess, sid, project, sent, tick = setup
    now = time.time()
    write_tasks(project, {"tasks": [task("d1", created=now), task("d2", created=now, prompt="p2")]})
    sess.append("crons", "1 cron (c1 7 3 * * *: x)")
    loop, problem = ownloop.own_loop(sess)
    assert problem is None
    assert loop.detail == ("the session's own loop is armed: 1 cron (c1 7 3 * * *: x);"
                           " 2 durable crons (d1 9 4 * * *: durable job; d2 9 4 * * *: p2)")
    sess.append("turn-ended")
    tick()
    assert sent == [] and nudge_recs(crew)[-1][0] == "nudge-refused"
    write_tasks(project, {"tasks": []})                # CronDelete
    tick()
    assert sent == ["go"]


def test_a_damaged_file_is_said_once_per_schedule_and_holds_nothing(crew, setup):
    sess, sid, project, sent, tick = setup
    path = write_tasks(project, "{broken")
    sess.append("turn-ended")
    for _ in range(3):
        tick()
    assert sent == ["go", "go", "go"]                  # nothing held by it
    problems = [t for k, t in recs(crew) if k == "problem"]
    assert problems == [f"{sid} {path}: not JSON: not believed, it holds no nudge"]
    write_tasks(project, {"tasks": []})                # repaired: quiet
    tick()
    write_tasks(project, "[]")                         # damaged again: said again
    tick()
    tick()
    assert [t for k, t in recs(crew) if k == "problem"] == problems + [
        f"{sid} {path}: no list of tasks: not believed, it holds no nudge"]
    assert len(sent) == 6


def test_nudge_ls_shows_how_many_of_the_targets_own_jobs_are_armed(crew, setup):
    sess, sid, project, sent, tick = setup
    register(crew, "w2", tmux="%98")
    other = schedules.add(crew, 60, "go", session="w2", user="u")["id"]
    register(crew, "w3", tmux="%97")
    gone = schedules.add(crew, 60, "go", session="w3", user="u")["id"]
    cmd("session-rm", "w3", check=True)                    # no session is its target now
    sess.append("crons", "2 crons (c1 7 3 * * *: x; c2 8 3 * * *: y)")
    write_tasks(project, {"tasks": [task("d1", created=time.time())]})
    p = cmd("nudge-ls")
    assert (p.returncode, p.stderr) == (0, "")
    header, *rows = p.stdout.splitlines()
    own = header.split().index("OWN")
    assert {r.split()[0]: r.split()[own] for r in rows} == {sid: "3", other: "0", gone: "-"}


def test_crew_top_says_each_sessions_own_loop_in_its_footer(crew, setup):
    sess, sid, project, sent, tick = setup
    register(crew, "w2", tmux="%98")
    sess.append("crons", "1 cron (c1 7 3 * * *: x\x1b[2J)")
    write_tasks(project, {"tasks": [task("d1", created=time.time())]})
    p = cmd("crew-top", "--once")
    assert p.returncode == 0, p.stderr
    own = [line for line in p.stdout.splitlines() if line.startswith("own loop:")]
    assert own == ["own loop: w1: 1 cron (c1 7 3 * * *: x\\x1b[2J);"
                   " 1 durable cron (d1 9 4 * * *: durable job)"]
    sess.append("turn-ended")                          # the next Stop listed none
    write_tasks(project, {"tasks": []})
    p = cmd("crew-top", "--once")
    assert [line for line in p.stdout.splitlines() if line.startswith("own loop:")] == []


# -- an armed /goal, from the transcript --------------------------------------------

def goal_line(met, condition="the file done.txt exists", **more):
    return json.dumps({"type": "attachment", "attachment": {
        "type": "goal_status", "met": met, "condition": condition, **more}}) + "\n"


def test_the_newest_goal_status_in_the_transcript_says_whether_a_goal_is_armed(tmp_path):
    t = tmp_path / "t.jsonl"
    assert claudecron.armed_goal(str(t)) is None                          # no transcript
    t.write_text('{"type": "user", "message": "hi"}\n')
    assert claudecron.armed_goal(str(t)) is None
    with open(t, "a") as f:
        f.write(goal_line(False, sentinel=True))
        f.write('{"type": "user", "message": "goal_status"}\n')           # not an attachment
        f.write('{"goal_status": \n')                                      # garbage
    assert claudecron.armed_goal(str(t)) == "the file done.txt exists"
    with open(t, "a") as f:
        f.write(goal_line(False, reason="not yet") + goal_line(True, sentinel=True))
    assert claudecron.armed_goal(str(t)) is None                          # cleared
    with open(t, "a") as f:
        f.write(goal_line(False, condition="tests pass"))
        f.write('{"type": "assistant", "text": "' + "x" * 2000 + '"}\n')
    assert claudecron.armed_goal(str(t)) == "tests pass"
    assert claudecron.armed_goal(str(t), limit=1000) is None               # too far back


def test_an_armed_goal_holds_the_nudge_and_nudge_ls_counts_it(crew, setup, tmp_path):
    sess, sid, project, sent, tick = setup
    t = tmp_path / "t.jsonl"
    t.write_text(goal_line(False, sentinel=True))
    sess.update_meta(transcript_path=str(t))
    sess = Session(crew, "w1")
    sess.append("turn-ended")
    tick()
    assert sent == []
    assert nudge_recs(crew)[-1] == ("nudge-refused", f"{sid} own-loop: the session's own loop is"
                                                     " armed: a goal (the file done.txt exists)")
    p = cmd("nudge-ls")
    header, row = p.stdout.splitlines()
    assert row.split()[header.split().index("OWN")] == "1"
    with open(t, "a") as f:
        f.write(goal_line(True, sentinel=True))                           # /goal clear
    tick()
    assert sent == ["go"]


def test_a_crons_record_wakes_nobody(crew):
    register(crew, "w1")
    lines = ("2026-12-02T04:00:00.000Z w1 turn-ended\n"
             "2026-12-02T04:00:00.001Z w1 crons: 1 cron (c1 7 3 * * *: x)\n")
    p = cmd("wake-filter", input=lines)
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout == "2026-12-02T04:00:00.000Z w1 turn-ended\n"


# -- the stand-in model's Cron directives --------------------------------------------

def test_the_stand_in_loads_the_cron_tools_then_calls_them(tmp_path):
    script = tmp_path / "script"
    script.write_text("CRON: 7 3 * * * check the build\nUNCRON: c5828ad7\n")
    model = model_server.Model(script=str(script))
    turn = {"tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": "go"}]}

    def result(call):
        return dict(turn, messages=turn["messages"] + [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": "loaded"}]}])
    for name, inp in (("CronCreate", {"cron": "7 3 * * *", "prompt": "check the build",
                                      "recurring": True}),
                      ("CronDelete", {"id": "c5828ad7"})):
        search, _, _ = model.answer(turn)
        assert (search["name"], search["input"]) == ("ToolSearch",
                                                     {"query": "select:CronCreate,CronDelete"})
        call, _, _ = model.answer(result(search))
        assert (call["name"], call["input"]) == (name, inp)
        assert model.answer(result(call)) == (None, "ok", 0.0)        # then the turn ends


def test_a_crons_count_that_is_no_ascii_number_counts_as_one_listing():
    """A damaged `crons` record whose first word is a digit int() refuses
    ('²') counts as a listing of unknown size (1), as any other text does."""
    assert ownloop.own_count("\u00b2 jobs", []) == 1
    assert ownloop.own_count("9" * 5000 + " jobs", []) == 1    # past int()'s 4,300 digits
    assert ownloop.own_count("3 jobs", []) == 3
