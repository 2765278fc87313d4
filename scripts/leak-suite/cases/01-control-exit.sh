#!/bin/sh
# what: control: exits 3 at once and starts nothing. Every mode must say `exit 3` and leave nothing.
# expect: exit 3
exit 3
