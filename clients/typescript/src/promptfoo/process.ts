/** Who a process is on its machine (Linux): boot id, pid namespace and start time, as the
 * Python lease holder records them, so a crashed holder's lease stops counting at once. */
import { readFileSync, readlinkSync } from "node:fs";

/** `boot id/pid namespace/start time` of a local process, or null off Linux or when gone. */
export function processIdentity(pid: number): string | null {
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "ascii").trim();
    const namespace = readlinkSync("/proc/self/ns/pid");
    const started = startTime(pid);
    return started === null ? null : `${boot}/${namespace}/${started}`;
  } catch {
    return null;
  }
}

/** The start time of a live (not zombie) process, from /proc; null when it is gone. */
export function startTime(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return null;
    }
    throw error;
  }
  // After the command name: state is field 3 of stat(5), start time field 22.
  const fields = stat.slice(stat.lastIndexOf(")") + 1).trim().split(/\s+/);
  return fields[0] === "Z" || fields[0] === "X" ? null : (fields[19] ?? null);
}

/** True when `process` names a process of this machine and pid namespace that has ended. */
export function processGone(process: string | null | undefined, pid: number): boolean {
  const here = processIdentity(globalThis.process.pid);
  if (process === null || process === undefined || here === null) {
    return false;
  }
  const cut = process.lastIndexOf("/");
  if (process.slice(0, cut) !== here.slice(0, here.lastIndexOf("/"))) {
    return false; // another machine or container: only the expiry tells
  }
  try {
    return startTime(pid) !== process.slice(cut + 1);
  } catch {
    return false;
  }
}
