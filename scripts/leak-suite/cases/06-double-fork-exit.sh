#!/bin/sh
# what: a double fork whose orphan sleeps on while the main process exits 0.
# expect: exit 0
( sleep 1000 & )
exit 0
