#!/bin/sh
# what: the main process and its child ignore SIGTERM: only a SIGKILL ends them.
# expect: timeout
trap '' TERM
sleep 1000 &
exec sleep 1000
