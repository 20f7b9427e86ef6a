/** Canonical JSON and its sha256, byte for byte as Python's json.dumps(sort_keys=True,
 * separators=(",", ":"), ensure_ascii=False, allow_nan=False) and hashlib.sha256. */
import { createHash } from "node:crypto";
import { SchemaError } from "../errors.js";

/** The canonical JSON text of a JSON-like value: keys sorted by code point, no spaces. */
export function canonicalJson(value: unknown): string {
  return write(value, "$");
}

/** sha256 of the text's UTF-8 bytes, in hex. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

function write(value: unknown, path: string): string {
  if (value === null || value === undefined) {
    return "null";
  }
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      return number(value, path);
    case "bigint":
      return value.toString();
    case "string":
      return string(value, path);
    case "function":
      return string(value.toString(), path); // as Python's default=str would name it
    case "object":
      return Array.isArray(value) ? array(value, path) : object(value as Record<string, unknown>, path);
    default:
      throw new SchemaError(`${path}: cannot write a ${typeof value} as canonical JSON`);
  }
}

function array(items: unknown[], path: string): string {
  return `[${items.map((item, i) => write(item, `${path}[${i}]`)).join(",")}]`;
}

function object(value: Record<string, unknown>, path: string): string {
  const entries = (value instanceof Map ? [...value.entries()] : Object.entries(value)).filter(
    ([, item]) => item !== undefined, // as JSON.stringify drops them: absent, not null
  );
  entries.sort(([a], [b]) => byCodePoint(String(a), String(b)));
  const parts = entries.map(([key, item]) => `${string(String(key), path)}:${write(item, `${path}.${String(key)}`)}`);
  return `{${parts.join(",")}}`;
}

/** Python orders str by code point; JS's default sort orders UTF-16 units (astral differ). */
function byCodePoint(a: string, b: string): number {
  const [x, y] = [Array.from(a), Array.from(b)];
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) {
      return d;
    }
  }
  return x.length - y.length;
}

function string(value: string, path: string): string {
  if (!value.isWellFormed()) {
    throw new SchemaError(`${path}: a lone surrogate is not encodable as UTF-8`);
  }
  // JSON.stringify escapes exactly what Python's ensure_ascii=False escapes: the quote, the
  // backslash, \b \f \n \r \t and other controls below U+0020 as lowercase \u00xx.
  return JSON.stringify(value);
}

/** An integer-valued number as an integer; others as Python's float repr (shortest digits,
 * exponent below 1e-4 and from 1e16 on, two exponent digits at least). */
function number(value: number, path: string): string {
  if (!Number.isFinite(value)) {
    throw new SchemaError(`${path}: ${value} is not JSON (NaN and infinities are refused)`);
  }
  if (Number.isInteger(value) && Math.abs(value) < 2 ** 53) {
    return Object.is(value, -0) ? "0" : String(value);
  }
  const [mantissa, exp] = value.toExponential().split("e") as [string, string];
  const exponent = Number(exp);
  if (exponent < -4 || exponent >= 16) {
    const sign = exponent < 0 ? "-" : "+";
    return `${mantissa}e${sign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  const digits = mantissa.replace("-", "").replace(".", "");
  const negative = value < 0 ? "-" : "";
  if (exponent < 0) {
    return `${negative}0.${"0".repeat(-exponent - 1)}${digits}`;
  }
  const whole = digits.padEnd(exponent + 1, "0");
  const fraction = digits.slice(exponent + 1);
  return `${negative}${whole.slice(0, exponent + 1)}.${fraction || "0"}`;
}
