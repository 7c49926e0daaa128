"""Aside reports: a maildir (reports/tmp, new, cur) the way qmail delivers mail.

Names, delivery and cleanup: docs/files/reports.md. A crash leaves at worst a
stray file in tmp/, never a half report in new/ or cur/. The host in a name is
reduced to letters, digits and '-': a name has exactly two dots, and a
scrollback's or transcript's is told apart by its suffix.
"""
import itertools
import os
import socket
import stat
import time
from collections import namedtuple

from crewfile.core import paths, records
from crewfile.core.atomic import fsync_dir, write_new
from crewfile.core.errors import BadInput, NotFound, SystemFailure
from crewfile.core.names import is_name

TMP_MAX_AGE = 36 * 3600          # maildir's rule
_counter = itertools.count(1)


class Report(namedtuple("Report", "aside time state path scrollback size error")):
    """One report file: which aside, when, where (state 'new' or 'cur'); error:
    why the file cannot be a report (a link, a directory), or None."""
    __slots__ = ()

    def as_dict(self):
        out = {"state": self.state, "aside": self.aside, "time": records.timestamp(self.time),
               "path": self.path, "scrollback": self.scrollback, "size": self.size}
        if self.error:
            out["error"] = self.error
        return out


def _host():
    host = socket.gethostname() or "localhost"
    return "".join(c if c.isalnum() and c.isascii() or c == "-" else "-" for c in host)[:64]


def unique_name(aside, now=None):
    now = time.time() if now is None else now
    secs = int(now)
    usecs = int((now - secs) * 1e6)
    return f"{aside},{secs}.M{usecs:06d}P{os.getpid()}Q{next(_counter)}.{_host()}"


def parse_name(base):
    """(aside, time) of a report file name, or None if it is not one."""
    if base.startswith(".") or base.endswith((paths.SCROLLBACK_SUFFIX, paths.TRANSCRIPT_SUFFIX)):
        return None
    aside, comma, unique = base.partition(",")
    parts = unique.split(".")
    if not comma or len(parts) != 3 or not parts[1].startswith("M") or not is_name(aside):
        return None
    usecs = parts[1][1:].partition("P")[0]
    # ASCII digits only; 11 at most: a time a clock can show (year < 10000).
    if not (_digits(parts[0], 11) and _digits(usecs, 6)):
        return None
    return aside, int(parts[0]) + int(usecs) / 1e6


def _digits(text, most):
    return 0 < len(text) <= most and all("0" <= c <= "9" for c in text)


def _irregular(mode):
    """Why a file of *mode* is not a report (the one path rule: no link, no FIFO), or None."""
    if stat.S_ISREG(mode):
        return None
    return "a symlink is not followed" if stat.S_ISLNK(mode) else "not a regular file"


def box(crew, which):
    """reports/tmp, new or cur, created (0700) if missing."""
    return crew.ensure_sub(paths.REPORTS, which)


def deliver(crew, aside, data, checkpoint=None):
    """Publish *data* (bytes) as a new report of *aside*; return its path in new/.
    checkpoint(step) is called between the steps (tests crash there)."""
    tmp_dir, new_dir = box(crew, paths.REPORT_TMP), box(crew, paths.REPORT_NEW)
    clean_tmp(crew)
    base = unique_name(aside)
    tmp = os.path.join(tmp_dir, base)
    try:
        write_new(tmp, data)
        if checkpoint:
            checkpoint("written")
        dest = os.path.join(new_dir, base)
        os.rename(tmp, dest)
        fsync_dir(new_dir)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise SystemFailure(f"cannot deliver report {base}: {e.strerror}") from None
    return dest


def accept(crew, report_path):
    """Move a report from new/ to cur/ (idempotent); return its path in cur/.
    A crash between the rename and the fsync leaves it in one place, never two."""
    base = os.path.basename(report_path)
    if parse_name(base) is None:
        raise BadInput(f"not a report name: '{base}'")
    new = os.path.join(box(crew, paths.REPORT_NEW), base)
    cur_dir = box(crew, paths.REPORT_CUR)
    cur = os.path.join(cur_dir, base)
    try:
        why = _irregular(os.lstat(new).st_mode)
    except FileNotFoundError:
        why = None
    if why:
        raise SystemFailure(f"{new}: {why}")
    try:
        os.rename(new, cur)
    except FileNotFoundError:
        if os.path.lexists(cur):
            return cur
        raise NotFound(f"report {base} is in neither new/ nor cur/") from None
    except OSError as e:
        raise SystemFailure(f"cannot move {new} to cur/: {e.strerror}") from None
    fsync_dir(cur_dir)
    fsync_dir(os.path.dirname(new))
    return cur


def listing(crew, aside=None, states=(paths.REPORT_NEW, paths.REPORT_CUR)):
    """Reports in new/ and cur/ (optionally of one aside), oldest first."""
    out = []
    for state in states:
        d = crew.sub(paths.REPORTS, state)
        try:
            entries = paths.list_dir(d)
        except FileNotFoundError:
            continue
        for base in entries:
            parsed = parse_name(base)
            if parsed is None or (aside is not None and parsed[0] != aside):
                continue
            path = os.path.join(d, base)
            try:
                st = os.lstat(path)
            except FileNotFoundError:       # moved to cur/ while we looked
                continue
            sb = path + paths.SCROLLBACK_SUFFIX
            sb = sb if state == paths.REPORT_CUR and os.path.lexists(sb) else None
            out.append(Report(parsed[0], parsed[1], state, path, sb, st.st_size,
                              _irregular(st.st_mode)))
    out.sort(key=lambda r: (r.time, r.path))
    return out


def clean_tmp(crew):
    """Remove files in tmp/ (its caller made it) older than TMP_MAX_AGE: leftovers
    of crashed deliveries."""
    now = time.time()
    d = crew.sub(paths.REPORTS, paths.REPORT_TMP)
    removed = 0
    for base in paths.list_dir(d):
        path = os.path.join(d, base)
        try:
            if now - os.lstat(path).st_mtime > TMP_MAX_AGE:
                os.unlink(path)
                removed += 1
        except OSError:
            pass
    return removed
