#!/usr/bin/env python3
# what: a PID-reuse storm: short-lived children churn through pids (as root, each takes the
# what: pid the previous one just freed, through /proc/sys/kernel/ns_last_pid), and every 50th
# what: leaves a setsid sleeper behind; a tool that holds pids across time meets reused ones.
# expect: timeout
import os
last = "/proc/sys/kernel/ns_last_pid"
n = 0
while True:
    pid = os.fork()
    if pid == 0:
        if n % 50 == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "1000"])
        os._exit(0)
    os.waitpid(pid, 0)
    n += 1
    try:
        with open(last, "w") as f:
            f.write(str(pid - 1))  # the next fork takes the pid just freed
    except OSError:
        pass
