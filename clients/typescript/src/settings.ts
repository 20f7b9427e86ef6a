/** The settings this client reads, from the same RESULTLOG_* variables as the Python one. */
import { bootstrapServers } from "./localStack.js";

/** Where the store connects and which topic it writes. */
export interface StoreSettings {
  /** Comma-separated host:port list (RESULTLOG_BOOTSTRAP_SERVERS, else the local stack's). */
  bootstrapServers: string;
  /** The compacted results topic (RESULTLOG_RESULTS_TOPIC). */
  resultsTopic: string;
  /** The Kafka client id (RESULTLOG_CLIENT_ID). */
  clientId: string;
}

/** The settings of `env` (default: this process's), with the Python client's defaults. */
export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): StoreSettings {
  return {
    bootstrapServers: bootstrapServers(env),
    resultsTopic: env["RESULTLOG_RESULTS_TOPIC"] ?? "resultlog.sample-results",
    clientId: env["RESULTLOG_CLIENT_ID"] ?? "resultlog",
  };
}
