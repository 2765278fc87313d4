#!/usr/bin/env python3
# what: a subreaper inside the tree that exits: it adopts a setsid grandchild, then forks a
# what: hanging main successor and dies, so its adoptee orphans a second time.
# expect: timeout
import ctypes, os, time
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
pid = os.fork()
if pid == 0:
    # The middle process: a subreaper in the tree's middle.
    if ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os._exit(1)
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            os.execvp("sleep", ["sleep", "1000"])
        os._exit(0)
    os.wait()
    os._exit(0)  # its adopted grandchild orphans again
os.waitpid(pid, 0)
time.sleep(1000)
