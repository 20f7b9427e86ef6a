/** Read zstd-compressed batches (the Python writer's compression.type) with KafkaJS. */
import { decompress } from "fzstd";
import kafkajs from "kafkajs";

const { CompressionCodecs, CompressionTypes } = kafkajs;

/** Teach KafkaJS to decompress zstd batches (it knows only gzip); this client writes none. */
export function registerZstd(): void {
  CompressionCodecs[CompressionTypes.ZSTD] = () => ({
    async compress(): Promise<Buffer> {
      throw new Error("this client does not write zstd batches");
    },
    async decompress(buffer: Buffer): Promise<Buffer> {
      return Buffer.from(decompress(buffer));
    },
  });
}
