"""The clocks a schedule keeps: wall time, CLOCK_BOOTTIME and the boot id.

Within a boot, CLOCK_BOOTTIME, which setting the wall clock does not move;
across a reboot only the wall clock compares (it may go negative: the caller
rebases)."""
import time


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


_BOOT = _boot_id()          # read once: a process never outlives its boot


def clock_now():
    """This moment on the three clocks a schedule keeps."""
    return {"wall": time.time(), "mono": time.clock_gettime(time.CLOCK_BOOTTIME),
            "boot": _BOOT}


def elapsed(base, now):
    """Seconds from *base* to *now*: CLOCK_BOOTTIME within a boot, else wall (may be < 0)."""
    if base.get("boot") == now["boot"] and base.get("mono") is not None:
        return now["mono"] - base["mono"]
    return now["wall"] - base.get("wall", now["wall"])
