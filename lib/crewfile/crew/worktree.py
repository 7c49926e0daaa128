"""Git worktrees for crew sessions: one tree and one branch (`crew/NAME`) per
worker, beside the repository's main tree, never inside it (where and why:
docs/files/worktrees.md). Everything here runs the real git; its failures
become one-line errors.
"""
import os
import subprocess
from collections import namedtuple

from crewfile.core.errors import BadInput, NotFound, Refused, SystemFailure

BRANCH_PREFIX = "crew/"
PLACE_SUFFIX = ".crew"


def git(*args, cwd):
    """Run git in *cwd*; return (exit code, stdout, last stderr line: git says
    "Preparing worktree ..." before "fatal: ...")."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise SystemFailure("git is not installed") from None
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), err[-1] if err else ""


# The repository a directory is in: its current tree and its main tree.
Repo = namedtuple("Repo", "top main")


def locate(directory):
    """The Repo holding *directory*; BadInput if it is not in a git work tree."""
    code, out, _ = git("rev-parse", "--path-format=absolute", "--show-toplevel",
                       "--git-common-dir", cwd=directory)
    lines = out.splitlines()
    if code != 0 or len(lines) != 2:
        raise BadInput(f"{directory} is not in a git work tree (use --no-worktree)")
    top, common = (os.path.realpath(p) for p in lines)
    # A non-bare repository keeps its common dir as <main tree>/.git.
    main = os.path.dirname(common) if os.path.basename(common) == ".git" else common
    return Repo(top, main)


def place(repo, name):
    """Where worker NAME's worktree goes: beside the main tree, never inside it."""
    return os.path.join(os.path.dirname(repo.main), os.path.basename(repo.main) + PLACE_SUFFIX,
                        name)


def branch_for(repo, name):
    """`crew/NAME`, if git accepts it as a branch name (BadInput otherwise)."""
    branch = BRANCH_PREFIX + name
    if git("check-ref-format", "--branch", branch, cwd=repo.top)[0] != 0:
        raise BadInput(f"'{branch}' is not a valid git branch name")
    if name == "@":      # git 2.39 takes a worktree named '@' for HEAD and fails half-way
        raise BadInput("'@' cannot name a git worktree (git reads it as HEAD)")
    return branch


def branch_head(repo, branch):
    """The commit the branch points at, or None."""
    code, out, _ = git("rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}",
                       cwd=repo.top)
    return out.strip() if code == 0 else None


def resolve(repo, ref):
    """The commit *ref* names: BadInput in a repository with no commits, NotFound for no such REF."""
    if not ref or ref.startswith("-") or any(ord(c) < 32 for c in ref):
        raise BadInput(f"bad REF '{ref}'")
    code, out, _ = git("rev-parse", "--verify", "-q", f"{ref}^{{commit}}", cwd=repo.top)
    if code == 0:
        return out.strip()
    if not git("rev-list", "-n", "1", "--all", cwd=repo.top)[1].strip():
        raise BadInput(f"the repository {repo.top} has no commits yet: commit something first")
    raise NotFound(f"no commit '{ref}' in {repo.top}")


def worktrees(repo):
    """[(path, branch ref or None)] of every worktree of the repository."""
    code, out, err = git("worktree", "list", "--porcelain", cwd=repo.top)
    if code != 0:
        raise SystemFailure(f"git worktree: {err or 'failed'}")
    found = []
    for block in out.split("\n\n"):         # one block of `key value` lines per tree
        fields = dict(line.partition(" ")[::2] for line in block.splitlines())
        if "worktree" in fields:
            found.append((fields["worktree"], fields.get("branch")))
    return found


def changes(tree):
    """`git status --porcelain` lines of *tree*: uncommitted work, untracked files included."""
    code, out, err = git("status", "--porcelain", cwd=tree)
    if code != 0:
        raise SystemFailure(f"git status in {tree}: {err or 'failed'}")
    return [line for line in out.splitlines() if line]


def summary(lines, most=5):
    """A short list of changed paths for a one-line message."""
    names = [line[3:] for line in lines[:most]]
    more = f" and {len(lines) - most} more" if len(lines) > most else ""
    return ", ".join(names) + more


def refuse_dirty_ref(repo, ref):
    """Refuse a REF whose checkout holds uncommitted work the new branch would not
    get: HEAD (the tree we are in) or a branch checked out in some worktree (a
    commit or tag names no one's work). After resolve(): it refuses an option."""
    code, out, _ = git("rev-parse", "--symbolic-full-name", ref, cwd=repo.top)
    full = out.strip() if code == 0 else ""
    if ref == "HEAD":
        trees = [repo.top]
    elif full.startswith("refs/heads/"):
        trees = [path for path, branch in worktrees(repo) if branch == full]
    else:
        return
    for tree in trees:
        dirty = changes(tree)
        if dirty:
            raise Refused(f"{ref} has uncommitted changes in {tree} that the new branch would"
                          f" not get ({summary(dirty)}): commit or stash them first")


def add(repo, path, branch, commit, made_parent=False):
    """Create *branch* at *commit* checked out at *path* (git creates the parents).
    git can fail after creating the branch or the directory: what this call
    made is taken back before the refusal, and nothing that was there before
    (a branch made meanwhile by someone else, which git's refusal names)."""
    code, _, err = git("worktree", "add", "-q", "-b", branch, path, commit, cwd=repo.top)
    if code != 0:
        if "already exists" not in err:
            undo_add(repo, path, branch, made_parent)
        raise Refused(f"git worktree add: {err or 'failed'}")


def remove(repo, path, force=False):
    """Remove the worktree at *path* (git refuses a dirty one unless *force*)."""
    code, _, err = git("worktree", "remove", *(["--force"] if force else []), path, cwd=repo.main)
    if code != 0:
        raise Refused(f"git worktree remove: {err or 'failed'}")


def undo_add(repo, path, branch, made_parent):
    """Take back a worktree and branch just made (best effort; a failed spawn's cleanup)."""
    git("worktree", "remove", "--force", path, cwd=repo.top)
    if os.path.isdir(path) and not os.listdir(path):
        os.rmdir(path)                   # a checkout git gave up on before registering it
    git("worktree", "prune", cwd=repo.top)
    if branch_head(repo, branch) is not None:
        git("branch", "-D", branch, cwd=repo.top)
    if made_parent:
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass
