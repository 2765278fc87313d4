#!/bin/sh
# what: `setsid -f` starts a sleeper in a session of its own; the main process exits 0 at once.
# expect: exit 0
setsid -f sleep 1000
exit 0
