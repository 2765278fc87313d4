#!/bin/sh
# what: a classic daemon: double fork, setsid, stdio to /dev/null, writes its pid file; the
# what: launcher exits 0 once the pid file is there.
# expect: exit 0
pidfile="$LEAK_TMP/daemon.pid"
( setsid sh -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 1000' sh "$pidfile" </dev/null >/dev/null 2>&1 & )
while [ ! -s "$pidfile" ]; do sleep 0.01; done   # the launcher's own poll, its workload
exit 0
