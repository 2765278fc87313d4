#!/bin/sh
# what: a setns escape attempt: `nsenter -p` into a PID namespace made outside the case (by the
# what: runner), where a double-forked sleeper orphans to that namespace's init, outside the
# what: caller's tree; the main process hangs whether or not the setns was allowed.
# expect: timeout
# needs: root nsholder
nsenter -t "$LEAK_NS_PID" -p -- sh -c '( sleep 1000 & )' 2>&1 || echo "nsenter refused"
exec sleep 1000
