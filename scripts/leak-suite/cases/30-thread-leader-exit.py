#!/usr/bin/env python3
# what: a thread-group leader that exits (pthread_exit in the main thread) while another thread
# what: lives: the leader is a zombie in /proc, the process is not over. One such process is
# what: setsid double-forked away, the main process becomes another.
# expect: timeout
import ctypes, os, threading, time

def leader_exit():
    threading.Thread(target=time.sleep, args=(1000,)).start()
    ctypes.CDLL(None).pthread_exit(None)

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        leader_exit()
    os._exit(0)
os.wait()
leader_exit()
