/** The one root of the errors this package throws, and one subclass per layer. */
export class ResultLogError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A record, key or run key that breaks the wire contract (refused before any write). */
export class SchemaError extends ResultLogError {}

/** Bytes that are not a SampleResult this package can read. */
export class DecodeError extends SchemaError {}

/** A record that could not be made durable, or a run key's records that could not be read. */
export class PersistenceError extends ResultLogError {
  readonly retriable: boolean;

  constructor(message: string, options?: { cause?: unknown; retriable?: boolean }) {
    super(message, options);
    this.retriable = options?.retriable ?? true;
  }
}

/** Durable records of the run key were made under another configuration. */
export class ConfigChangedError extends ResultLogError {}

/** The results topic a writer started on was deleted and re-created under it: what it wrote
 * before went with the old topic, so no later write may count as the run's. */
export class TopicRecreatedError extends PersistenceError {
  constructor(message: string) {
    super(message, { retriable: false });
  }
}
