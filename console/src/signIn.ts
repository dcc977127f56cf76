import { useState } from 'preact/hooks';
import { apiUrl, rememberOperatorKey } from './api.js';
import { html } from './ui.js';

/**
 * Locally a browser cannot put `Authorization: Bearer` on a navigation, so the refused page asks
 * for the operator key `npm start` printed, checks it against the guarded page itself, and keeps
 * it in this tab's sessionStorage (gone when the tab closes) for the console's fetch calls.
 */
export function SignIn({
  mode,
  notice,
  onSignedIn,
}: {
  mode: string;
  notice?: string;
  onSignedIn: () => void;
}) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(notice ?? '');
  if (mode === 'entra') {
    const login = new URL('/.auth/login/aad', window.location.href);
    login.searchParams.set('post_login_redirect_uri', window.location.pathname);
    return html`<section class="sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Operator sign-in required</h1>
      <p>The console is for operators: accounts holding the Operator app role.</p>
      <p><a class="button" href=${login.toString()}>Sign in with Microsoft Entra ID</a></p>
    </section>`;
  }
  const submit = async (e: Event) => {
    e.preventDefault();
    const value = key.trim();
    if (!value) {
      setError('Enter the operator key.');
      return;
    }
    const answer = await fetch(apiUrl('console'), {
      headers: { Authorization: `Bearer ${value}`, Accept: 'text/html' },
      cache: 'no-store',
    });
    await answer.body?.cancel();
    if (answer.status === 200) {
      rememberOperatorKey(value);
      onSignedIn();
    } else {
      setError(`The key was refused (${answer.status}). Use the operator key npm start printed.`);
    }
  };
  return html`<section class="sign-in" aria-labelledby="sign-in-title">
    <h1 id="sign-in-title">Operator sign-in required</h1>
    <p>
      Enter the operator key that <code>npm start</code> printed ("operator key"). It stays in this browser
      tab only.
    </p>
    <form onSubmit=${submit}>
      <label for="operator-key">Operator key</label>
      <input
        id="operator-key"
        name="operatorKey"
        type="password"
        autocomplete="off"
        value=${key}
        onInput=${(e: Event) => setKey((e.target as HTMLInputElement).value)}
        aria-describedby="sign-in-error"
        autofocus
      />
      <button type="submit">Sign in</button>
      <p id="sign-in-error" class="error" role="alert">${error}</p>
    </form>
  </section>`;
}
