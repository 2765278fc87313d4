"""Instead of `Popen(..., start_new_session=True)`, a timer and `os.killpg(pgid, SIGKILL)`, which
misses what left the group (`setsid`, double forks): one launch with a timeout. The deadline
bounds the whole scope, and `exited` means the receipt proved nothing of the tree is left."""
import sys

from refine_supervisor_client import Client

with Client.local(home=sys.argv[1]) as c:  # or Client.connect(home=...) with a service
    job = c.launch(["sh", "-c", "setsid sleep 600.25 & sleep 600.25"], timeout=0.5, kill_after=0.5)
    done = job.wait()
    print(done.state, c.show(job.id).outcome)  # exited timed_out: every process of it is gone
    sys.exit(0 if done.state == "exited" else 1)
