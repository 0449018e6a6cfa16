import { fileURLToPath } from 'node:url';
import { forkChild, type StartOptions } from './server-process.js';
import type { FakeSlackChildMessage, FakeSlackParentMessage, FakeSlackStats } from './server-protocol.js';

const ENTRY = fileURLToPath(new URL('./fake-slack.js', import.meta.url));
const IPC_TIMEOUT_MS = 10_000;

/** The fake Slack Web API (`fake-slack.ts`), running in its own process. */
export interface FakeSlackProcess {
  /** `http://127.0.0.1:<port>/api/`, for SWITCHBOARD_SLACK_API_URL. */
  apiUrl: string;
  pinnedCpu: number | null;
  /** What it saw since the last `reset`. */
  stats(): Promise<FakeSlackStats>;
  /** Forgets every call recorded so far. */
  reset(): Promise<void>;
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  stop(): Promise<void>;
}

export async function startFakeSlackProcess(options: StartOptions = {}): Promise<FakeSlackProcess> {
  const child = await forkChild<FakeSlackChildMessage, FakeSlackParentMessage>(ENTRY, [], 'fake Slack', options);
  return {
    apiUrl: `http://127.0.0.1:${child.ready.port}/api/`,
    pinnedCpu: child.pinnedCpu,
    async stats() {
      return (await child.ask({ type: 'stats' }, 'stats', IPC_TIMEOUT_MS)).stats;
    },
    async reset() {
      await child.ask({ type: 'reset' }, 'reset', IPC_TIMEOUT_MS);
    },
    async cpuUsage() {
      return (await child.ask({ type: 'cpu' }, 'cpu', IPC_TIMEOUT_MS)).usage;
    },
    stop: child.stop,
  };
}
