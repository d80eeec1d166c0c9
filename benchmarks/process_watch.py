"""Run a command and record its resident memory and CPU time, sampled while it runs.

    python benchmarks/process_watch.py --json watch.json [--every 5] -- aiayn train ...

Every `--every` seconds the command's VmRSS and its user and system CPU time so far (from
/proc/PID/status and /proc/PID/stat) are appended to the samples; when it exits, `os.wait4`
gives its exact totals (peak RSS, user and system time, page faults). The JSON has `samples`
(elapsed_s, rss_gb, user_s, sys_s) and `totals` (peak_rss_gb, user_s, sys_s,
sys_time_fraction = sys / (user + sys), minor_faults, major_faults, returncode, load_average
at the start and the end). Linux only. The command's exit status is passed through.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def sample(pid: int) -> tuple[float, float, float] | None:
    """(rss_gb, user_s, sys_s) of a running process, or None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rss_kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return rss_kb / 2**20, int(fields[11]) / TICKS, int(fields[12]) / TICKS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    load_start = os.getloadavg()
    started = time.monotonic()
    child = subprocess.Popen(command)
    samples = []
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        figures = sample(child.pid)
        if figures is not None:
            samples.append([round(time.monotonic() - started, 1), *(round(x, 4) for x in figures)])
        time.sleep(args.every)
    returncode = os.waitstatus_to_exitcode(status)
    child.returncode = returncode  # reaped here, by os.wait4
    user, system = usage.ru_utime, usage.ru_stime
    totals = {
        "peak_rss_gb": usage.ru_maxrss / 2**20,  # ru_maxrss is in KiB on Linux
        "user_s": user,
        "sys_s": system,
        "sys_time_fraction": system / max(user + system, 1e-9),
        "minor_faults": usage.ru_minflt,
        "major_faults": usage.ru_majflt,
        "wall_s": time.monotonic() - started,
        "returncode": returncode,
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
    }
    figures = {"command": command, "totals": totals, "samples": samples}
    args.json.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(totals), file=sys.stderr)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
