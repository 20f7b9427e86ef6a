/** Avro maps for avsc that keep their entries' order, as Python's dicts do. */
import avro from "avsc";

/** A map as this package writes it: a Map (its order is kept) or a plain object. */
export type AvroMap<V> = ReadonlyMap<string, V> | Readonly<Record<string, V>>;

interface Tap {
  readLong(): number;
  readString(): string;
  writeLong(value: number): void;
  writeString(value: string): void;
}

interface ValueType {
  _read(tap: Tap): unknown;
  _write(tap: Tap, value: unknown): void;
  _check(value: unknown, flags?: unknown, hook?: unknown, path?: unknown): boolean;
}

/** Entries in the order a writer should send them: a Map's insertion order, an object's keys. */
export function entriesOf<V>(value: AvroMap<V>): [string, V][] {
  return value instanceof Map ? [...value.entries()] : Object.entries(value as Record<string, V>);
}

function isMapLike(value: unknown): value is AvroMap<unknown> {
  return value instanceof Map || (typeof value === "object" && value !== null && !Array.isArray(value));
}

/**
 * avsc's map type reads into a plain object and writes `Object.keys` order, which moves
 * integer-like keys ("2", "10") to the front and drops "__proto__". Python's fastavro writes
 * a dict's insertion order: this type writes a Map's order and reads into a Map, so a decoded
 * record encodes to the bytes it came from.
 */
export class OrderedMapType extends avro.types.MapType {
  _check(value: unknown, flags?: unknown, hook?: (value: unknown, type: unknown) => void): boolean {
    const values = (this as unknown as { valuesType: ValueType }).valuesType;
    const ok = isMapLike(value) && entriesOf(value).every(([, item]) => values._check(item, flags));
    if (!ok && hook) {
      hook(value, this);
    }
    return ok;
  }

  _read(tap: Tap): Map<string, unknown> {
    const values = (this as unknown as { valuesType: ValueType }).valuesType;
    const out = new Map<string, unknown>();
    for (let count = tap.readLong(); count !== 0; count = tap.readLong()) {
      if (count < 0) {
        count = -count;
        tap.readLong(); // the block's size in bytes: only for skipping
      }
      for (; count > 0; count -= 1) {
        const key = tap.readString();
        out.set(key, values._read(tap));
      }
    }
    return out;
  }

  _write(tap: Tap, value: unknown): void {
    const values = (this as unknown as { valuesType: ValueType }).valuesType;
    if (!isMapLike(value)) {
      throw new Error(`invalid map: ${String(value)}`);
    }
    const entries = entriesOf(value);
    if (entries.length > 0) {
      tap.writeLong(entries.length);
      for (const [key, item] of entries) {
        tap.writeString(key);
        values._write(tap, item);
      }
    }
    tap.writeLong(0);
  }

  _copy(value: unknown, opts?: unknown): unknown {
    const values = (this as unknown as { valuesType: { _copy(v: unknown, o: unknown): unknown } })
      .valuesType;
    if (!isMapLike(value)) {
      throw new Error(`invalid map: ${String(value)}`);
    }
    return new Map(entriesOf(value).map(([key, item]) => [key, values._copy(item, opts)]));
  }
}
