#!/bin/sh
# what: a timeout while output floods: `yes` writes to stdout as fast as the reader takes it,
# what: and a setsid child floods stderr too.
# expect: timeout
setsid sh -c 'exec yes err >&2' &
exec yes
