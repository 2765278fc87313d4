#!/bin/sh
# what: a double fork: a subshell starts a sleeper and exits, so the sleeper is orphaned
# what: (reparented, same process group); the main process hangs.
# expect: timeout
( sleep 1000 & )
exec sleep 1000
