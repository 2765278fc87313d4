#!/bin/sh
# what: a FIFO nobody opens: a setsid writer blocks in open(2) for writing, the main process
# what: hangs.
# expect: timeout
fifo="$LEAK_TMP/fifo"
mkfifo "$fifo"
setsid sh -c 'echo x > "$1"' sh "$fifo" &
exec sleep 1000
