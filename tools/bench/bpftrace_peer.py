#!/usr/bin/env python3
"""Runs a command under the bpftrace peer of the benchmarks: a bpftrace
script that writes one line per syscall (pid, tid, comm, number, return
value) of the command and its children to a file, as a plain eBPF tracer
without flightrec's decoding, hashing and storage would.

usage: bpftrace_peer.py LOG -- CMD [ARG...]

The command runs in a cgroup of its own (cgroup v2), which the script
filters on; bpftrace is started first, and the command only once the
script's BEGIN line is in LOG (its probes are attached then). The command's output and exit status are
passed through. Needs root and bpftrace (apt-get install -y bpftrace).
"""
import os
import signal
import subprocess
import sys
import time

START_TIMEOUT_S = 120


def cgroup2_root():
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return parts[1]
    sys.exit("bpftrace_peer.py: no cgroup2 mount")


def move_to(group, pid):
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write(str(pid))


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    log, cmd = sys.argv[1], sys.argv[3:]
    group = os.path.join(cgroup2_root(), f"flightrec-bench-bpftrace-{os.getpid()}")
    os.mkdir(group)
    try:
        cgroup_id = os.stat(group).st_ino  # a cgroup v2 directory's inode number is its id
        script = ('BEGIN { printf("ready\\n"); }\n'
                  f"tracepoint:raw_syscalls:sys_exit /cgroup == {cgroup_id}/ "
                  '{ printf("%d %d %s %d %ld\\n", pid, tid, comm, args->id, args->ret); }\n')
        errors = open(log + ".err", "w+")
        tracer = subprocess.Popen(["bpftrace", "-B", "line", "-o", log, "-e", script],
                                  stdout=subprocess.DEVNULL, stderr=errors)
        # bpftrace's output buffer wakes its reader only after some events,
        # so the BEGIN line can sit unread while nothing in the group makes
        # a syscall. So this process joins the group now (bpftrace is
        # outside it: it must not trace its own writes), and its own polling
        # below makes the events that bring the line out.
        move_to(group, os.getpid())
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if tracer.poll() is not None:
                errors.seek(0)
                sys.exit(f"bpftrace_peer.py: bpftrace exited: {errors.read().strip()[:300]}")
            if time.monotonic() > deadline:
                tracer.kill()
                sys.exit(f"bpftrace_peer.py: bpftrace did not start in {START_TIMEOUT_S} s")
            try:
                with open(log) as f:
                    if "ready" in f.read():
                        break
            except FileNotFoundError:
                pass
            time.sleep(0.01)

        status = subprocess.run(cmd).returncode  # in the group, as this process is
        move_to(cgroup2_root(), os.getpid())
        tracer.send_signal(signal.SIGINT)
        try:
            tracer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            tracer.kill()
            tracer.wait()
        return status
    finally:
        move_to(cgroup2_root(), os.getpid())
        for _ in range(100):  # the command's last children may still be leaving the group
            try:
                os.rmdir(group)
                break
            except OSError:
                time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
