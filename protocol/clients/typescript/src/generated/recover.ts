/* Generated from protocol/schema/recover.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `recover --json`: a `summary` of actions (absent when nothing ran on the port) and, per
 * registration, its `id`, the `action` taken, and the `state` and `reason` afterwards.
 */
export interface RecoverDoc {
  /**
   * `recover --dry-run`: the actions are what recovery would do; nothing was done.
   */
  dry_run?: boolean;
  /**
   * The registrations of the open index (recovery reads no others: those are proven exited).
   */
  registrations: RecoverEntryDoc[];
  summary?: {
    [k: string]: number;
  } | null;
  /**
   * Open-index markers whose launch died before it wrote its record, dropped.
   */
  unwritten_dropped?: number;
  [k: string]: unknown;
}
export interface RecoverEntryDoc {
  /**
   * What recovery did (or, `--dry-run`, would do) with one registration.
   *
   * `adopted`: Live and stale, kept on its launcher's loss (L6): left running, identity checked.
   * `would_stop`: `--dry-run`: live and stale, recovery would stop it.
   * `would_adopt`: `--dry-run`: live and stale, kept on its launcher's loss: recovery would adopt it.
   * `would_release`: `--dry-run`: exited, recovery would release it.
   * `would_keep`: `--dry-run`: unverified, recovery would keep it.
   */
  action:
    | "stopped"
    | "released"
    | "kept"
    | "stop_failed"
    | "owned"
    | "corrupt"
    | "adopted"
    | "would_stop"
    | "would_adopt"
    | "would_release"
    | "would_keep";
  id: string;
  reason?: string | null;
  /**
   * What the evidence says about a registration's scope (SPEC A1), as every document shows
   * it.
   *
   * `live`: The guardian is alive: the scope may still hold processes.
   * `exited`: A verified receipt (or an ended boot) proves every process of the scope ended.
   * `unverified`: Neither proven alive nor proven ended.
   * `corrupt`: The registration record does not decode: shown, never guessed at.
   */
  state: "live" | "exited" | "unverified" | "corrupt";
  [k: string]: unknown;
}
