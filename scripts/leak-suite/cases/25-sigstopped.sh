#!/bin/sh
# what: a SIGSTOPped child in the caller's process group: a SIGTERM to it stays pending while
# what: it is stopped, only a SIGKILL (or a SIGCONT) ends it; the main shell waits.
# expect: timeout
sh -c 'kill -STOP $$; exec sleep 1000' &
wait
