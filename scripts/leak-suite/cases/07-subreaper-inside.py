#!/usr/bin/env python3
# what: a subreaper inside the tree: the main process sets PR_SET_CHILD_SUBREAPER, its child
# what: starts a setsid grandchild and exits, so the grandchild is adopted by the main process
# what: (not by init, nor by an outer subreaper); the main process hangs.
# expect: timeout
import ctypes, os, time
PR_SET_CHILD_SUBREAPER = 36
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "1000"])
    os._exit(0)
os.wait()
time.sleep(1000)
