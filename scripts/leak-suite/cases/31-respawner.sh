#!/bin/sh
# what: a respawner: a TERM-ignoring setsid watchdog restarts its child each time it dies, so a
# what: stop that kills children before their parent, one by one, meets new ones.
# expect: timeout
setsid sh -c 'trap "" TERM; while :; do sleep 1000; done' &
exec sleep 1000
