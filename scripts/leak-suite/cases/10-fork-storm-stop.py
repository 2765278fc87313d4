#!/usr/bin/env python3
# what: a fork storm during the stop: SIGTERM makes the main process start 20 hoppers, each a
# what: chain of 200 forks in which every link calls setsid, forks the next and exits, so the
# what: pids move while a stop is reading the tree; the main process ignores SIGTERM.
# expect: timeout
import os, signal, time

def hopper():
    for _ in range(200):
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
    time.sleep(1000)
    os._exit(0)

def storm(_sig, _frame):
    for _ in range(20):
        if os.fork() == 0:
            hopper()

signal.signal(signal.SIGTERM, storm)
while True:
    time.sleep(1000)
