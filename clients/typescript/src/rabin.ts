/** CRC-64-AVRO, the Rabin fingerprint the Avro specification names for single-object encoding. */

const EMPTY = 0xc15d213aa4d7a795n;
const MASK = 0xffffffffffffffffn;

const TABLE: readonly bigint[] = Array.from({ length: 256 }, (_, index) => {
  let fp = BigInt(index);
  for (let bit = 0; bit < 8; bit += 1) {
    fp = (fp >> 1n) ^ (EMPTY & (-(fp & 1n) & MASK));
  }
  return fp;
});

/** The 8-byte fingerprint of `text` (a schema's Parsing Canonical Form), little-endian. */
export function rabinFingerprint(text: string): Uint8Array {
  let fp = EMPTY;
  for (const byte of new TextEncoder().encode(text)) {
    fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(byte)) & 0xffn)]!;
  }
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, fp, true);
  return out;
}
