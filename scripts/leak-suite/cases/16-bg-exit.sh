#!/bin/sh
# what: `&` children left running when the main shell exits 0: the host's deadline passes
# what: while they run.
# expect: exit 0
sleep 1000 &
sleep 1000 &
exit 0
