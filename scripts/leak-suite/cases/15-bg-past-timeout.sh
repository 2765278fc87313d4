#!/bin/sh
# what: `&` children past the timeout: two TERM-ignoring background jobs and a main shell
# what: that waits for them.
# expect: timeout
( trap '' TERM; exec sleep 1000 ) &
( trap '' TERM; exec sleep 1000 ) &
wait
