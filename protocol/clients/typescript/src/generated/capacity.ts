/* Generated from protocol/schema/capacity.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `capacity --json`.
 */
export interface CapacityDoc {
  /**
   * Bytes; `null` when telemetry is unavailable.
   */
  available_memory?: number | null;
  cores: number;
  cpu_slots: number;
  /**
   * Human explanation of the reservation and slot figures.
   */
  derivation: string;
  floor_bytes: number;
  free: number;
  limit_percent: number;
  live: number;
  /**
   * `null` when telemetry is unavailable.
   */
  memory_slots?: number | null;
  reservation_bytes: number;
  /**
   * How the per-workload memory reservation was derived (`capacity`).
   *
   * `floor`: No complete sample exceeded the floor.
   * `sample`: The largest complete, stable sample of a live tree.
   */
  reservation_source: "floor" | "sample";
  /**
   * Tree samples that were taken, by registration id.
   */
  samples: {
    [k: string]: SampleDoc;
  };
  slots: number;
  unverified: number;
  [k: string]: unknown;
}
/**
 * One tree sample.
 */
export interface SampleDoc {
  complete: boolean;
  members: number;
  reason?: string | null;
  rss_bytes: number;
  [k: string]: unknown;
}
