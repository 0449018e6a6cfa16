/**
 * A small help-centre knowledge base and the questions asked of it in the chat benchmark: 40
 * topics × 5 articles (overview, how-to, troubleshooting, limits, FAQ), each a few sentences (one
 * chunk), and 50 questions about those topics in different words. Deterministic: every run sees
 * the same text.
 */
import { prng } from '../../test/helpers/prng.js';

export interface ChatSource {
  kind: 'text';
  name: string;
  content: string;
}

interface Topic {
  /** "password resets" */
  subject: string;
  /** Where it lives in the product. */
  place: string;
  /** Words only this topic uses. */
  terms: [string, string, string];
  /** Who may do it. */
  role: string;
}

const TOPICS: Topic[] = [
  { subject: 'password resets', place: 'Account > Security', terms: ['reset link', 'expiry', 'lockout'], role: 'any member' },
  { subject: 'two-factor authentication', place: 'Account > Security > 2FA', terms: ['authenticator app', 'recovery codes', 'TOTP'], role: 'any member' },
  { subject: 'single sign-on with SAML', place: 'Admin > Identity', terms: ['identity provider', 'metadata XML', 'assertion'], role: 'workspace owners' },
  { subject: 'SCIM user provisioning', place: 'Admin > Identity > SCIM', terms: ['bearer token', 'deprovisioning', 'group push'], role: 'workspace owners' },
  { subject: 'invoices', place: 'Billing > Invoices', terms: ['PDF invoice', 'VAT number', 'billing address'], role: 'billing admins' },
  { subject: 'refunds', place: 'Billing > Payments', terms: ['prorated credit', 'chargeback', 'refund window'], role: 'billing admins' },
  { subject: 'plan upgrades', place: 'Billing > Plan', terms: ['seat count', 'annual discount', 'upgrade preview'], role: 'billing admins' },
  { subject: 'payment methods', place: 'Billing > Payment methods', terms: ['credit card', 'SEPA mandate', 'bank transfer'], role: 'billing admins' },
  { subject: 'API keys', place: 'Developers > API keys', terms: ['key scope', 'key rotation', 'revocation'], role: 'admins' },
  { subject: 'API rate limits', place: 'Developers > Usage', terms: ['429 response', 'Retry-After header', 'burst allowance'], role: 'developers' },
  { subject: 'webhooks', place: 'Developers > Webhooks', terms: ['signing secret', 'delivery retries', 'event payload'], role: 'developers' },
  { subject: 'the CSV import', place: 'Data > Import', terms: ['column mapping', 'header row', 'UTF-8 encoding'], role: 'editors' },
  { subject: 'data export', place: 'Data > Export', terms: ['export archive', 'JSON lines', 'download link'], role: 'admins' },
  { subject: 'data retention', place: 'Admin > Compliance', terms: ['retention period', 'legal hold', 'purge job'], role: 'compliance officers' },
  { subject: 'GDPR requests', place: 'Admin > Compliance > Privacy', terms: ['subject access request', 'erasure', 'data processing agreement'], role: 'compliance officers' },
  { subject: 'audit logs', place: 'Admin > Audit log', terms: ['actor', 'event filter', 'SIEM forwarding'], role: 'admins' },
  { subject: 'team invitations', place: 'Team > Members', terms: ['invite email', 'pending invite', 'domain allow-list'], role: 'admins' },
  { subject: 'roles and permissions', place: 'Team > Roles', terms: ['custom role', 'permission set', 'least privilege'], role: 'workspace owners' },
  { subject: 'guest access', place: 'Team > Guests', terms: ['guest seat', 'shared channel', 'expiry date'], role: 'admins' },
  { subject: 'email notifications', place: 'Profile > Notifications', terms: ['digest email', 'mention alert', 'unsubscribe link'], role: 'any member' },
  { subject: 'the mobile app', place: 'the App Store and Google Play', terms: ['push notification', 'offline mode', 'biometric unlock'], role: 'any member' },
  { subject: 'the desktop app', place: 'Downloads', terms: ['auto-update', 'tray icon', 'proxy settings'], role: 'any member' },
  { subject: 'the Slack integration', place: 'Integrations > Slack', terms: ['slash command', 'bot token', 'channel mapping'], role: 'admins' },
  { subject: 'the Salesforce integration', place: 'Integrations > Salesforce', terms: ['field mapping', 'sync interval', 'sandbox org'], role: 'admins' },
  { subject: 'the Zapier integration', place: 'Integrations > Zapier', terms: ['trigger', 'zap history', 'polling delay'], role: 'editors' },
  { subject: 'custom domains', place: 'Settings > Domains', terms: ['CNAME record', 'TLS certificate', 'DNS propagation'], role: 'admins' },
  { subject: 'branding', place: 'Settings > Branding', terms: ['logo upload', 'accent colour', 'email footer'], role: 'admins' },
  { subject: 'dashboards', place: 'Analytics > Dashboards', terms: ['widget', 'refresh schedule', 'shared dashboard'], role: 'editors' },
  { subject: 'scheduled reports', place: 'Analytics > Reports', terms: ['report schedule', 'recipient list', 'time zone'], role: 'editors' },
  { subject: 'search', place: 'the search bar', terms: ['search operator', 'saved search', 'indexing delay'], role: 'any member' },
  { subject: 'file attachments', place: 'any record', terms: ['file size limit', 'virus scan', 'preview'], role: 'any member' },
  { subject: 'storage quotas', place: 'Admin > Storage', terms: ['quota warning', 'storage add-on', 'trash'], role: 'admins' },
  { subject: 'workspace deletion', place: 'Admin > Danger zone', terms: ['grace period', 'confirmation phrase', 'final export'], role: 'workspace owners' },
  { subject: 'account recovery', place: 'the sign-in page', terms: ['recovery email', 'identity check', 'support ticket'], role: 'any member' },
  { subject: 'uptime and status', place: 'status page', terms: ['incident', 'maintenance window', 'SLA credit'], role: 'anyone' },
  { subject: 'time tracking', place: 'Projects > Timesheets', terms: ['timer', 'billable hours', 'approval'], role: 'members of a project' },
  { subject: 'project templates', place: 'Projects > Templates', terms: ['template gallery', 'placeholder', 'duplicate project'], role: 'editors' },
  { subject: 'automations', place: 'Projects > Automations', terms: ['rule', 'condition', 'run history'], role: 'editors' },
  { subject: 'the keyboard shortcuts', place: 'Help > Shortcuts', terms: ['command palette', 'shortcut sheet', 'remapping'], role: 'any member' },
  { subject: 'accessibility', place: 'Profile > Accessibility', terms: ['screen reader', 'high contrast', 'reduced motion'], role: 'any member' },
];

const FACETS = ['Overview', 'How to', 'Troubleshooting', 'Limits', 'FAQ'] as const;

function article(topic: Topic, facet: (typeof FACETS)[number], rand: () => number): string {
  const [a, b, c] = topic.terms;
  const n = 2 + Math.floor(rand() * 9);
  const minutes = 5 + Math.floor(rand() * 55);
  switch (facet) {
    case 'Overview':
      return (
        `${cap(topic.subject)} are managed in ${topic.place}. This article explains what ${topic.subject} cover, ` +
        `how the ${a} works and when the ${b} applies. Who can change these settings: ${topic.role}; everyone else ` +
        `sees them read-only. Changes take effect within ${minutes} minutes and are recorded in the audit log.`
      );
    case 'How to':
      return (
        `To set up ${topic.subject}, open ${topic.place} and choose Edit. Step 1: check the ${a}. Step 2: ` +
        `configure the ${b}, then confirm the ${c}. Step 3: save; a confirmation banner appears. ${cap(topic.role)} ` +
        `can undo the change for ${n} days from the same page.`
      );
    case 'Troubleshooting':
      return (
        `If ${topic.subject} do not work as expected, first check that the ${a} is enabled in ${topic.place}. ` +
        `A common cause is an outdated ${b}; refresh it and wait ${minutes} minutes. If the ${c} still fails, ` +
        `collect the request id shown in the error and contact support, who answer within ${n} business hours.`
      );
    case 'Limits':
      return (
        `Limits for ${topic.subject}: at most ${n * 10} items per workspace on the Team plan and ${n * 100} on ` +
        `Enterprise. The ${a} is capped at ${n} per minute; the ${b} is kept for ${minutes} days. Exceeding a ` +
        `limit shows a warning first; the ${c} is blocked only after a second warning.`
      );
    case 'FAQ':
      return (
        `Frequently asked questions about ${topic.subject}. Can ${topic.role} delegate this? Yes, through a custom ` +
        `role. Does the ${a} cost extra? No, it is included in every plan. What happens to the ${b} when a member ` +
        `leaves? It is transferred to the workspace owner. Where is the ${c} documented? In ${topic.place}, under Help.`
      );
  }
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** `CHAT_SOURCE_COUNT` (200) short articles: 40 topics × 5 facets. */
export function chatSources(count: number): ChatSource[] {
  const rand = prng(20_240_611);
  const out: ChatSource[] = [];
  for (let i = 0; i < count; i++) {
    const topic = TOPICS[i % TOPICS.length]!;
    const facet = FACETS[Math.floor(i / TOPICS.length) % FACETS.length]!;
    out.push({ kind: 'text', name: `${facet}: ${topic.subject}`, content: article(topic, facet, rand) });
  }
  return out;
}

const QUESTION_FORMS: ((t: Topic) => string)[] = [
  (t) => `How do I set up ${t.subject}?`,
  (t) => `Why does the ${t.terms[0]} not work for ${t.subject}?`,
  (t) => `What are the limits on ${t.subject} and the ${t.terms[1]}?`,
  (t) => `Who is allowed to change ${t.subject}, and where do I find it?`,
  (t) => `Does the ${t.terms[2]} cost extra?`,
];

/** Distinct questions (50 are sent in turn by the load generator), each about one topic of the knowledge base. */
export function chatQuestions(count = 50): string[] {
  if (count > TOPICS.length * QUESTION_FORMS.length) throw new Error(`at most ${TOPICS.length * QUESTION_FORMS.length} distinct questions`);
  return Array.from({ length: count }, (_, i) => {
    const topic = TOPICS[(i * 7) % TOPICS.length]!;
    // Each pass over the topics shifts the wording, so no question repeats.
    return QUESTION_FORMS[(i + Math.floor(i / TOPICS.length)) % QUESTION_FORMS.length]!(topic);
  });
}
