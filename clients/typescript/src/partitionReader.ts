/** Read one partition of a topic from its start to the high watermark taken when it starts. */
import { randomUUID } from "node:crypto";
import kafkajs from "kafkajs";
import type { Admin, Kafka, KafkaMessage } from "kafkajs";
import { PersistenceError } from "./errors.js";

const { AssignerProtocol } = kafkajs;

/**
 * KafkaJS reads only through consumer groups: this assigner gives the group's one member the
 * one partition wanted (a run key's records all lie in one), and nothing else.
 */
function onePartition(topic: string, partition: number) {
  const name = "ResultLogOnePartition";
  return () => ({
    name,
    version: 1,
    async assign({ members }: { members: { memberId: string }[] }) {
      return members.map((member, i) => ({
        memberId: member.memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: 1,
          assignment: i === 0 ? { [topic]: [partition] } : {},
          userData: Buffer.alloc(0),
        }),
      }));
    },
    protocol({ topics }: { topics: string[] }) {
      return { name, metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }) };
    },
  });
}

/** Every message of `topic`[`partition`] up to its current end, in offset order. */
export async function readPartition(
  kafka: Kafka,
  admin: Admin,
  topic: string,
  partition: number,
  onMessage: (message: KafkaMessage) => void,
  timeoutMs = 60_000,
): Promise<void> {
  const offsets = await admin.fetchTopicOffsets(topic);
  const found = offsets.find((o) => o.partition === partition);
  if (found === undefined) {
    throw new PersistenceError(`topic ${topic} has no partition ${partition}`, { retriable: false });
  }
  const [low, high] = [BigInt(found.low), BigInt(found.high)];
  if (high <= low) {
    return;
  }
  const groupId = `resultlog-ts-read-${randomUUID()}`;
  const consumer = kafka.consumer({
    groupId,
    partitionAssigners: [onePartition(topic, partition)],
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 200,
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(
        () => reject(new PersistenceError(`reading ${topic}[${partition}] to offset ${high} took over ${timeoutMs} ms`)),
        timeoutMs,
      );
      // KafkaJS restarts a consumer after a retriable crash (a leader moving): wait for it.
      consumer.on(consumer.events.CRASH, ({ payload }) => {
        if (!payload.restart) {
          reject(new PersistenceError(`reading ${topic}[${partition}] failed: ${payload.error.message}`, { cause: payload.error }));
        }
      });
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            for (const message of batch.messages) {
              if (BigInt(message.offset) < high) {
                onMessage(message);
              }
            }
            const last = batch.messages.at(-1);
            if (last !== undefined && BigInt(last.offset) >= high - 1n) {
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    clearTimeout(timer);
    await consumer.disconnect();
    await admin.deleteGroups([groupId]).catch(() => undefined); // a reader's group is litter
  }
}
