// Sign-in: email and password to POST /api/v1/session (which sets the HttpOnly cookie and
// returns the CSRF token for later requests).
import {api} from '../api.js';
import {go, session} from '../app.js';
import {errorBox, h, page} from '../dom.js';

export function render() {
  const email = h('input', {id: 'signin-email', type: 'email', name: 'email', autocomplete: 'username', required: true});
  const password = h('input', {id: 'signin-password', type: 'password', name: 'password', autocomplete: 'current-password', required: true});
  const status = h('div', {'aria-live': 'polite'});
  const submit = h('button', {type: 'submit'}, 'Sign in');
  const form = h('form', {class: 'card narrow', 'aria-label': 'Sign in'},
    h('label', {for: 'signin-email'}, 'Email'), email,
    h('label', {for: 'signin-password'}, 'Password'), password,
    submit, status);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    status.replaceChildren();
    try {
      await api.signIn(email.value.trim(), password.value);
      session.me = null;  // reloaded by the router with the new session
      go('#/');
    } catch (err) {
      status.replaceChildren(errorBox(err.code === 'login_failed'
        ? {code: '', message: 'Wrong email or password.'} : err));
      submit.disabled = false;
      password.select();
    }
  });
  page('Sign in to Expanse', form);
  email.focus();
}
