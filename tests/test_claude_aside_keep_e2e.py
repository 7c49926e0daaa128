"""End to end with the REAL Claude Code CLI (offline, private tmux server, the
scripted stand-in model): nothing of an aside's conversation is lost when it
is reconciled, although Claude Code 2.1.332 draws in the alternate screen by
default (tmux then keeps no history: the scrollback would hold only the last
screen).

The window is smaller than the conversation: the first turns scroll off the
screen. After reconcile, every word the captain typed and every answer of
the agent is in the kept scrollback (aside-open starts the agent with the
classic renderer) and in the kept copy of the agent's own transcript.
"""
from conftest import AttachedClient, cmd, wait_for
from claude_harness import kinds, make_rig, records, require_real_claude, typed_by, watched
from crewfile.session.sessions import Session

TURNS = 12


def test_reconcile_keeps_every_word_of_the_conversation(crew, tmux, tmp_path, request):
    require_real_claude()
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_DIR": crew.root, "CREWFILE_TMUX": tmux.sock})
    tmux("new-session", "-d", "-s", "crew", "-n", "captain", "-x", "100", "-y", "20")
    with watched(rig, crew, "talk"):
        agent = rig.prepare()
        r = cmd("aside-open", "talk", "--topic", "keeping", "--cmd", agent,
                "--tmux-session", "crew")
        assert r.returncode == 0, r.stderr
        sess = Session(crew, "talk")
        rig.attach(sess.meta["tmux"])
        wait_for(lambda: "started" in kinds(crew, "talk"), what="SessionStart")
        person = AttachedClient(tmux, sess.meta["tmux"])
        request.addfinalizer(person.close)

        def turn(text, script):
            ended = kinds(crew, "talk").count("turn-ended")
            rig.set_script(script)
            typed_by(person, rig, Session(crew, "talk"), text)
            wait_for(lambda: kinds(crew, "talk").count("turn-ended") > ended,
                     what=f"turn-ended of {text!r}")
            rig.wait_idle()

        said = []
        for n in range(1, TURNS + 1):
            question, answer = f"captain-question-{n}", f"agent-answer-{n}"
            turn(question, [f"SAY: {answer}"])
            said += [question, answer]
        turn("/aside-done", ["RUN: printf 'keep it all\\n' | aside-conclude talk --report -"])
        wait_for(lambda: "concluded" in kinds(crew, "talk"), what="concluded")
        transcript = Session(crew, "talk").meta["transcript_path"]
        wait_for(lambda: all(w in open(transcript).read() for w in said),
                 what="the agent's transcript holding every turn")
        person.close()                                  # the captain has gone back
        r = cmd("aside-reconcile", "talk")
        assert (r.returncode, r.stderr) == (0, ""), r.stderr
        cur = [t for k, t in records(crew, "talk") if k == "closed"][-1]
        assert r.stdout == (f"report: {cur}\nscrollback: {cur}.scrollback\n"
                            f"transcript: {cur}.transcript\n")
        assert open(cur).read() == "keep it all\n"
        scrollback = open(cur + ".scrollback").read()
        kept = open(cur + ".transcript").read()
        assert [w for w in said if w not in scrollback] == []
        assert [w for w in said if w not in kept] == []
        assert kept == open(transcript).read()[:len(kept)]
        panes = tmux("list-panes", "-a", "-F", "#{pane_id}", check=False)
        assert sess.meta["tmux"] not in panes
