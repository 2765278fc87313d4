#!/usr/bin/env python3
# what: a child that changed its process group (setpgid(0, 0), same session): the caller's
# what: group signals miss it; the main process hangs.
# expect: timeout
import os, time
if os.fork() == 0:
    os.setpgid(0, 0)
    os.execvp("sleep", ["sleep", "1000"])
time.sleep(1000)
