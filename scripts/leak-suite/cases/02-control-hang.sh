#!/bin/sh
# what: control: one process that sleeps past the deadline and dies of the first SIGTERM.
# expect: timeout
exec sleep 1000
