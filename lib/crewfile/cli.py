"""The command layer: arguments parsed from each command's page, errors to exit codes.

A command's page, docs/commands/NAME.md (shipped as crewfile/pages/NAME.md),
is the one description of its command line: `## Synopsis` gives the
positionals, each line `` - `--long METAVAR`: text `` of `## Options` an
option (a METAVAR ending in '...' repeatable, one in brackets the word after
it in the synopsis), and --help is the page rendered as plain text. Not
argparse: 10 ms of start-up in hooks.
"""
import errno
import os
import sys

from crewfile.core.errors import (
    BROKEN_PIPE, BadInput, CrewfileError, INTERRUPTED, SYSTEM, UsageError, failure_line)

PAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pages")


class Args(dict):
    """Parsed arguments; missing keys read as None."""
    __getattr__ = dict.get


def page_path(name):
    """Where command *name*'s page is, in a checkout (a link to docs/commands) and installed."""
    return os.path.join(PAGES, f"{name}.md")


def read_page(name):
    with open(page_path(name), encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The body of `## heading` in page *text*, up to the next `## `."""
    at = text.find(f"\n## {heading}\n")
    if at < 0:
        raise BadInput(f"no `## {heading}`")
    body = text[at + len(heading) + 5:]
    end = body.find("\n## ")
    return body if end < 0 else body[:end]


def _upper(word):
    """A METAVAR or a positional NAME: upper case, '...' if repeated."""
    core = word.rstrip(".").replace("_", "").replace("-", "").replace("|", "").replace(":", "")
    return core.isupper() and core.isalpha()


def option_line(line):
    """[(short, long, metavar)] of an Options bullet `` - `[-x, ]--long [METAVAR]`[, ...]: text ``;
    a METAVAR in brackets is an argument the synopsis spells out, not the option's."""
    head, sep, _ = line[2:].partition("`:")
    spans = (head + "`").split("`")
    if not sep or spans[0] or any(s != ", " for s in spans[2:-1:2]):
        raise BadInput(f"option line not understood: {line}")
    found = []
    for words in (span.split() for span in spans[1::2]):
        short = None
        if words and len(words[0]) == 3 and words[0][0] == "-" and words[0][2] == ",":
            short = words.pop(0)[:2]
        long = words[0][2:] if words and words[0].startswith("--") else ""
        metavar = words[1] if len(words) == 2 else None
        if (len(words) > 2 or not long.replace("-", "").isalnum() or long != long.lower()
                or metavar and not _upper(metavar.strip("[]"))):
            raise BadInput(f"option line not understood: {line}")
        found.append((short, words[0], None if metavar and metavar[0] == "[" else metavar))
    return found


def spec(text):
    """(options {--long: (key, metavar)}, short {-x: --long}, positionals) from page *text*."""
    options, short = {}, {}
    for line in section(text, "Options").splitlines():
        if line.startswith("- `"):
            for sflag, lflag, metavar in option_line(line):
                options[lflag] = (lflag[2:].replace("-", "_"), metavar)
                if sflag:
                    short[sflag] = lflag
    return options, short, _positionals(text, options, short)


def _positionals(text, options, short):
    """The positionals of every form of the synopsis, slot by slot: a slot
    every form fills with no brackets is required, named by its first NAME
    (a `-` fills a slot as a value: `status-append NAME - < records`)."""
    forms = []
    for line in section(text, "Synopsis").splitlines():
        if line.startswith("    ") and line.strip():
            if forms and line[4] == " ":
                forms[-1] += " " + line
            else:
                forms.append(line)
    name = text.split("\n", 1)[0][2:]
    if not forms or any(form.split()[0] != name for form in forms):
        raise BadInput(f"a synopsis whose every form starts `    {name}`, not: {forms}")
    slots = [_form_words(form, options, short) for form in forms]
    positional = []
    for i in range(max(map(len, slots))):
        here = [form[i] for form in slots if len(form) > i]
        names = [w for w, _ in here if w != "-"]
        if not names:
            raise BadInput(f"the synopsis has only `-` in place {i + 1}")
        required = len(here) == len(slots) and not any(opt for _, opt in here)
        positional.append(names[0] if required else f"[{names[0]}]")
    return positional


def _form_words(form, options, short):
    """[(positional, optional)] of one synopsis form: each word an option (with
    its METAVAR), a `< FILE` redirection, `|`, `...`, `--`, `-` or a NAME."""
    words = iter(form.split()[1:])
    depth, found = 0, []
    for raw in words:
        if raw.startswith("#"):
            break
        word = raw.strip("[]()")
        opened = depth + len(raw) - len(raw.lstrip("[")) > 0
        depth += raw.count("[") - raw.count("]")
        if word in ("|", "...", "--", ""):
            continue
        if word == "<":
            depth += _bracket_change(next(words, ""))
            continue
        if word.startswith("-") and word != "-":
            flag = short.get(word, word)
            if flag not in options:
                raise BadInput(f"the synopsis shows {word}, which Options do not list")
            if options[flag][1]:
                value = next(words, None)
                if value is None:
                    raise BadInput(f"the synopsis shows {word} without its {options[flag][1]}")
                depth += _bracket_change(value)
            continue
        if word != "-" and not _upper(word):
            raise BadInput(f"synopsis word not an option, a NAME or `-`: {raw}")
        found.append((word, opened))
    return found


def _bracket_change(word):
    return word.count("[") - word.count("]")


def parse(usage, argv):
    """Args from *argv* by *usage*, spec()'s answer for a command's page."""
    options, short, positional = usage
    args = Args()
    for key, metavar in options.values():
        args[key] = [] if metavar and metavar.endswith("...") else (None if metavar else False)
    rest = []
    words = iter(argv)
    for word in words:
        if word == "--":
            rest.extend(words)
            break
        if not word.startswith("-") or word == "-":
            rest.append(word)
            continue
        flag, eq, value = word.partition("=")
        flag = short.get(flag, flag)
        if flag not in options:
            raise UsageError(f"unknown option {flag}")
        key, metavar = options[flag]
        if not metavar:
            if eq:
                raise UsageError(f"{flag} takes no value")
            args[key] = True
            continue
        if not eq:
            value = next(words, None)
            if value is None:
                raise UsageError(f"{flag} needs a value ({metavar.rstrip('.')})")
        if metavar.endswith("..."):
            args[key].append(value)
        else:
            args[key] = value
    if args.help:
        return args
    for word in positional:
        name = word.strip("[]")
        if not rest and not word.startswith("["):
            raise UsageError(f"missing {name.rstrip('.')}")
        key = name.rstrip(".").lower().replace("-", "_")
        if name.endswith("..."):
            args[key], rest = rest, []
        else:
            args[key] = rest.pop(0) if rest else None
    if rest:
        raise UsageError(f"unexpected argument '{rest[0]}'")
    return args


WIDTH = 79


def render(name, text):
    """--help: the page's synopsis, purpose, options, exit codes and examples
    as plain text in 80 columns, then where the whole page is."""
    import re           # the hook's and crew-status's budget: only --help needs them
    import textwrap

    def plain(s):
        return re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"\1", s).replace("**", "")

    def wrapped(s, first, rest):
        return textwrap.fill(plain(s), WIDTH, initial_indent=first, subsequent_indent=rest,
                             break_long_words=False, break_on_hyphens=False)

    def items(body):
        """(code line | bullet | paragraph, text) of a section, a bullet's or
        paragraph's lines joined (a line under a bullet continues it)."""
        out = []
        for line in body.splitlines():
            if line.startswith("    "):
                out.append(("code", line[4:]))
            elif not line.strip():
                out.append(("blank", ""))
            elif line.startswith("- "):
                out.append(("bullet", line[2:]))
            elif out and out[-1][0] in ("bullet", "paragraph"):
                out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
            else:
                out.append(("paragraph", line))
        return [i for i in out if i[0] != "blank"]

    lines = [code for kind, code in items(section(text, "Synopsis")) if kind == "code"]
    lines += [wrapped(text.split("\n")[2], "", ""), ""]
    for heading, column in (("Options", 24), ("Exit codes", 8)):
        lines.append(f"{heading}:")
        for kind, s in items(section(text, heading)):
            head, sep, body = s.partition("`: ")
            if kind == "bullet" and sep and head.startswith("`"):
                head = head[1:].replace("`, `", ", ")
            else:
                head, body = "", s
            if not head:
                lines.append(wrapped(body, "  ", "  "))
            elif len(head) + 4 <= column:
                lines.append(wrapped(body, f"  {head:<{column - 2}}", " " * column))
            else:
                lines += [f"  {head}", wrapped(body, " " * column, " " * column)]
        lines.append("")
    lines.append("Examples:")
    for kind, s in items(section(text, "Examples")):
        lines.append("  " + s if kind == "code" else wrapped(s, "  ", "  "))
    lines += ["", f"The whole page: {os.path.realpath(page_path(name))}"]
    return "\n".join(lines) + "\n"


def main(path):
    """Entry point of every bin/ command: run crewfile.cmd.<name>, exit with its code."""
    _closed_at_start()
    name = os.path.basename(path)
    module = __import__(f"crewfile.cmd.{name.replace('-', '_')}", fromlist=["run"])
    code = dispatch(name, module, sys.argv[1:])
    if getattr(module, "EXIT_AT_ONCE", False):
        leave(code)
    sys.exit(code)


class _Closed:
    """stdin or stdout closed at start: using it fails with EBADF, said once by
    dispatch(), with nothing left buffered to fail again at exit."""

    def __init__(self, fd):
        self.fd = fd

    def _closed(self, *args):
        raise OSError(errno.EBADF, f"standard {'input' if self.fd == 0 else 'output'} is closed")

    read = readline = write = fileno = _closed

    def flush(self):
        pass

    def isatty(self):
        return False

    @property
    def buffer(self):
        return self


def _closed_at_start():
    """Fill a closed standard descriptor with /dev/null, so no lock file or log
    opened later takes its number; 0 and 1 opened the wrong way round, to fail."""
    for fd, name, flags in ((0, "stdin", os.O_WRONLY), (1, "stdout", os.O_RDONLY),
                            (2, "stderr", os.O_WRONLY)):
        if getattr(sys, name) is not None:
            continue                                # open: the common case, nothing to do
        os.open(os.devnull, flags)                  # the lowest free number: *fd* itself
        setattr(sys, name, _Closed(fd) if fd != 2 else open(fd, "w", closefd=False))


def leave(code):
    """Exit now, skipping the interpreter's teardown (~2 ms, a fifth of crew-status):
    for EXIT_AT_ONCE commands, which leave no lock, half-written file or child."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass                        # dispatch() already said so and chose the code
    os._exit(code)


def _from_page(name, read, page):
    """read(page), a fault in the page named as its own (no "Try --help": it is not the
    command line that is wrong)."""
    try:
        return read(page)
    except BadInput as e:
        raise BadInput(f"{page_path(name)}: {e}") from None


def dispatch(name, module, argv):
    """Run one command. ERROR_EXIT: one code for all of a command's own failures,
    where the usual ones would collide with codes it passes through (job-wait)."""
    own = getattr(module, "ERROR_EXIT", None)
    try:
        page = read_page(name)
        args = parse(_from_page(name, spec, page), argv)
        if args.help:
            sys.stdout.write(_from_page(name, lambda text: render(name, text), page))
            code = 0
        else:
            code = module.run(args) or 0
        if getattr(module, "EXIT_AT_ONCE", False):
            sys.stdout.flush()          # its failure is reported below, not lost by leave()
        return code
    except CrewfileError as e:
        sys.stderr.write(failure_line(name, e))
        if isinstance(e, UsageError):
            sys.stderr.write(f"Try '{name} --help'.\n")
        return own or e.exit_code
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return BROKEN_PIPE
    except KeyboardInterrupt:
        return INTERRUPTED
    except OSError as e:
        sys.stderr.write(failure_line(name, e))
        return own or SYSTEM
