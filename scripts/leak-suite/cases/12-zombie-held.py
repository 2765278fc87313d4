#!/usr/bin/env python3
# what: a zombie held by a live parent: a setsid double-forked parent forks a child that exits
# what: and never reaps it; the main process hangs.
# expect: timeout
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        if os.fork() == 0:
            os._exit(0)      # the zombie
        time.sleep(1000)     # its parent never calls wait
    os._exit(0)
time.sleep(1000)
