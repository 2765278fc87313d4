#!/bin/sh
# what: `setsid -f` starts a sleeper in a session of its own; the main process exits 0 as soon
# what: as the sleeper says (on a FIFO) that its new session is made.
# expect: exit 0
ready="$LEAK_TMP/ready"
mkfifo "$ready"
setsid -f sh -c 'echo > "$1"; exec sleep 1000' sh "$ready"
read _ < "$ready"
exit 0
