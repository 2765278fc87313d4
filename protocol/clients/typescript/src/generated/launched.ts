/* Generated from protocol/schema/launched.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `run --detach --json`.
 */
export interface LaunchedDoc {
  id: string;
  [k: string]: unknown;
}
