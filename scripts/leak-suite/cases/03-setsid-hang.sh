#!/bin/sh
# what: a `setsid` child (new session, so out of the caller's process group) beside a main
# what: process that hangs past the deadline.
# expect: timeout
setsid sleep 1000 &
exec sleep 1000
