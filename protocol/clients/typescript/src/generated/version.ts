/* Generated from protocol/schema/version.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `version --json`: this supervisor's build, and the guardian's it would launch.
 */
export interface VersionDoc {
  guardian: GuardianBuildDoc;
  supervisor: BuildProvenance;
  [k: string]: unknown;
}
/**
 * The guardian a launch would start (`$REFINE_GUARDIAN`, else beside the supervisor), and the
 * build its `.refine.provenance` section names.
 */
export interface GuardianBuildDoc {
  path: string;
  problem?: string | null;
  /**
   * `null` when it cannot be read or carries none: `problem` says why.
   */
  provenance?: BuildProvenance | null;
  [k: string]: unknown;
}
/**
 * A binary's build (V1), as records and documents carry it: the package version, the commit
 * (`None`: unknown, a build outside git), whether its sources differed from that commit
 * (`None`: unknown) and its class. Made from the fixed layout a binary embeds
 * ([`crate::provenance::Provenance`]).
 */
export interface BuildProvenance {
  /**
   * A build's class (V1): `release` only for a clean build of the commit tagged with the
   * package's version, `source` otherwise.
   */
  class: "release" | "source";
  commit?: string | null;
  dirty?: boolean | null;
  version: string;
  [k: string]: unknown;
}
