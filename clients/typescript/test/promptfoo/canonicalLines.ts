/** For the interop tests: each JSON line of stdin written back as canonical JSON. */
import { createInterface } from "node:readline";
import { canonicalJson } from "../../src/promptfoo/index.js";

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  process.stdout.write(`${canonicalJson(JSON.parse(line))}\n`);
}
