#!/bin/bash
# what: `kill %1` in a job-control shell (set -m): each background job has a process group of
# what: its own; the shell kills job 1 itself and waits for job 2, which no group signal aimed
# what: at the shell reaches.
# expect: timeout
set -m
sleep 1000 &
sleep 1000 &
kill %1
wait
