#!/usr/bin/env python3
# what: a Python multiprocessing pool (4 workers, fork start method) whose tasks hang; the
# what: main process waits on the results.
# expect: timeout
import multiprocessing, time

def work(_):
    time.sleep(1000)

if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    with multiprocessing.Pool(4) as pool:
        pool.map(work, range(8))
