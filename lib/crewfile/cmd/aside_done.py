from crewfile.asides.aside import captain_done
from crewfile.core.paths import Crew


def run(args):
    captain_done(Crew(args.dir), args.name, args.note)
