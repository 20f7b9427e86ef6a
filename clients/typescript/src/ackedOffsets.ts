/** The offsets the broker acknowledged, per partition: the writer's bind to the topic it
 * started on. KafkaJS cannot read topic IDs (it speaks Metadata up to v6), but a topic deleted
 * and re-created under the same name starts its partitions at offset 0 again. */
import { TopicRecreatedError } from "./errors.js";

/** The highest acknowledged offset of each partition of one topic. */
export class AckedOffsets {
  private readonly highest = new Map<number, bigint>();
  private recreated: TopicRecreatedError | null = null;

  constructor(readonly topic: string) {}

  /** Throw TopicRecreatedError once an acknowledgement ran backwards (no round trip). */
  check(): void {
    if (this.recreated !== null) {
      throw this.recreated;
    }
  }

  /** Note an acknowledged offset; throw TopicRecreatedError if it is below one acknowledged
   * before on the same partition (then every later check throws too). */
  note(partition: number, offset: bigint): void {
    this.check();
    const before = this.highest.get(partition);
    if (before !== undefined && offset < before) {
      this.recreated = new TopicRecreatedError(
        `results topic ${this.topic} was deleted and re-created under this write (partition ${partition} ` +
          `acknowledged offset ${offset} after ${before}): the records written before went with the old ` +
          "topic; run again to write into the new topic",
      );
      throw this.recreated;
    }
    this.highest.set(partition, offset);
  }
}
