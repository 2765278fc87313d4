#!/bin/sh
# what: an exec-replaced wrapper: the shell the tool started becomes (exec) python, which
# what: ignores SIGTERM and starts a setsid child that ignores it too, then hangs: the pid the
# what: tool holds now runs another program, with other signal dispositions.
# expect: timeout
exec python3 -c '
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    time.sleep(1000)
time.sleep(1000)
'
