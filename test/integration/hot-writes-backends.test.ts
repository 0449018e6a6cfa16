// The channel inbox's and the OpenAI threads' grouped writes on both backends (issue 25): a retried
// delivery is stored once, a message is claimed by one run only, conversations and threads move to
// the latest session.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChannelStore } from '../../src/business/channels/channels.store.js';
import { createOpenAiThreadStore } from '../../src/core/openai-compat/openai.store.js';
import { testBackends } from '../helpers/postgres.js';
import { type OpenedBackend, openTestBackend } from '../helpers/sql-backend.js';

const NOW = '2026-11-25T00:00:00.000Z';

describe.each(testBackends())('hot-path writes on $kind', (which) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    opened = await openTestBackend(which);
    const k = opened.backend.kysely;
    await k.insertInto('workspaces').values({ id: 'wsp_1', name: 'w', created_at: NOW }).execute();
    await k.insertInto('channels').values({ id: 'chn_1', workspace_id: 'wsp_1', type: 'webhook', name: 'c', persona_id: 'per_1', ab_test_id: null, settings: '{}', secrets: 'x', created_at: NOW, updated_at: NOW }).execute();
    await k.insertInto('sessions').values(['ses_1', 'ses_2'].map((id) => ({ id, workspace_id: 'wsp_1', persona_id: 'per_1', ab_test_id: null, variant: null, channel_id: null, user_id: null, title: 't', message_count: 0, created_at: NOW, last_message_at: NOW }))).execute();
  });
  afterAll(() => opened?.close());

  const inboxRow = (externalId: string) => ({ channel_id: 'chn_1', external_id: externalId, conversation_id: 'conv', payload: '{}', status: 'pending' as const, received_at: NOW });

  it('stores a delivery once, lets one run claim it, settles it, and keeps the conversation on its latest session', async () => {
    const channels = createChannelStore(opened.backend, opened.hotWrites().channels);
    const [seq, again, other] = await Promise.all([channels.receive(inboxRow('ev-1')), channels.receive(inboxRow('ev-1')), channels.receive(inboxRow('ev-2'))]);
    expect(typeof seq).toBe('number');
    expect(again).toBeNull();
    expect(other).toBeGreaterThan(seq as number);
    expect((await channels.unanswered('chn_1')).map((r) => r.external_id)).toEqual(['ev-1', 'ev-2']);
    const pending = { status: 'pending', claimedBy: null } as const;
    const claims = await Promise.all([channels.claim(seq as number, pending, 'instance-a'), channels.claim(seq as number, pending, 'instance-b')]);
    expect(claims.sort()).toEqual([false, true]);
    const claimer = (await channels.inboxEntry('chn_1', 'ev-1'))!.claimed_by;
    expect(['instance-a', 'instance-b']).toContain(claimer);
    // Taken from the instance that claimed it (it died): only as read, by one.
    expect(await channels.claim(seq as number, { status: 'answering', claimedBy: 'someone-else' }, 'instance-c')).toBe(false);
    expect(await channels.claim(seq as number, { status: 'answering', claimedBy: claimer }, 'instance-c')).toBe(true);
    expect((await channels.inboxEntry('chn_1', 'ev-1'))!.claimed_by).toBe('instance-c');
    await channels.settle(seq as number, 'answered', NOW);
    expect(await channels.inboxEntry('chn_1', 'ev-1')).toMatchObject({ status: 'answered', answered_at: NOW, seq });
    expect((await channels.unanswered('chn_1')).map((r) => r.external_id)).toEqual(['ev-2']);

    expect(await channels.sessionOf('chn_1', 'conv')).toBeUndefined();
    await channels.setSession('chn_1', 'conv', 'ses_1');
    await channels.setSession('chn_1', 'conv', 'ses_2');
    expect(await channels.sessionOf('chn_1', 'conv')).toBe('ses_2');

    const posted = { channel_id: 'chn_1', external_id: 'out-1', session_id: 'ses_2', message_id: 'msg_1', created_at: NOW };
    await channels.posted([posted]);
    await channels.posted([{ ...posted, message_id: 'msg_other' }]); // the same posted message again: kept as first stored
    expect(await channels.postedMessage('chn_1', 'out-1')).toEqual(posted);
  });

  it('finds an OpenAI-compatible thread by its key and moves it to the latest session', async () => {
    const threads = createOpenAiThreadStore(opened.backend, opened.hotWrites().threads);
    const key = { workspaceId: 'wsp_1', model: 'switchboard/per_1', userKey: '', historyHash: 'h1' };
    expect(await threads.find(key)).toBeUndefined();
    await threads.save(key, 'ses_1', NOW);
    expect(await threads.find(key)).toBe('ses_1');
    await threads.save(key, 'ses_2', NOW);
    expect(await threads.find(key)).toBe('ses_2');
    expect(await threads.find({ ...key, workspaceId: 'wsp_other' })).toBeUndefined();
  });
});
