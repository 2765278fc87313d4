#!/bin/sh
# what: grandchildren holding the stdout/stderr pipes: two setsid double-forked sleepers keep
# what: the output descriptors open while the main process exits 0, once both have said (on a
# what: FIFO) that their sessions are made (a host reading to end of file waits for them).
# expect: exit 0
ready="$LEAK_TMP/ready"
mkfifo "$ready"
echo "main: out"
echo "main: err" >&2
( setsid sh -c 'echo grandchild; echo 1 > "$1"; exec sleep 1000' sh "$ready" & )
( setsid sh -c 'echo 2 > "$1"; exec sleep 1000' sh "$ready" & )
exec 3<>"$ready"   # read-write: no end of file between the two writers
read _ <&3
read _ <&3
exit 0
