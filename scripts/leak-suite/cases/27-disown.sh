#!/bin/bash
# what: bash `disown`: a background job removed from the job table, so bash neither waits for
# what: it nor sends it SIGHUP; bash exits 0.
# expect: exit 0
sleep 1000 &
disown
exit 0
