#!/bin/sh
# what: `sleep infinity &` in a Makefile recipe (real make, each recipe line a shell of its
# what: own): the line returns at once, the build goes on and make exits 0.
# expect: exit 0
cat > "$LEAK_TMP/Makefile" <<'MK'
all: server test
server:
	sleep infinity &
test: server
	@echo tests ran
MK
exec make -s -C "$LEAK_TMP" all
