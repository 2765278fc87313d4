#!/bin/sh
# what: an exec-replaced wrapper: the shell the tool started becomes (exec) python, which
# what: moves to a new session and starts a TERM-ignoring child before hanging; the pid the
# what: tool holds is now someone else's program.
# expect: timeout
exec python3 -c '
import os, signal, time
os.setsid()
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(1000)
time.sleep(1000)
'
