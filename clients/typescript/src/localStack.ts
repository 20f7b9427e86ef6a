/**
 * The bootstrap servers to use: RESULTLOG_BOOTSTRAP_SERVERS, else the local broker that
 * `resultlog up` or `resultlog kafka up` runs in the default directory, else 127.0.0.1:9092.
 *
 * The files read are the contract the Python client follows too (docs/local-stack.md):
 * `cluster.json` in `$XDG_STATE_HOME/resultlog/kafka` (else `$HOME/.local/state/resultlog/kafka`)
 * lists the nodes and their ports; `node-ID/broker.pid` holds a running node's process id.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** Where RESULTLOG_BOOTSTRAP_SERVERS points when it is unset and no local broker runs. */
export const DEFAULT_BOOTSTRAP = "127.0.0.1:9092";

let announced = false;

/** The bootstrap servers of `env` (default: this process's), saying once on stderr when they
 * come from the local stack. */
export function bootstrapServers(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env["RESULTLOG_BOOTSTRAP_SERVERS"];
  if (configured !== undefined && configured !== "") {
    return configured;
  }
  const directory = localKafkaDir(env);
  const found = localBootstrap(directory);
  if (found === null) {
    return DEFAULT_BOOTSTRAP;
  }
  if (!announced) {
    announced = true;
    process.stderr.write(
      `resultlog: RESULTLOG_BOOTSTRAP_SERVERS is unset: using the local broker ${found} (${directory})\n`,
    );
  }
  return found;
}

/** The default directory of the local broker, following XDG_STATE_HOME and HOME. */
export function localKafkaDir(env: NodeJS.ProcessEnv = process.env): string {
  const state = env["XDG_STATE_HOME"] || join(env["HOME"] || homedir(), ".local", "state");
  return join(state, "resultlog", "kafka");
}

interface ClusterFile {
  nodes?: { node_id?: unknown; port?: unknown }[];
  sasl?: unknown;
  tls?: unknown;
}

/** `127.0.0.1:PORT` of each running node of the plain-text cluster in `directory`, comma
 * separated; null when none runs there (or it wants TLS or logins, which need settings). */
export function localBootstrap(directory: string): string | null {
  let cluster: ClusterFile;
  try {
    cluster = JSON.parse(readFileSync(join(directory, "cluster.json"), "utf-8")) as ClusterFile;
  } catch {
    return null;
  }
  if (cluster.sasl === true || cluster.tls === true || !Array.isArray(cluster.nodes)) {
    return null;
  }
  const running = cluster.nodes.filter(
    (node) =>
      Number.isInteger(node.node_id) &&
      Number.isInteger(node.port) &&
      isKafkaProcess(readPid(join(directory, `node-${String(node.node_id)}`, "broker.pid"))),
  );
  return running.length === 0 ? null : running.map((node) => `127.0.0.1:${String(node.port)}`).join(",");
}

function readPid(path: string): number {
  try {
    return Number.parseInt(readFileSync(path, "utf-8").trim(), 10);
  } catch {
    return Number.NaN;
  }
}

/** Whether `pid` is a live Kafka node (its command line names kafka.Kafka where /proc says). */
function isKafkaProcess(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    return false;
  }
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: alive, another user's.
    if ((error as { code?: string }).code !== "EPERM") {
      return false;
    }
  }
  try {
    const cmdline = readFileSync(`/proc/${String(pid)}/cmdline`, "latin1");
    // The java launcher may re-exec itself while starting; its command line is empty meanwhile.
    return cmdline === "" || cmdline.includes("kafka.Kafka");
  } catch {
    return process.platform !== "linux";
  }
}
