// Generates src/generated/NAME.ts from every protocol/schema/NAME.json (json-schema-to-typescript),
// or with --check regenerates into a temporary directory and fails when a committed file differs
// (or is missing, or is extra): the committed types are held to the committed schemas.
//
// `defs.json` holds every definition once and becomes `defs.ts` (all of them, reachable from a
// root or not); every other document becomes its own module whose root type is its title.
// json2ts resolves `defs.json#/$defs/...` against `cwd`, so it is given the schema directory.
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { compileFromFile } from "json-schema-to-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "..");
const schemaDir = resolve(pkg, "../../schema");
const committed = join(pkg, "src", "generated");
const check = process.argv.includes("--check");

const banner = (name) =>
  `/* Generated from protocol/schema/${name}.json by scripts/generate-types.mjs (json-schema-to-typescript).\n` +
  ` * Do not edit: change the Rust document types, regenerate the schemas, then run\n` +
  ` * \`npm run generate-types\`; \`npm run check-types\` fails while this file is stale. */`;

async function generate(outDir) {
  mkdirSync(outDir, { recursive: true });
  const names = readdirSync(schemaDir)
    .filter((f) => f.endsWith(".json"))
    .map((f) => basename(f, ".json"))
    .sort();
  const modules = [];
  for (const name of names) {
    const file = join(schemaDir, `${name}.json`);
    const ts = await compileFromFile(file, {
      cwd: schemaDir,
      bannerComment: banner(name),
      unreachableDefinitions: name === "defs",
      strictIndexSignatures: false,
      format: true,
      style: { printWidth: 100, singleQuote: false },
    });
    writeFileSync(join(outDir, `${name}.ts`), ts);
    const exported = [...ts.matchAll(/^export (?:type|interface) (\w+)/gm)].map((m) => m[1]);
    modules.push({ name, exported });
  }
  // The index: every definition once (from defs), then what a document adds (its root type by
  // its title, the alternatives of a union such as the requests); a name is exported once, by
  // the first module (defs, then alphabetical) that has it: the same definition everywhere.
  modules.sort((a, b) => (a.name === "defs" ? -1 : b.name === "defs" ? 1 : 0));
  const seen = new Set();
  let index = banner("*") + "\n\n";
  for (const { name, exported } of modules) {
    const fresh = exported.filter((n) => !seen.has(n));
    fresh.forEach((n) => seen.add(n));
    if (fresh.length) index += `export type {\n  ${fresh.join(",\n  ")},\n} from "./${name}.js";\n`;
  }
  writeFileSync(join(outDir, "index.ts"), index);
  return [...names.map((n) => `${n}.ts`), "index.ts"].sort();
}

if (!check) {
  rmSync(committed, { recursive: true, force: true });
  const files = await generate(committed);
  console.log(`generated ${files.length} files in src/generated`);
} else {
  const tmp = mkdtempSync(join(tmpdir(), "refine-types-"));
  try {
    const fresh = await generate(tmp);
    let have = [];
    try {
      have = readdirSync(committed).sort();
    } catch {}
    const stale = [];
    for (const f of new Set([...fresh, ...have])) {
      let a = null, b = null;
      try { a = readFileSync(join(tmp, f), "utf8"); } catch {}
      try { b = readFileSync(join(committed, f), "utf8"); } catch {}
      if (a !== b) stale.push(a === null ? `${f} (no schema makes it)` : b === null ? `${f} (missing)` : f);
    }
    if (stale.length) {
      console.error(`src/generated is stale against protocol/schema: ${stale.join(", ")}`);
      console.error("run `npm run generate-types` and commit the result");
      process.exit(1);
    }
    console.log(`src/generated is current (${fresh.length} files)`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
