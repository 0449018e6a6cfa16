import { fileURLToPath } from 'node:url';
import { forkChild, type StartOptions } from './server-process.js';
import type { FakeChildMessage, FakeModelSettings, FakeModelStats, FakeParentMessage } from './server-protocol.js';

const ENTRY = fileURLToPath(new URL('./fake-model.js', import.meta.url));
const IPC_TIMEOUT_MS = 10_000;

/** The fake OpenAI-compatible model (`fake-model.ts`), running in its own process. */
export interface FakeModelProcess {
  /** The base URL a client is configured with: `http://127.0.0.1:<port>/v1`. */
  baseUrl: string;
  /** `<baseUrl>/chat/completions` */
  completionsUrl: string;
  pinnedCpu: number | null;
  set(settings: Partial<FakeModelSettings>): Promise<FakeModelSettings>;
  /** Ends every held stream with its finish and usage chunks and `[DONE]`; resolves with how many. */
  finish(): Promise<number>;
  stats(): Promise<FakeModelStats>;
  /** Raw bodies of the latest distinct completion requests it received, oldest first. */
  requests(): Promise<string[]>;
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  stop(): Promise<void>;
}

export async function startFakeModel(options: StartOptions = {}): Promise<FakeModelProcess> {
  const child = await forkChild<FakeChildMessage, FakeParentMessage>(ENTRY, [], 'fake model', options);
  const baseUrl = `http://127.0.0.1:${child.ready.port}/v1`;
  return {
    baseUrl,
    completionsUrl: `${baseUrl}/chat/completions`,
    pinnedCpu: child.pinnedCpu,
    async set(settings) {
      return (await child.ask({ type: 'set', settings }, 'set', IPC_TIMEOUT_MS)).settings;
    },
    async finish() {
      return (await child.ask({ type: 'finish' }, 'finished', IPC_TIMEOUT_MS)).count;
    },
    async stats() {
      return (await child.ask({ type: 'stats' }, 'stats', IPC_TIMEOUT_MS)).stats;
    },
    async requests() {
      return (await child.ask({ type: 'requests' }, 'requests', IPC_TIMEOUT_MS)).bodies;
    },
    async cpuUsage() {
      return (await child.ask({ type: 'cpu' }, 'cpu', IPC_TIMEOUT_MS)).usage;
    },
    stop: child.stop,
  };
}
