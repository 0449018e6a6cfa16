/**
 * Child-process entry (`fork(dist/bench/lib/fake-slack.js)`): the tests' fake Slack Web API
 * (test/fakes/slack-api.ts) on 127.0.0.1, port 0, in a process of its own, so the replies a
 * Switchboard server posts during a benchmark cost neither the server's core nor the load
 * generator's event loop. Reports `{ type: 'ready', port }` (the Web API is `http://127.0.0.1:<port>/api/`);
 * answers `cpu`, `stats` (FakeSlackStats since the last `reset`), `reset` and `stop`.
 */
import { startFakeSlack } from '../../test/fakes/slack-api.js';
import { CHANNELS_SLACK_BOT_TOKEN, type FakeSlackChildMessage, type FakeSlackParentMessage, type FakeSlackStats, type FakeSlackThread } from './server-protocol.js';

function send(message: FakeSlackChildMessage) {
  process.send?.(message);
}

async function main() {
  if (!process.send) throw new Error('fake-slack.js runs as a forked child of bench/run.js');
  const fake = await startFakeSlack({ botToken: CHANNELS_SLACK_BOT_TOKEN });

  const stats = (): FakeSlackStats => {
    const threads: Record<string, FakeSlackThread> = {};
    /** A reply's own ts → the thread it was posted in, so its edits count for that thread. */
    const threadOf = new Map<string, string>();
    let posts = 0;
    let updates = 0;
    let errors = 0;
    for (const call of fake.calls) {
      if (call.status !== 200 || call.error !== null) {
        errors++;
        continue;
      }
      if (call.method === 'chat.postMessage') {
        posts++;
        const thread = String(call.body.thread_ts ?? '');
        const seen = (threads[thread] ??= { posts: 0, apologies: 0, firstAt: call.at, lastAt: call.at });
        seen.posts++;
        seen.lastAt = Math.max(seen.lastAt, call.at);
        if (String(call.body.text ?? '').startsWith('Sorry')) seen.apologies++;
        if (typeof call.response?.ts === 'string') threadOf.set(call.response.ts, thread);
      } else if (call.method === 'chat.update') {
        updates++;
        const seen = threads[threadOf.get(String(call.body.ts ?? '')) ?? ''];
        if (seen) seen.lastAt = Math.max(seen.lastAt, call.at);
      }
    }
    return { posts, updates, errors, threads };
  };

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void fake.close().finally(() => process.exit(0));
  };
  process.on('message', (raw) => {
    const message = raw as FakeSlackParentMessage;
    if (message.type === 'cpu') send({ type: 'cpu', usage: process.cpuUsage() });
    else if (message.type === 'memory') send({ type: 'memory', usage: process.memoryUsage(), gc: false });
    else if (message.type === 'stats') send({ type: 'stats', stats: stats() });
    else if (message.type === 'reset') {
      fake.reset();
      send({ type: 'reset' });
    } else if (message.type === 'stop') stop();
  });
  process.on('disconnect', stop);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, stop);

  const port = Number(new URL(fake.apiUrl).port);
  send({ type: 'ready', port, key: null, personaId: null });
}

main().catch((err: unknown) => {
  send({ type: 'failed', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
