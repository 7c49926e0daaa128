from crewfile.asides.aside import captain_done
from crewfile.cli import crew


def run(args):
    captain_done(crew(args), args.name, args.note)
