/** Avro longs for avsc: safe integers stay numbers, larger ones are bigints (never a throw). */
import avro from "avsc";

const MIN = -(2n ** 63n);
const MAX = 2n ** 63n - 1n;

/** A long as this package reads it: a number when exact, else a bigint. */
export type Long = number | bigint;

/** Whether `value` is an Avro long (a safe integer number or an in-range bigint). */
export function isLong(value: unknown): value is Long {
  if (typeof value === "number") {
    return Number.isSafeInteger(value);
  }
  return typeof value === "bigint" && value >= MIN && value <= MAX;
}

/** The smallest representation of a long: a number if it is exact as one. */
export function narrow(value: bigint): Long {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : value;
}

function toBuffer(value: Long): Buffer {
  const buf = Buffer.alloc(8);
  buf.writeBigInt64LE(BigInt(value));
  return buf;
}

function fromJSON(value: unknown): Long {
  if (isLong(value)) {
    return typeof value === "bigint" ? narrow(value) : value;
  }
  if (typeof value === "string" && /^-?\d+$/.test(value)) {
    return narrow(BigInt(value));
  }
  throw new TypeError(`not an Avro long: ${String(value)}`);
}

/** The avsc long type: registered through `registry: { long: LONG }` when parsing a schema. */
export const LONG = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => narrow(buf.readBigInt64LE()),
  toBuffer,
  fromJSON,
  toJSON: (value: Long) => (typeof value === "bigint" ? value.toString() : value),
  isValid: isLong,
  compare: (a: Long, b: Long) => {
    const [x, y] = [BigInt(a), BigInt(b)];
    return x < y ? -1 : x > y ? 1 : 0;
  },
});
