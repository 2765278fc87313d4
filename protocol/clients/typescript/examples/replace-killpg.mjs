// Replaces: const p = spawn("npm", ["test"], { detached: true }); setTimeout(() => process.kill(-p.pid, "SIGKILL"), 600_000);
// which misses what called setsid or double-forked, and may signal a pid reused meanwhile.
import { Refine } from "refine-supervisor-client";

const argv = process.argv.length > 2 ? process.argv.slice(2) : ["sh", "-c", "sleep 600 & setsid sleep 600 & wait"];
const refine = await Refine.open(); // the service at $REFINE_SOCKET or $REFINE_HOME, else without one
const tests = await refine.launch(argv, { label: "tests", timeout: Number(process.env.TIMEOUT_MS ?? 600_000), killAfter: 1000 });
const { exitCode } = await tests.wait(); // at the deadline: SIGTERM to its group, then the whole tree is stopped
const { state, processes } = await tests.show(); // exited means proven by the receipt: nothing is left
console.log(`exit ${exitCode}, ${state}, ${processes.length} left`);
await refine.close();
