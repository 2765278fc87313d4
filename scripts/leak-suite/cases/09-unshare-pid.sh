#!/bin/sh
# what: `unshare -p -f`: the workload runs as pid 1 of a new PID namespace and starts a setsid
# what: sleeper there, then hangs.
# expect: timeout
# needs: root
exec unshare -p -f sh -c 'setsid sleep 1000 & exec sleep 1000'
