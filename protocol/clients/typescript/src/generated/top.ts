/* Generated from protocol/schema/top.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `top --json`: the live scopes of the port, each measured twice, `window_ms` apart.
 */
export interface TopDoc {
  port: number;
  /**
   * When the second sample was taken (UTC).
   */
  sampled_at: string;
  /**
   * Newest first, as `ps` lists them; a scope that ended during the window is left out.
   */
  scopes: TopScopeDoc[];
  /**
   * The measurement window the CPU shares are taken over (the pause between the two
   * samples), milliseconds.
   */
  window_ms: number;
  [k: string]: unknown;
}
/**
 * One live scope's figures.
 */
export interface TopScopeDoc {
  /**
   * Bytes read from and written to block devices so far: `io.stat` (v2 `rbytes`, `wbytes`),
   * or the processes' `read_bytes`, `write_bytes` in `/proc/PID/io` (their reaped children
   * included, processes that already ended not).
   */
  block_read_bytes: number;
  block_write_bytes: number;
  /**
   * CPU time spent during the window, in percent of one core (`200.0`: two cores busy).
   */
  cpu_percent: number;
  /**
   * CPU time spent during the window, microseconds.
   */
  cpu_window_us: number;
  id: string;
  /**
   * Where a figure of `top` was read.
   *
   * `cgroup`: A cgroup's own accounting: the scope's cgroup v2 directory (F4), or the v1
   * directory of one of its H8 limits.
   * `proc`: Sums over the scope's processes in `/proc`.
   */
  io_source: "cgroup" | "proc";
  /**
   * The kind of a managed launch (SPEC S1).
   */
  kind: "agent" | "quality" | "command" | "terminal";
  label: string;
  /**
   * Memory in use at the second sample: the cgroup's `memory.current` (v2) or
   * `memory.usage_in_bytes` (v1), page cache included; or the sum of the processes' resident
   * sets (`VmRSS`), where shared pages count once per process.
   */
  memory_bytes: number;
  /**
   * Where a figure of `top` was read.
   *
   * `cgroup`: A cgroup's own accounting: the scope's cgroup v2 directory (F4), or the v1
   * directory of one of its H8 limits.
   * `proc`: Sums over the scope's processes in `/proc`.
   */
  memory_source: "cgroup" | "proc";
  /**
   * Tasks (threads) at the second sample: `pids.current`, or the processes' `Threads`.
   */
  pids: number;
  /**
   * Where a figure of `top` was read.
   *
   * `cgroup`: A cgroup's own accounting: the scope's cgroup v2 directory (F4), or the v1
   * directory of one of its H8 limits.
   * `proc`: Sums over the scope's processes in `/proc`.
   */
  pids_source: "cgroup" | "proc";
  /**
   * Where a figure of `top` was read.
   *
   * `cgroup`: A cgroup's own accounting: the scope's cgroup v2 directory (F4), or the v1
   * directory of one of its H8 limits.
   * `proc`: Sums over the scope's processes in `/proc`.
   */
  source: "cgroup" | "proc";
  /**
   * The window this scope was measured over (between its two samples), microseconds.
   */
  window_us: number;
  [k: string]: unknown;
}
