#!/bin/sh
# what: 60 `yes` processes writing to /dev/null (busy, in the caller's process group) and a
# what: main shell waiting for them.
# expect: timeout
i=0
while [ $i -lt 60 ]; do
  yes >/dev/null &
  i=$((i + 1))
done
wait
