import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { operatorKey, rememberOperatorKey, whenUnauthenticated } from './api.js';
import { Bulk } from './bulk.js';
import { Dashboard } from './dashboard.js';
import { DeadLetters } from './deadLetters.js';
import { feed, type LiveStatus } from './live.js';
import { OrderList } from './orderList.js';
import { OrderPage } from './orderPage.js';
import { RetentionScreen } from './retention.js';
import { ServiceLimitsScreen } from './serviceLimits.js';
import { SignIn } from './signIn.js';
import { html } from './ui.js';

/** `#/path?query`: the screen and its parameters, kept in the address so links and Back work. */
function route(): { path: string; query: URLSearchParams } {
  const raw = window.location.hash.replace(/^#/, '') || '/';
  const [path, query] = raw.split('?', 2) as [string, string | undefined];
  return { path, query: new URLSearchParams(query ?? '') };
}

function Screen({ path, query }: { path: string; query: URLSearchParams }) {
  const order = /^\/orders\/([0-9a-f-]{36})$/.exec(path);
  if (order) return html`<${OrderPage} orderId=${order[1]} />`;
  if (path === '/orders') return html`<${OrderList} query=${query} />`;
  if (path === '/bulk') return html`<${Bulk} />`;
  if (path === '/deadletters') return html`<${DeadLetters} query=${query} />`;
  if (path === '/services') return html`<${ServiceLimitsScreen} />`;
  if (path === '/retention') return html`<${RetentionScreen} />`;
  return html`<${Dashboard} />`;
}

const nav = [
  ['/', 'Dashboard'],
  ['/orders', 'Orders'],
  ['/bulk', 'Bulk actions'],
  ['/deadletters', 'Dead letters'],
  ['/services', 'Service limits'],
  ['/retention', 'Retention'],
] as const;

function Console({ onSignOut }: { onSignOut?: () => void }) {
  const [where, setWhere] = useState(route());
  const [live, setLive] = useState<LiveStatus>(feed.status);
  useEffect(() => {
    const onHash = () => setWhere(route());
    window.addEventListener('hashchange', onHash);
    const off = feed.onStatus(setLive);
    feed.start();
    return () => {
      window.removeEventListener('hashchange', onHash);
      off();
      feed.stop();
    };
  }, []);
  const current = where.path.startsWith('/orders') ? '/orders' : where.path;
  return html`<div class="shell">
    <a class="skip" href="#content">Skip to content</a>
    <header>
      <span class="brand">Order processing</span>
      <nav aria-label="Console">
        <ul>
          ${nav.map(
            ([path, label]) =>
              html`<li>
                <a href=${`#${path}`} aria-current=${current === path ? 'page' : undefined}>${label}</a>
              </li>`,
          )}
        </ul>
      </nav>
      <span id="live-status" class=${`live ${live}`} role="status">Updates: ${live}</span>
      ${onSignOut ? html`<button type="button" onClick=${onSignOut}>Sign out</button>` : null}
    </header>
    <div id="content" tabindex="-1">
      <${Screen} key=${where.path} path=${where.path} query=${where.query} />
    </div>
  </div>`;
}

function App() {
  const mode = document.body.dataset.mode ?? 'key';
  // The page came as 200: the platform (or a bearer header) vouched for the operator already.
  const [signedIn, setSignedIn] = useState(mode === 'console' || operatorKey() !== null);
  const [notice, setNotice] = useState<string | undefined>();
  useEffect(() => {
    whenUnauthenticated(() => {
      rememberOperatorKey(null);
      setNotice('Your sign-in is no longer accepted; sign in again.');
      setSignedIn(false);
    });
  }, []);
  if (!signedIn) {
    return html`<${SignIn}
      mode=${mode === 'console' ? 'key' : mode}
      notice=${notice}
      onSignedIn=${() => setSignedIn(true)}
    />`;
  }
  const signOut =
    operatorKey() !== null
      ? () => {
          rememberOperatorKey(null);
          setSignedIn(false);
        }
      : undefined;
  return html`<${Console} onSignOut=${signOut} />`;
}

render(html`<${App} />`, document.getElementById('app')!);
