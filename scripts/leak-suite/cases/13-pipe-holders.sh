#!/bin/sh
# what: grandchildren holding the stdout/stderr pipes: setsid double-forked sleepers keep the
# what: output descriptors open while the main process exits 0 (a host reading to end of file
# what: waits for them).
# expect: exit 0
echo "main: out"
echo "main: err" >&2
( setsid sh -c 'echo grandchild; exec sleep 1000' & )
( setsid sleep 1000 & )
exit 0
