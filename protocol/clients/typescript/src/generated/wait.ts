/* Generated from protocol/schema/wait.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `wait --json`: the scopes in the order given.
 */
export interface WaitDoc {
  scopes: WaitScope[];
  /**
   * `--timeout` passed first (the exit is 124).
   */
  timed_out: boolean;
  [k: string]: unknown;
}
/**
 * One scope of `wait --json`.
 */
export interface WaitScope {
  /**
   * The code `run` would exit with (128+N for signal N, 127 never started, 255 unknown);
   * `null` while live.
   */
  exit_code?: number | null;
  id: string;
  /**
   * H6 (`wait --for ready`): `ready`, `failed`, or `starting` when the wait timed out
   * first; absent for a wait for the end.
   */
  ready?: ("starting" | "ready" | "failed") | null;
  /**
   * `exited` or `unverified` once it ended, `live` when the wait timed out first.
   */
  state: "live" | "exited" | "unverified" | "corrupt";
  [k: string]: unknown;
}
