/** resultlog from TypeScript: records, keys and partitions byte for byte as the Python
 * writer makes them, and a Kafka store that writes and resumes runs. */
export { CURRENT_VERSION, decodeSampleResult, encodeSampleResult, schemaFingerprint } from "./codec.js";
export {
  ConfigChangedError,
  DecodeError,
  PersistenceError,
  ResultLogError,
  SchemaError,
  TopicRecreatedError,
} from "./errors.js";
export type { Long } from "./long.js";
export type * from "./record.js";
export { encodeRunKey, partitionFor, recordKey, runKeyPrefix, type RunKey } from "./runKey.js";
export { currentSample, sampleScope, SampleContext, stampXBench, type XBench } from "./context.js";
export { WritePolicy, type WritePolicyOptions } from "./retry.js";
export { settingsFromEnv, type StoreSettings } from "./settings.js";
export { bootstrapServers } from "./localStack.js";
export {
  KafkaResultStore,
  pairKey,
  type DegradedWrites,
  type LoadOptions,
  type ResumeState,
  type StoreOptions,
} from "./store.js";
