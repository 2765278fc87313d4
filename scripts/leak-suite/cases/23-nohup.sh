#!/bin/sh
# what: a nohup'd child (SIGHUP ignored, output to nohup.out) outlives the main shell, which
# what: exits 0.
# expect: exit 0
cd "$LEAK_TMP" && nohup sleep 1000 >/dev/null 2>&1 &
exit 0
