"""The crew at a glance: crew-status, crew-top --once and the timeline of this demo's crew."""
import os
import shutil


def run(d):
    d.say("The tmux status-line segment, then one frame of crew-top:")
    d.sh("crew-status")
    d.sh("crew-top --once | cut -c1-150")
    svg, page = os.path.join(d.root, "timeline.svg"), os.path.join(d.root, "timeline.html")
    d.say("The demo's crew over time, as a picture and a page (hover over a mark for its record):")
    d.sh(f"crew-timeline --svg {svg} --html {page}")
    if shutil.which("rsvg-convert"):
        d.sh(f"rsvg-convert -o {d.root}/timeline.png {svg} && file {d.root}/timeline.png"
             " | cut -d, -f1-2")
    d.sh(f"grep -c '<title>' {page}")
