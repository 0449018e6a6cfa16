// Issue 29's Inbox in real Chromium: a conversation handed to a person (`/human`) waits in the team's
// queue; a member accepts it, replies (stored as theirs, `human:<email>`), sees the user's next
// message by polling, and hands it back; a second member who tries to accept it as well is told who
// has it; a background tab does not poll. Then the team's offer time and a persona's team and
// handoff rules, set in the console, and the page at 390 px in dark mode.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/http/console.routes.js';
import { type FakeSlack, startFakeSlack } from '../fakes/slack-api.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { ensureMembers } from '../helpers/factories.js';
import { listen } from '../integration/chat-helpers.js';
import { addPerson, axeSerious, expectClean, goTo, launch, openPage, screenshot, type Person, signIn, UI_WAIT_MS, type Watched } from './console-helpers.js';

const ANA = 'ana@example.com';
const BEN = 'ben@example.com';
const REPLY = 'Hello, this is Ana from support. <b>Your</b> order is on its way.';

/** Makes the page report itself hidden (a background tab) or visible again, as the browser would. */
const setVisible = (page: Page, visible: boolean) =>
  page.evaluate(`(() => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '${visible ? 'visible' : 'hidden'}' });
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => ${!visible} });
    document.dispatchEvent(new Event('visibilitychange'));
  })()`);

describe('the Inbox: human handoff in the console, in Chromium', { timeout: 60_000 }, () => {
  let t: TestApp;
  let origin: string;
  let browser: Browser;
  /** The person who signs in to the console (an owner, made through an invitation). */
  let owner: Person;
  let slack: FakeSlack;
  const opened: Watched[] = [];
  const open = async (opts?: Parameters<typeof openPage>[1]) => {
    const w = await openPage(browser, opts);
    opened.push(w);
    await signIn(w.page, origin, owner);
    return w;
  };
  let team: { id: string };
  let helpdesk: { id: string };
  let first: { sessionId: string; handoff: { id: string; status: string; member: string | null }; response: string };

  const api = async (method: string, url: string, body?: unknown) => {
    const res = await t.request({ method: method as 'GET', url, body });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.statusCode === 204 ? null : res.json();
  };

  beforeAll(async () => {
    if (!fs.existsSync(path.join(CONSOLE_DIR, 'index.html'))) throw new Error(`the console is not built (${CONSOLE_DIR}): run \`npm run build\` first (npm test does)`);
    slack = await startFakeSlack({ botToken: 'xoxb-inbox' });
    t = await createTestApp({ env: { SWITCHBOARD_SLACK_API_URL: slack.apiUrl } });
    origin = await listen(t);
    owner = await addPerson(t, 'owner');
    // Team members are people of the workspace (API.md §14).
    await ensureMembers(t, [ANA, BEN]);
    team = await api('POST', '/business/teams', { name: 'Support team', members: [ANA, BEN] });
    helpdesk = await api('POST', '/personas', { name: 'Helpdesk', instructions: 'Answer briefly.', teamId: team.id });
    first = await api('POST', '/query', { personaId: helpdesk.id, message: '/human help', userId: 'user-1' });
    browser = await launch();
  }, 60_000);
  afterAll(async () => {
    for (const w of opened) await w.context.close().catch(() => undefined);
    await browser?.close();
    await t?.close();
    await slack?.close();
  });

  it('member 1 sees it waiting, accepts, replies and hands back; member 2 is told it is already taken; a hidden page does not poll', async () => {
    expect(first.handoff).toMatchObject({ status: 'offered', member: ANA });
    const id = first.handoff.id;

    const ana = await open();
    await goTo(ana.page, 'Inbox');
    await ana.page.getByLabel('Acting as').selectOption(ANA);
    await ana.page.getByRole('tab', { name: 'Waiting (1)' }).waitFor();
    const row = ana.page.getByTestId('queue').locator(`tr[data-handoff="${id}"]`);
    await row.waitFor();
    expect(await row.textContent()).toMatch(new RegExp(`^Helpdesk.*Support team · ${id}.*The user asked for a personhelp.*Offered to ${ANA} \\(you\\)until .* left\\).*\\d+ s`));
    await row.getByRole('button', { name: `Open Helpdesk conversation ${id}` }).click();
    const convo = ana.page.getByRole('region', { name: `Conversation ${id}` });
    const log = convo.getByRole('log', { name: 'Messages' });
    await log.locator('article[data-kind=user]', { hasText: '/human help' }).waitFor();
    expect(await log.locator('article[data-kind=notice]').first().textContent()).toContain(first.response);

    // Member 2 opens the same conversation; then their tab goes to the background.
    const ben = await open();
    ben.allow.add(409);
    await goTo(ben.page, 'Inbox');
    await ben.page.getByLabel('Acting as').selectOption(BEN);
    await ben.page.getByRole('button', { name: `Open Helpdesk conversation ${id}` }).click();
    const benConvo = ben.page.getByRole('region', { name: `Conversation ${id}` });
    const benAccept = benConvo.getByRole('button', { name: 'Accept', exact: true });
    await benAccept.waitFor();
    await setVisible(ben.page, false);
    const hiddenAt = Date.now();
    const benCalls: string[] = [];
    ben.page.on('request', (r) => {
      if (r.url().includes('/api/')) benCalls.push(`${r.method()} ${new URL(r.url()).pathname}`);
    });

    await convo.getByRole('button', { name: 'Accept', exact: true }).click();
    await expect.poll(() => convo.getByTestId('handoff-status').textContent(), { timeout: UI_WAIT_MS }).toBe('accepted');
    await log.locator('article[data-kind=notice]', { hasText: `${ANA} (a person) joined the conversation.` }).waitFor();
    await ana.page.getByRole('tab', { name: 'Mine (1)' }).waitFor();
    await ana.page.getByRole('tab', { name: 'Waiting (0)' }).waitFor();

    // Longer than a polling interval in the background: member 2's page asked nothing and still offers Accept.
    await ben.page.waitForTimeout(Math.max(0, 2_500 - (Date.now() - hiddenAt)));
    expect(benCalls).toEqual([]);
    await benAccept.click();
    await expect.poll(() => benConvo.getByTestId('taken').textContent(), { timeout: UI_WAIT_MS }).toBe(`Already taken by ${ANA}.`);
    expect(benCalls[0]).toBe(`POST /api/handoffs/${id}/accept`);
    await benConvo.getByText(`${ANA} has this conversation; only they reply, hand it back or resolve it.`).waitFor();
    expect(await benConvo.getByRole('button', { name: 'Accept', exact: true }).count()).toBe(0);
    expect(await benConvo.getByRole('form', { name: 'Reply' }).count()).toBe(0);
    expect(await axeSerious(ben.page)).toEqual([]);
    benCalls.length = 0;

    // Member 1 replies: shown as theirs, stored with their e-mail, as plain text.
    await convo.getByLabel('Reply to the user').fill(REPLY);
    await convo.getByRole('button', { name: 'Send reply' }).click();
    const mine = log.locator('article[data-kind=human]', { hasText: 'Your' });
    await mine.waitFor();
    expect(await mine.getByRole('heading').textContent()).toMatch(new RegExp(`^${ANA} \\(person, you\\) · `));
    expect(await mine.locator('.body').textContent()).toBe(REPLY);
    expect(await mine.locator('b').count()).toBe(0);
    expect(await convo.getByLabel('Reply to the user').inputValue()).toBe('');
    const session = await api('GET', `/sessions/${first.sessionId}`);
    expect(session.messages.map((m: { role: string; author?: string; content: string }) => [m.role, m.author ?? null, m.content])).toEqual([
      ['user', null, '/human help'],
      ['assistant', 'system', first.response],
      ['assistant', 'system', `${ANA} (a person) joined the conversation.`],
      ['assistant', `human:${ANA}`, REPLY],
    ]);

    // Member 2's tab comes back: it refreshes at once and shows the reply.
    expect(await benConvo.locator('article[data-kind=human]').count()).toBe(0);
    await setVisible(ben.page, true);
    await benConvo.locator('article[data-kind=human]', { hasText: REPLY }).waitFor();
    expect(await benConvo.locator('article[data-kind=human] h3').first().textContent()).toMatch(new RegExp(`^${ANA} \\(person\\) · `));

    // The user writes again: the persona stays silent (the user gets what the person said since), and member 1's open conversation shows it by polling.
    const next = await api('POST', '/query', { personaId: helpdesk.id, sessionId: first.sessionId, message: 'Thanks! It is order 42.' });
    expect(next).toMatchObject({ response: `${ANA} (a person) joined the conversation.\n\n${ANA} (a person): ${REPLY}`, handoff: { id, status: 'accepted', member: ANA } });
    await log.locator('article[data-kind=user]', { hasText: 'Thanks! It is order 42.' }).waitFor();

    await ana.page.getByRole('tab', { name: 'Mine (1)' }).click();
    await ana.page.getByTestId('queue').locator(`tr[data-handoff="${id}"]`, { hasText: `Accepted by ${ANA} (you)` }).waitFor();
    expect(await axeSerious(ana.page)).toEqual([]);
    await screenshot(ana.page, 'inbox-conversation');

    // Hand back: the persona answers again.
    await convo.getByRole('button', { name: 'Hand back' }).click();
    await expect.poll(() => convo.getByTestId('handoff-status').textContent(), { timeout: UI_WAIT_MS }).toBe('handed back');
    await log.locator('article[data-kind=notice]', { hasText: `${ANA} (a person) left the conversation; Helpdesk takes over again.` }).waitFor();
    expect(await convo.getByRole('form', { name: 'Reply' }).count()).toBe(0);
    expect(await api('GET', `/handoffs/${id}`)).toMatchObject({ status: 'returned', endedBy: ANA, member: ANA });
    await ana.page.getByRole('tab', { name: 'Mine (0)' }).waitFor();
    await ana.page.getByRole('tab', { name: 'Closed' }).click();
    await ana.page.getByLabel('Closed as').selectOption('returned');
    await ana.page.getByTestId('queue').locator(`tr[data-handoff="${id}"]`, { hasText: `Handed back by ${ANA} (you)` }).waitFor();
    const back = await api('POST', '/query', { personaId: helpdesk.id, sessionId: first.sessionId, message: 'Are you there?' });
    // The user's next message brings the notice said since, once, and the persona answers again.
    expect(back.handoff).toMatchObject({ id, status: 'returned', messages: [{ author: 'system', content: `${ANA} (a person) left the conversation; Helpdesk takes over again.` }] });
    expect(back.response.length).toBeGreaterThan(0);
    expect((await api('POST', '/query', { personaId: helpdesk.id, sessionId: first.sessionId, message: 'Still there?' })).handoff).toBeUndefined();

    // Who you act as is remembered in this browser.
    await ana.page.reload();
    await ana.page.getByRole('navigation').waitFor();
    await ana.page.getByRole('heading', { level: 1, name: 'Inbox' }).waitFor();
    // The members' list loads after the page: the choice shows once its option is there.
    await expect.poll(() => ana.page.getByLabel('Acting as').inputValue(), { timeout: 10_000 }).toBe(ANA);
    expectClean(ana);
    expectClean(ben);
  });

  it('sets the team’s offer time, and a persona’s team and handoff rules; a keyword hands a conversation over', async () => {
    const w = await open();
    const { page } = w;
    await goTo(page, 'Inbox');
    const settings = page.getByRole('form', { name: 'Handoff settings of Support team' });
    expect(await settings.getByLabel('Offer time for Support team (seconds)').inputValue()).toBe('120');
    await settings.getByLabel('Offer time for Support team (seconds)').fill('90');
    await settings.getByRole('button', { name: 'Save offer time' }).click();
    await settings.getByText('Saved: offers to Support team now wait 1 min 30 s.').waitFor();
    expect((await api('GET', `/business/teams/${team.id}`)).handoff).toEqual({ offerSeconds: 90, notifyUrl: null, desk: null });

    // The team's chat desk: a Slack channel of the workspace, a conversation in it, the members' Slack ids.
    const deskChannel = await api('POST', '/business/channels', { type: 'slack', name: 'Team Slack', personaId: helpdesk.id, credentials: { botToken: 'xoxb-inbox', signingSecret: 'inbox-signing-secret' } });
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Inbox' }).waitFor();
    const desk = page.getByRole('form', { name: 'Chat desk of Support team' });
    await expect.poll(() => desk.getByLabel('Desk channel of Support team').locator('option').allTextContents(), { timeout: UI_WAIT_MS }).toContain('Team Slack (slack)');
    await desk.getByLabel('Desk channel of Support team').selectOption({ label: 'Team Slack (slack)' });
    await desk.getByLabel('Desk conversation of Support team').fill('CSUPPORT');
    await desk.getByLabel(`Chat user id of ${ANA}`).fill('UANA');
    expect(await axeSerious(page)).toEqual([]);
    await desk.getByRole('button', { name: 'Save desk' }).click();
    await desk.getByText('Saved: Support team\'s handoffs go to CSUPPORT.').waitFor();
    const withDesk = await api('GET', `/business/teams/${team.id}`);
    expect(withDesk.handoff.desk).toEqual({ channelId: deskChannel.id, conversation: 'CSUPPORT' });
    expect(withDesk.members.map((m: { email: string; chatUserId: string | null }) => [m.email, m.chatUserId])).toEqual([
      [ANA, 'UANA'],
      [BEN, null],
    ]);
    await desk.getByRole('button', { name: 'Remove desk' }).click();
    await desk.getByText('Removed: Support team has no desk.').waitFor();
    expect((await api('GET', `/business/teams/${team.id}`)).handoff.desk).toBeNull();

    // The Slack channel's AI-app settings: native streaming, feedback buttons, the status messages.
    await goTo(page, 'Channels');
    await page.getByRole('button', { name: 'Manage Team Slack' }).click();
    const channelForm = page.getByRole('form', { name: 'Settings of Team Slack' });
    expect(await channelForm.getByLabel('Stream answers natively (else post, then edit)').isChecked()).toBe(true);
    await channelForm.getByLabel('Stream answers natively (else post, then edit)').uncheck();
    await channelForm.getByLabel('Status messages').fill('Looking into it…\nChecking the order…');
    await channelForm.getByLabel('Suggested prompts').fill('Order status | Where is my order?');
    expect(await axeSerious(page)).toEqual([]);
    await channelForm.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(async () => (await api('GET', `/business/channels/${deskChannel.id}`)).settings, { timeout: UI_WAIT_MS }).toMatchObject({
      streaming: false,
      feedbackButtons: true,
      statusMessages: ['Looking into it…', 'Checking the order…'],
      suggestedPrompts: [{ title: 'Order status', message: 'Where is my order?' }],
    });

    const billing = await api('POST', '/personas', { name: 'Billing', instructions: 'Answer billing questions.' });
    await goTo(page, 'Personas');
    await page.getByRole('button', { name: 'Edit Billing' }).click();
    const form = page.getByRole('form', { name: 'Edit Billing' });
    expect(await form.getByLabel('Team').inputValue()).toBe('');
    await form.getByLabel('Team').selectOption({ label: 'Support team (2 members)' });
    await form.getByLabel('Handoff keywords').fill('refund\nchargeback');
    await form.getByLabel('Hand over after a rating of 1 or 2').check();
    expect(await axeSerious(page)).toEqual([]);
    await form.getByRole('button', { name: 'Save persona' }).click();
    await page.getByText('Human handoff to Support team: /human; keywords refund, chargeback; a low rating').waitFor();
    expect(await api('GET', `/personas/${billing.id}`)).toMatchObject({ teamId: team.id, handoff: { tool: false, keywords: ['refund', 'chargeback'], lowRating: true }, version: 1 });

    const asked = await api('POST', '/query', { personaId: billing.id, message: 'I want a REFUND please' });
    expect(asked.handoff).toMatchObject({ status: 'offered' });
    await goTo(page, 'Inbox');
    const row = page.getByTestId('queue').locator(`tr[data-handoff="${asked.handoff.id}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('A handoff rule matched');
    expect(await row.textContent()).toContain('The message contains "refund".');
    expectClean(w);
  });

  it('the Inbox with a conversation open is clean at 390 px in dark mode', async () => {
    const w = await open({ width: 390, dark: true });
    const { page } = w;
    await goTo(page, 'Inbox');
    await page.getByLabel('Acting as').selectOption(BEN);
    await page.getByRole('button', { name: /^Open Billing conversation / }).click();
    const convo = page.getByRole('region', { name: /^Conversation / });
    await convo.getByRole('log', { name: 'Messages' }).locator('article[data-kind=user]', { hasText: 'I want a REFUND please' }).waitFor();
    await convo.getByRole('button', { name: 'Accept', exact: true }).waitFor();
    expect(await axeSerious(page)).toEqual([]);
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
    await screenshot(page, 'inbox-390-dark');
    expectClean(w);
  });
});
