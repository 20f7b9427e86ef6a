/** What the tests share: the repository's paths, and the vectors' JSON conventions. */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (this file runs from clients/typescript/dist/test/). */
export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

/**
 * The JSON conventions of the vectors, read back into the datum a writer is given: bytes as
 * {"hex": ...}, longs beyond 2^53 as {"long": "digits"}, maps as {"map": [[key, value], ...]}
 * in the writer's order (JSON objects lose it for integer-like keys).
 */
export function fromJson(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(fromJson);
  }
  if (typeof value !== "object" || value === null) {
    return value;
  }
  const entries = Object.entries(value);
  if (entries.length === 1) {
    const [[tag, inner]] = entries as [[string, unknown]];
    if (tag === "hex" && typeof inner === "string") {
      return Uint8Array.from(Buffer.from(inner, "hex"));
    }
    if (tag === "long" && typeof inner === "string") {
      return BigInt(inner);
    }
    if (tag === "map" && Array.isArray(inner)) {
      return new Map((inner as [string, unknown][]).map(([k, v]) => [k, fromJson(v)]));
    }
  }
  return Object.fromEntries(entries.map(([k, v]) => [k, fromJson(v)]));
}

/** The golden vectors of schemas/conformance.json. */
export function goldenVectors(): GoldenVectors {
  return JSON.parse(readFileSync(join(REPO, "schemas", "conformance.json"), "utf-8")) as GoldenVectors;
}

export interface GoldenVectors {
  partitions: number;
  schemas: Record<string, string>;
  keys: {
    run_key: { run_id: string; benchmark_id: string; model: string };
    encoded_run_key: string;
    key_sample_3_epoch_0: string;
    partition: number;
  }[];
  records: { name: string; schema_version: number; key: string; datum: Record<string, unknown>; single_object_hex: string }[];
}

/** The project's Python (RESULTLOG_PYTHON, else the repository's .venv): it must import resultlog. */
export function projectPython(): string {
  const python = process.env["RESULTLOG_PYTHON"] ?? join(REPO, ".venv", "bin", "python");
  if (!existsSync(python)) {
    throw new Error(
      `the generated vectors need the project's Python at ${python}: run \`make install\` in ${REPO} ` +
        "or set RESULTLOG_PYTHON to a Python that imports resultlog",
    );
  }
  return python;
}

/** Run a Python script of this package's test/python folder to its end. */
export function runPython(script: string, ...args: string[]): void {
  const path = join(REPO, "clients", "typescript", "test", "python", script);
  execFileSync(projectPython(), [path, ...args], { stdio: ["ignore", "inherit", "inherit"] });
}
