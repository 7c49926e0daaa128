from crewfile.core.durations import parse_duration
from crewfile.core.errors import NotFound
from crewfile.core.paths import Crew
from crewfile.crew import crewup


def run(args):
    c = Crew(args.dir)
    timeout = parse_duration(args.timeout, "--timeout", default=30.0)
    if not crewup.down(c, timeout):
        raise NotFound(f"no crew-up runs for {c.root}")
