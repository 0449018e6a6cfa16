import { type FormEvent, type KeyboardEvent, type ReactNode, useEffect, useId, useRef, useState } from 'react';
import { api, ApiError, type Channel, get, type Handoff, type HandoffDetail, type HandoffMessage, type HandoffStatus, type List, type Persona, qs, type Team } from '../api';
import { useAuth } from '../auth';
import { Empty, Field, Loading, Pager, ProblemView, ScopedButton, useAction, useCursor, useLoad, when } from '../ui';

/** The queue and the open conversation are asked again this often while the page is visible. */
const POLL_MS = 2000;
/** Who the console acts as in the Inbox (a team member's e-mail), remembered in this browser. */
const ME_KEY = 'switchboard.inbox.member';
const OPEN: ReadonlySet<HandoffStatus> = new Set(['queued', 'offered', 'accepted']);

type Tab = 'waiting' | 'mine' | 'closed';
const TABS: readonly (readonly [Tab, string])[] = [
  ['waiting', 'Waiting'],
  ['mine', 'Mine'],
  ['closed', 'Closed'],
];

const TRIGGER: Record<Handoff['trigger'], string> = {
  user: 'The user asked for a person',
  tool: 'The persona handed it over',
  rule: 'A handoff rule matched',
  api: 'Handed over through the API',
};
const STATUS: Record<HandoffStatus, string> = { queued: 'queued', offered: 'offered', accepted: 'accepted', resolved: 'resolved', returned: 'handed back' };

const same = (a: string | null | undefined, b: string | null | undefined) => !!a && !!b && a.toLowerCase() === b.toLowerCase();

function readMe(): string {
  try {
    return localStorage.getItem(ME_KEY) ?? '';
  } catch {
    return '';
  }
}

/** 75 000 ms → "1 min 15 s"; days and hours for longer spans. */
function span(msec: number): string {
  const s = Math.max(0, Math.round(msec / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 && m < 10 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}
const age = (iso: string) => span(Date.now() - new Date(iso).getTime());
const time = (iso: string) => new Date(iso).toLocaleTimeString();

interface Names {
  persona: (id: string) => string;
  team: (id: string) => Team | undefined;
}

export function InboxPage() {
  const teams = useLoad(() => get<List<Team>>('/business/teams?limit=100'), []);
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const [me, setMeState] = useState(readMe);
  const setMe = (email: string) => {
    setMeState(email);
    if (email) localStorage.setItem(ME_KEY, email);
    else localStorage.removeItem(ME_KEY);
  };
  const [tab, setTab] = useState<Tab>('waiting');
  const [teamId, setTeamId] = useState('');
  const [closedStatus, setClosedStatus] = useState<'resolved' | 'returned'>('resolved');
  const [openId, setOpenId] = useState<string | null>(null);
  const minePager = useCursor();
  const closedPager = useCursor();

  // Waiting = queued + offered (one request names both), longest waiting first.
  const waiting = useLoad(
    async () => {
      const page = await get<List<Handoff>>(`/handoffs${qs({ status: 'queued,offered', teamId, limit: 100 })}`);
      const data = [...page.data].sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
      return { data, more: page.nextCursor !== null };
    },
    [teamId],
    { every: POLL_MS },
  );
  const mine = useLoad(
    () => (me ? get<List<Handoff>>(`/handoffs${qs({ status: 'accepted', member: me, teamId, limit: 20, cursor: minePager.cursor })}`) : Promise.resolve(null)),
    [me, teamId, minePager.cursor],
    { every: POLL_MS },
  );
  const closed = useLoad(
    () => (tab === 'closed' ? get<List<Handoff>>(`/handoffs${qs({ status: closedStatus, teamId, limit: 20, cursor: closedPager.cursor })}`) : Promise.resolve(null)),
    [tab, closedStatus, teamId, closedPager.cursor],
    tab === 'closed' ? { every: POLL_MS } : {},
  );
  const refresh = () => {
    waiting.reload();
    mine.reload();
    closed.reload();
  };

  const teamList = teams.data?.data ?? [];
  const members = new Map<string, { email: string; teams: string[] }>();
  for (const t of teamList)
    for (const m of t.members) {
      const k = m.email.toLowerCase();
      members.set(k, { email: members.get(k)?.email ?? m.email, teams: [...(members.get(k)?.teams ?? []), t.name] });
    }
  const known = !me || members.has(me.toLowerCase()) || !teams.data;
  const names: Names = {
    persona: (id) => personas.data?.data.find((p) => p.id === id)?.name ?? id,
    team: (id) => teamList.find((t) => t.id === id),
  };
  const count = (t: Tab) => {
    if (t === 'waiting' && waiting.data) return ` (${waiting.data.data.length}${waiting.data.more ? '+' : ''})`;
    if (t === 'mine' && mine.data) return ` (${mine.data.data.length}${mine.data.nextCursor ? '+' : ''})`;
    return '';
  };
  const listOf = tab === 'waiting' ? waiting : tab === 'mine' ? mine : closed;

  return (
    <section className="inbox">
      <p className="muted">
        Conversations a persona handed to a person of its team. Accept one to reply to the user yourself; hand it back to the persona or resolve it when you are done.
        The queue and the open conversation refresh every 2 seconds while this page is visible.
      </p>
      {teams.loading && !teams.data && <Loading what="teams" />}
      <ProblemView error={teams.error} />
      {teams.data?.data.length === 0 && (
        <Empty>No teams yet — create one with POST /business/teams (its members’ e-mails), then pick it as a persona’s team on the Personas page.</Empty>
      )}
      <div className="toolbar">
        <Field label="Acting as" hint="Which team member you are: accepting, replying and closing are done in their name. Remembered in this browser.">
          {(id) => (
            <select id={id} value={me} onChange={(e) => setMe(e.target.value)} disabled={!teams.data}>
              <option value="">Choose a member</option>
              {!known && <option value={me}>{me} (not in any team)</option>}
              {[...members.values()].map((m) => (
                <option key={m.email} value={m.email}>
                  {m.email} ({m.teams.join(', ')})
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Team">
          {(id) => (
            <select
              id={id}
              value={teamId}
              onChange={(e) => {
                setTeamId(e.target.value);
                minePager.reset();
                closedPager.reset();
              }}
            >
              <option value="">All teams</option>
              {teamList.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      {!known && <p className="problem-inline">{me} is no longer a member of any team: choose another member.</p>}

      <Tabs tab={tab} onTab={setTab} label={(t, text) => `${text}${count(t)}`}>
        {tab === 'closed' && (
          <Field label="Closed as">
            {(id) => (
              <select
                id={id}
                value={closedStatus}
                onChange={(e) => {
                  setClosedStatus(e.target.value as 'resolved' | 'returned');
                  closedPager.reset();
                }}
              >
                <option value="resolved">Resolved</option>
                <option value="returned">Handed back to the persona</option>
              </select>
            )}
          </Field>
        )}
        {tab === 'mine' && !me ? (
          <Empty>Choose who you are acting as to see the conversations you have accepted.</Empty>
        ) : (
          <>
            {listOf.loading && !listOf.data && <Loading what="the queue" />}
            <ProblemView error={listOf.error} />
            {listOf.data && (
              <Queue
                list={listOf.data.data}
                me={me}
                names={names}
                openId={openId}
                onOpen={(id) => setOpenId(id === openId ? null : id)}
                empty={
                  tab === 'waiting'
                    ? 'Nobody is waiting for a person.'
                    : tab === 'mine'
                      ? `${me} has no open conversation.`
                      : closedStatus === 'resolved'
                        ? 'No resolved conversation.'
                        : 'No conversation handed back yet.'
                }
              />
            )}
            {tab === 'waiting' && waiting.data?.more && <p className="muted">Showing the newest 100 queued and the newest 100 offered.</p>}
            {tab === 'mine' && <Pager pager={minePager} nextCursor={mine.data?.nextCursor} what="my conversations" />}
            {tab === 'closed' && <Pager pager={closedPager} nextCursor={closed.data?.nextCursor} what="closed conversations" />}
          </>
        )}
      </Tabs>

      {openId && <Conversation key={openId} id={openId} me={me} names={names} onChanged={refresh} onClose={() => setOpenId(null)} />}

      {teamList.length > 0 && <HandoffSettings teams={teamList} onSaved={teams.reload} />}
    </section>
  );
}

/** Waiting / Mine / Closed as ARIA tabs (arrow keys move between them). */
function Tabs({ tab, onTab, label, children }: { tab: Tab; onTab: (t: Tab) => void; label: (t: Tab, text: string) => string; children: ReactNode }) {
  const base = useId();
  const refs = useRef<(HTMLButtonElement | null)[]>([]);
  const onKey = (e: KeyboardEvent, i: number) => {
    const to = e.key === 'ArrowRight' ? (i + 1) % TABS.length : e.key === 'ArrowLeft' ? (i + TABS.length - 1) % TABS.length : e.key === 'Home' ? 0 : e.key === 'End' ? TABS.length - 1 : -1;
    if (to < 0) return;
    e.preventDefault();
    onTab(TABS[to]![0]);
    refs.current[to]?.focus();
  };
  return (
    <>
      <div role="tablist" aria-label="Queue" className="tabs">
        {TABS.map(([t, text], i) => (
          <button
            key={t}
            ref={(el) => {
              refs.current[i] = el;
            }}
            role="tab"
            id={`${base}-${t}`}
            aria-selected={t === tab}
            aria-controls={`${base}-panel`}
            tabIndex={t === tab ? 0 : -1}
            className={t === tab ? 'tab selected' : 'tab'}
            onClick={() => onTab(t)}
            onKeyDown={(e) => onKey(e, i)}
          >
            {label(t, text)}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`${base}-panel`} aria-labelledby={`${base}-${tab}`} className="tabpanel">
        {children}
      </div>
    </>
  );
}

/** Who has a handoff, or who it waits for, and until when. */
function whoOf(h: Handoff, me: string, team: Team | undefined): { head: string; detail: string | null } {
  const you = (email: string | null) => `${email ?? 'nobody'}${same(email, me) ? ' (you)' : ''}`;
  switch (h.status) {
    case 'queued':
      return {
        head: 'In the queue',
        detail: h.nextAvailableAt
          ? `team next available ${when(h.nextAvailableAt)}`
          : team && !team.availableNow
            ? `${team.name} is not available now`
            : 'waiting for an available member',
      };
    case 'offered':
      if (!h.offerUntil) return { head: `Offered to ${you(h.member)}`, detail: null };
      const left = new Date(h.offerUntil).getTime() - Date.now();
      return { head: `Offered to ${you(h.member)}`, detail: `until ${time(h.offerUntil)} (${left > 0 ? `${span(left)} left` : 'passing to the next member'})` };
    case 'accepted':
      return { head: `Accepted by ${you(h.member)}`, detail: h.acceptedAt ? `at ${when(h.acceptedAt)}` : null };
    default:
      return { head: `${h.status === 'resolved' ? 'Resolved' : 'Handed back'} by ${you(h.endedBy)}`, detail: h.endedAt ? `at ${when(h.endedAt)}` : null };
  }
}

function Queue(props: { list: Handoff[]; me: string; names: Names; openId: string | null; onOpen: (id: string) => void; empty: string }) {
  const { list, me, names, openId } = props;
  if (list.length === 0) return <Empty>{props.empty}</Empty>;
  return (
    <table className="queue" data-testid="queue">
      <thead>
        <tr>
          <th scope="col">Conversation</th>
          <th scope="col">Why</th>
          <th scope="col">Who</th>
          <th scope="col">Age</th>
          <th scope="col">
            <span className="visually-hidden">Open</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {list.map((h) => {
          const team = names.team(h.teamId);
          const who = whoOf(h, me, team);
          const persona = names.persona(h.personaId);
          return (
            <tr key={h.id} data-handoff={h.id} aria-current={h.id === openId ? 'true' : undefined} className={h.status === 'offered' && same(h.member, me) ? 'for-me' : undefined}>
              <th scope="row">
                {persona}
                <div className="muted">
                  {team?.name ?? h.teamId} · {h.id}
                </div>
              </th>
              <td data-label="Why">
                {TRIGGER[h.trigger]}
                <div className="muted pre">{h.reason}</div>
              </td>
              <td className="who-cell" data-label="Who">
                <span className={`status ${h.status}`} data-status={h.status}>
                  {who.head}
                </span>
                {who.detail && <div className="muted">{who.detail}</div>}
              </td>
              <td className="nowrap" data-label="Age" title={when(h.createdAt)}>
                {age(h.createdAt)}
              </td>
              <td>
                <button className="secondary" onClick={() => props.onOpen(h.id)} aria-expanded={h.id === openId} aria-label={`${h.id === openId ? 'Close' : 'Open'} ${persona} conversation ${h.id}`}>
                  {h.id === openId ? 'Close' : 'Open'}
                </button>
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** One message as plain text: the user, the persona, a person (their e-mail) or a notice. */
function Message({ m, persona, me }: { m: HandoffMessage; persona: string; me: string }) {
  const human = m.author?.startsWith('human:') ? m.author.slice('human:'.length) : null;
  const kind = m.role === 'user' ? 'user' : m.author === 'system' ? 'notice' : human ? 'human' : 'assistant';
  const who = kind === 'user' ? 'User' : kind === 'notice' ? 'Notice' : human ? `${human} (person${same(human, me) ? ', you' : ''})` : `${persona} (persona)`;
  return (
    <article className={`msg ${kind}`} aria-label={`${who}, ${time(m.createdAt)}`} data-kind={kind}>
      <h3 className="who">
        {who} <span className="muted">· {time(m.createdAt)}</span>
      </h3>
      <p className="pre body">{m.content}</p>
    </article>
  );
}

function Conversation({ id, me, names, onChanged, onClose }: { id: string; me: string; names: Names; onChanged: () => void; onClose: () => void }) {
  const auth = useAuth();
  const detail = useLoad(() => get<HandoffDetail>(`/handoffs/${id}`), [id], { every: POLL_MS });
  const act = useAction();
  const [taken, setTaken] = useState<string | null>(null);
  const [text, setText] = useState('');
  // Opening a conversation moves the focus to it, once it has loaded.
  const heading = useRef<HTMLHeadingElement>(null);
  const loaded = detail.data !== undefined;
  useEffect(() => {
    if (loaded) heading.current?.focus();
  }, [loaded]);
  const log = useRef<HTMLDivElement>(null);
  const count = detail.data?.messages.length ?? 0;
  useEffect(() => {
    if (log.current) log.current.scrollTop = log.current.scrollHeight;
  }, [count]);

  if (detail.loading && !detail.data) return <Loading what="the conversation" />;
  if (!detail.data) return <ProblemView error={detail.error} />;
  const h = detail.data;
  const persona = names.persona(h.personaId);
  const team = names.team(h.teamId);
  const mine = h.status === 'accepted' && same(h.member, me);
  const open = OPEN.has(h.status);
  const canEnd = open && (h.status !== 'accepted' || mine);
  const inTeam = !team || team.members.some((m) => same(m.email, me));
  const needMe = me ? undefined : 'Choose who you are acting as (above) first.';
  const after = () => {
    detail.reload();
    onChanged();
  };

  const accept = () =>
    act.run(async () => {
      setTaken(null);
      try {
        await api('POST', `/handoffs/${id}/accept`, { member: me });
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 409) throw e;
        const now = await get<HandoffDetail>(`/handoffs/${id}`).catch(() => null);
        setTaken(
          now?.status === 'accepted' && now.member
            ? `Already taken by ${now.member}.`
            : now && !OPEN.has(now.status)
              ? `Already ${STATUS[now.status]}${now.endedBy ? ` by ${now.endedBy}` : ''}.`
              : (e.problem.detail ?? 'Someone else took it first.'),
        );
      }
      after();
    });
  const end = (to: 'return' | 'resolve') =>
    act.run(async () => {
      await api('POST', `/handoffs/${id}/${to}`, { member: me });
      after();
    });
  const reply = (e: FormEvent) => {
    e.preventDefault();
    if (!text.trim() || act.busy) return;
    void act.run(async () => {
      await api('POST', `/handoffs/${id}/messages`, { member: me, text });
      setText('');
      detail.reload();
    });
  };

  return (
    <section className="panel conversation" aria-label={`Conversation ${h.id}`} data-status={h.status}>
      <div className="row spread">
        <h2 ref={heading} tabIndex={-1}>
          {persona} · {team?.name ?? h.teamId}
        </h2>
        <button className="secondary" onClick={onClose} aria-label={`Close conversation ${h.id}`}>
          Close
        </button>
      </div>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <span className={`status ${h.status}`} data-testid="handoff-status">
            {STATUS[h.status]}
          </span>{' '}
          · {whoOf(h, me, team).head}
          {whoOf(h, me, team).detail ? `, ${whoOf(h, me, team).detail}` : ''}
        </dd>
        <dt>Why</dt>
        <dd>
          {TRIGGER[h.trigger]}: <span className="pre">{h.reason}</span>
        </dd>
        <dt>Started</dt>
        <dd>
          {when(h.createdAt)} ({age(h.createdAt)} ago){h.offers > 1 ? ` · offered ${h.offers} times` : ''}
        </dd>
        {h.firstReplyAt && (
          <>
            <dt>First reply</dt>
            <dd>{when(h.firstReplyAt)}</dd>
          </>
        )}
        <dt>Session</dt>
        <dd>{h.sessionId ?? 'deleted'}</dd>
      </dl>
      <ProblemView error={detail.error} />

      <div className="messages handoff-log" role="log" aria-label="Messages" ref={log} tabIndex={0}>
        {h.sessionId === null && <Empty>The conversation was deleted.</Empty>}
        {h.sessionId !== null && h.messages.length === 0 && <Empty>No messages yet.</Empty>}
        {h.messages.map((m) => (
          <Message key={m.id} m={m} persona={persona} me={me} />
        ))}
      </div>

      {taken && (
        <p className="problem" role="alert" data-testid="taken">
          {taken}
        </p>
      )}
      <ProblemView error={act.error} />

      {h.status === 'accepted' && !mine && (
        <p className="muted">
          {h.member} has this conversation; only they reply, hand it back or resolve it.
        </p>
      )}
      {mine && (
        <form className="composer" onSubmit={reply} aria-label="Reply">
          <Field label="Reply to the user" hint="Sent as you; the user sees it in the conversation. Enter sends, Shift+Enter starts a new line.">
            {(fid) => (
              <textarea
                id={fid}
                rows={3}
                value={text}
                onChange={(e) => setText(e.target.value)}
                onKeyDown={(e) => {
                  if (e.key === 'Enter' && !e.shiftKey) reply(e);
                }}
                disabled={!!auth.lacks('write')}
                maxLength={32000}
              />
            )}
          </Field>
          <ScopedButton scope="write" type="submit" disabled={act.busy || !text.trim()}>
            Send reply
          </ScopedButton>
        </form>
      )}
      {open && (
        <div className="row actions">
          {(h.status === 'queued' || h.status === 'offered') && (
            <ScopedButton scope="write" onClick={() => void accept()} disabled={act.busy || !me}>
              Accept
            </ScopedButton>
          )}
          {canEnd && (
            <>
              <ScopedButton scope="write" className="secondary" onClick={() => void end('return')} disabled={act.busy || !me}>
                Hand back
              </ScopedButton>
              <ScopedButton scope="write" className="secondary" onClick={() => void end('resolve')} disabled={act.busy || !me}>
                Resolve
              </ScopedButton>
            </>
          )}
        </div>
      )}
      {open && needMe && <p className="muted">{needMe}</p>}
      {open && me && !inTeam && (
        <p className="problem-inline">
          {me} is not a member of {team?.name}: only its members accept, reply to or close its conversations.
        </p>
      )}
      {canEnd && <p className="muted">Hand back: the persona answers again, with your messages in its history. Resolve: the conversation is done.</p>}
    </section>
  );
}

/** Per team: how long an offer waits for a member before it goes to the next (10 s – 1 day). */
function HandoffSettings({ teams, onSaved }: { teams: Team[]; onSaved: () => void }) {
  const channels = useLoad(() => get<List<Channel>>('/business/channels?limit=100'), []);
  const chat = (channels.data?.data ?? []).filter((c) => c.type === 'slack' || c.type === 'discord');
  return (
    <section className="panel settings" aria-labelledby="handoff-settings">
      <h2 id="handoff-settings">Handoff settings</h2>
      <p className="muted">A conversation handed over is offered to one available member at a time; if they do not accept within the offer time, it goes to the next.</p>
      {teams.map((t) => (
        <div key={t.id}>
          <TeamSettings team={t} onSaved={onSaved} />
          <DeskSettings team={t} channels={chat} onSaved={onSaved} />
        </div>
      ))}
    </section>
  );
}

/**
 * Per team: where its members work handoffs in Slack or Discord (a card with Accept in a channel, or
 * Slack direct messages), and each member's user id there.
 */
function DeskSettings({ team, channels, onSaved }: { team: Team; channels: Channel[]; onSaved: () => void }) {
  const [channelId, setChannelId] = useState(team.handoff.desk?.channelId ?? '');
  const [conversation, setConversation] = useState(team.handoff.desk?.conversation ?? '');
  const [ids, setIds] = useState<Record<string, string>>(() => Object.fromEntries(team.members.map((m) => [m.email, m.chatUserId ?? ''])));
  const [saved, setSaved] = useState<string | null>(null);
  const act = useAction();
  const save = (desk: { channelId: string; conversation: string } | null) =>
    void act.run(async () => {
      const chatUsers = team.members.map((m) => ({ email: m.email, chatUserId: ids[m.email]?.trim() ? ids[m.email]!.trim() : null }));
      await api('PUT', `/business/teams/${team.id}/handoff`, { desk, chatUsers });
      setSaved(desk ? `Saved: ${team.name}'s handoffs go to ${conversation === 'dm' ? 'members’ direct messages' : conversation}.` : `Removed: ${team.name} has no desk.`);
      if (!desk) {
        setChannelId('');
        setConversation('');
      }
      onSaved();
    });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save({ channelId, conversation: conversation.trim() });
  };
  return (
    <form className="team-settings" onSubmit={submit} aria-label={`Chat desk of ${team.name}`}>
      <p className="muted">Work {team.name}’s handoffs in Slack or Discord: each gets a card with an Accept button; the accepting member’s replies in its thread reach the user.</p>
      <div className="row">
        <Field label={`Desk channel of ${team.name}`} hint={channels.length === 0 ? 'Connect a Slack or Discord channel first' : 'Its bot posts the cards'}>
          {(id) => (
            <select id={id} value={channelId} onChange={(e) => (setChannelId(e.target.value), setSaved(null))} required>
              <option value="">Choose a channel</option>
              {channels.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.name} ({c.type})
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label={`Desk conversation of ${team.name}`} hint="A Slack or Discord channel id, or dm (Slack: each offer to the member’s direct messages)">
          {(id) => <input id={id} value={conversation} onChange={(e) => (setConversation(e.target.value), setSaved(null))} required pattern="[A-Za-z0-9_\-]+" maxLength={100} />}
        </Field>
      </div>
      {team.members.map((m) => (
        <Field key={m.email} label={`Chat user id of ${m.email}`} hint="Slack U…, or a Discord user id: their clicks and replies count as theirs">
          {(id) => <input id={id} value={ids[m.email] ?? ''} onChange={(e) => (setIds({ ...ids, [m.email]: e.target.value }), setSaved(null))} pattern="[A-Za-z0-9_\-]*" maxLength={64} />}
        </Field>
      ))}
      <div className="row">
        <ScopedButton scope="write" type="submit" disabled={act.busy}>
          Save desk
        </ScopedButton>
        {team.handoff.desk && (
          <ScopedButton scope="write" type="button" disabled={act.busy} onClick={() => save(null)}>
            Remove desk
          </ScopedButton>
        )}
      </div>
      {saved && (
        <p className="muted" role="status">
          {saved}
        </p>
      )}
      <ProblemView error={act.error} />
    </form>
  );
}

function TeamSettings({ team, onSaved }: { team: Team; onSaved: () => void }) {
  const [seconds, setSeconds] = useState(String(team.handoff.offerSeconds));
  const [saved, setSaved] = useState(false);
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api('PUT', `/business/teams/${team.id}/handoff`, { offerSeconds: Number(seconds) });
      setSaved(true);
      onSaved();
    });
  };
  return (
    <form className="team-settings" onSubmit={submit} aria-label={`Handoff settings of ${team.name}`}>
      <h3>{team.name}</h3>
      <p className="muted">
        {team.availableNow ? 'Available now' : 'Not available now'} · {team.members.length === 0 ? 'no members' : team.members.map((m) => `${m.email} (${m.status})`).join(', ')}
      </p>
      <div className="row">
        <Field label={`Offer time for ${team.name} (seconds)`} hint="10 – 86 400">
          {(id) => (
            <input
              id={id}
              type="number"
              min={10}
              max={86400}
              step={1}
              value={seconds}
              onChange={(e) => {
                setSeconds(e.target.value);
                setSaved(false);
              }}
              required
            />
          )}
        </Field>
        <ScopedButton scope="write" type="submit" disabled={act.busy}>
          Save offer time
        </ScopedButton>
      </div>
      {saved && (
        <p className="muted" role="status">
          Saved: offers to {team.name} now wait {span(Number(seconds) * 1000)}.
        </p>
      )}
      <ProblemView error={act.error} />
    </form>
  );
}
