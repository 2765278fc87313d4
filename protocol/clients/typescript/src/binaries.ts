/**
 * Where the binaries are (SPEC C2): `refine-supervisor` at `$REFINE_BIN`, else beside this
 * package (`bin/refine-supervisor` or `refine-supervisor` in the package's directory, where a
 * packaged build puts them), else on `PATH`. The guardian is `refine-supervisor`'s business: it
 * finds `refine-guardian` at `$REFINE_GUARDIAN` or beside its own executable.
 */
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const NAME = "refine-supervisor";

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The package's own directory (the one holding package.json), from this module's place in `dist/`. */
export function packageDir(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), "..");
}

/**
 * The path of `refine-supervisor`: `explicit`, `$REFINE_BIN`, beside the package, or on `PATH`.
 * Throws when none is found, naming where it looked.
 */
export function findSupervisor(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (explicit) return explicit;
  if (env.REFINE_BIN) return env.REFINE_BIN;
  const beside = [join(packageDir(), "bin", NAME), join(packageDir(), NAME)];
  for (const p of beside) if (executable(p)) return p;
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, NAME);
    if (executable(p)) return p;
  }
  throw new Error(`${NAME} not found: set REFINE_BIN, put it in ${beside.join(" or ")}, or on PATH`);
}
