#!/bin/sh
# what: a child that kills its own parent: the main shell dies of SIGUSR1 (exit 138) at once,
# what: while the setsid child that shot it sleeps on.
# expect: exit 138
setsid sh -c 'kill -USR1 $PPID; exec sleep 1000' &
wait
