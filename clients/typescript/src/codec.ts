/** SampleResult in Avro single-object encoding: C3 01, the CRC-64-AVRO fingerprint of the
 * schema's Parsing Canonical Form (little-endian), then the Avro body. */
import { readdirSync, readFileSync } from "node:fs";
import avro from "avsc";
import { DecodeError, SchemaError } from "./errors.js";
import { LONG } from "./long.js";
import { OrderedMapType } from "./orderedMap.js";
import { rabinFingerprint } from "./rabin.js";
import type { DecodedSampleResult, SampleResult } from "./record.js";
import { checkRecord } from "./rules.js";

const MAGIC = [0xc3, 0x01] as const;
const HEADER = 10;
const AVRO_DIR = new URL("../avro/", import.meta.url);

/** One released SampleResult schema: its avsc type and single-object header. */
interface SchemaVersion {
  version: number;
  type: avro.Type;
  fingerprint: Uint8Array;
  header: Buffer;
}

function typeHook(schema: avro.Schema, opts: avro.ForSchemaOptions): avro.Type | undefined {
  if (schema === "long" || (isObject(schema) && schema.type === "long")) {
    return LONG;
  }
  if (isObject(schema) && schema.type === "map") {
    return new OrderedMapType(schema as avro.Schema, opts);
  }
  return undefined;
}

function isObject(schema: unknown): schema is { type?: unknown } {
  return typeof schema === "object" && schema !== null && !Array.isArray(schema);
}

function load(version: number): SchemaVersion {
  const text = readFileSync(new URL(`sample_result.v${version}.avsc`, AVRO_DIR), "utf-8");
  const schema = JSON.parse(text) as avro.Schema;
  // The canonical form comes from avsc's own types, untouched by our hooks.
  const canonical = JSON.stringify(avro.Type.forSchema(schema, { wrapUnions: false }).schema());
  const fingerprint = rabinFingerprint(canonical);
  const type = avro.Type.forSchema(schema, { wrapUnions: false, typeHook });
  return { version, type, fingerprint, header: Buffer.from([...MAGIC, ...fingerprint]) };
}

const VERSIONS: ReadonlyMap<number, SchemaVersion> = new Map(
  readdirSync(AVRO_DIR)
    .map((name) => /^sample_result\.v(\d+)\.avsc$/.exec(name)?.[1])
    .filter((found): found is string => found !== undefined)
    .map((found) => Number(found))
    .sort((a, b) => a - b)
    .map((version) => [version, load(version)]),
);

/** The newest released SampleResult schema version: what records are written and read as. */
export const CURRENT_VERSION = Math.max(...VERSIONS.keys());

const resolvers = new Map<number, avro.Type>();

function schemaVersion(version: number): SchemaVersion {
  const found = VERSIONS.get(version);
  if (found === undefined) {
    throw new SchemaError(`unknown SampleResult schema version ${version} (shipped: ${[...VERSIONS.keys()].join(", ")})`);
  }
  return found;
}

/** The 8-byte CRC-64-AVRO fingerprint of a shipped SampleResult version, as hex. */
export function schemaFingerprint(version: number): string {
  return Buffer.from(schemaVersion(version).fingerprint).toString("hex");
}

/** Serialize a record in single-object encoding under schema `schemaVersion` (default: the
 * newest); SchemaError, in one line naming the field, for a record that breaks the contract. */
export function encodeSampleResult(datum: SampleResult, schemaVersion_: number = CURRENT_VERSION): Uint8Array {
  const { type, header } = schemaVersion(schemaVersion_);
  let problem: string | null = null;
  const prepared = withBuffers(datum);
  type.isValid(prepared, {
    errorHook: (path: string[], value: unknown) => {
      problem ??= `SampleResult.${path.join(".") || "record"} does not fit the schema (got ${describe(value)})`;
    },
  });
  if (problem !== null) {
    throw new SchemaError(problem);
  }
  checkStrings(datum, "SampleResult");
  checkRecord(datum);
  const body = type.toBuffer(prepared);
  return new Uint8Array(Buffer.concat([header, body]));
}

/** Deserialize a single-object SampleResult of any shipped version into the newest schema's
 * fields (defaults filled in); DecodeError for bytes that are not one. */
export function decodeSampleResult(raw: Uint8Array): DecodedSampleResult {
  const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  if (bytes.length < HEADER || bytes[0] !== MAGIC[0] || bytes[1] !== MAGIC[1]) {
    throw new DecodeError(
      bytes.length >= 1 && bytes[0] === 0
        ? "registry-framed value (magic 0): this client reads single-object encoding only"
        : `not a single-object value (${bytes.length} bytes starting ${bytes.subarray(0, 2).toString("hex")})`,
    );
  }
  const writer = [...VERSIONS.values()].find((v) => v.header.equals(bytes.subarray(0, HEADER)));
  if (writer === undefined) {
    throw new DecodeError(`unknown schema fingerprint ${bytes.subarray(2, HEADER).toString("hex")} (not a shipped version)`);
  }
  const reader = schemaVersion(CURRENT_VERSION).type;
  let decoded: { value: unknown; offset: number };
  try {
    decoded = reader.decode(bytes, HEADER, resolver(writer, reader));
  } catch (exc) {
    throw new DecodeError(`malformed Avro body: ${(exc as Error).message}`, { cause: exc });
  }
  if (decoded.offset < 0) {
    throw new DecodeError("truncated Avro body");
  }
  if (decoded.offset !== bytes.length) {
    throw new DecodeError(`${bytes.length - decoded.offset} trailing bytes after the Avro body`);
  }
  const record = decoded.value as DecodedSampleResult;
  try {
    checkRecord(record, false); // JSON texts are opaque to readers, as in Python's decoder
  } catch (exc) {
    throw new DecodeError(`SampleResult violates the contract: ${(exc as Error).message}`, { cause: exc });
  }
  return record;
}

function resolver(writer: SchemaVersion, reader: avro.Type): avro.Type | undefined {
  if (writer.version === CURRENT_VERSION) {
    return undefined;
  }
  if (!resolvers.has(writer.version)) {
    resolvers.set(writer.version, reader.createResolver(writer.type) as unknown as avro.Type);
  }
  return resolvers.get(writer.version) as avro.Type;
}

/** The record with its bytes field as a Buffer (what avsc's bytes type takes). */
function withBuffers(datum: SampleResult): SampleResult {
  const payload = datum.harness_payload;
  if (payload instanceof Uint8Array && !Buffer.isBuffer(payload)) {
    return { ...datum, harness_payload: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength) };
  }
  return datum;
}

/** Refuse strings with lone surrogates: UTF-8 cannot carry them (avsc would write U+FFFD). */
function checkStrings(value: unknown, path: string): void {
  if (typeof value === "string") {
    if (!value.isWellFormed()) {
      throw new SchemaError(`${path} is not encodable as UTF-8 (a lone surrogate)`);
    }
  } else if (value instanceof Map) {
    for (const [key, item] of value) {
      checkStrings(key, `${path} key`);
      checkStrings(item, `${path}.${key}`);
    }
  } else if (typeof value === "object" && value !== null && !(value instanceof Uint8Array)) {
    for (const [key, item] of Object.entries(value)) {
      checkStrings(key, `${path} key`);
      checkStrings(item, `${path}.${key}`);
    }
  }
}

function describe(value: unknown): string {
  const text = typeof value === "bigint" ? `${value}n` : (JSON.stringify(value) ?? String(value));
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
