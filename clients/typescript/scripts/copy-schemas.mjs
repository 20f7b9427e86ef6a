// Ship the released SampleResult schemas (the repository's schemas/avro) beside the build.
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const source = join(root, "..", "..", "schemas", "avro");
const target = join(root, "dist", "avro");
mkdirSync(target, { recursive: true });
const names = readdirSync(source).filter((name) => /^sample_result\.v\d+\.avsc$/.test(name));
if (names.length === 0) {
  throw new Error(`no sample_result.v*.avsc under ${source}`);
}
for (const name of names) {
  copyFileSync(join(source, name), join(target, name));
}
