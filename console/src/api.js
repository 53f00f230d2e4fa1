// The console API client: same-origin fetch with the session cookie, the CSRF token on every
// state-changing request, and the server's JSON errors turned into ApiError.

const CSRF_KEY = 'expanse.csrf';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function haveCsrfToken() {
  return sessionStorage.getItem(CSRF_KEY) !== null;
}

// A read the server could not start because it was running as many large queries as it runs at
// once (503 queries_busy) is asked again after its Retry-After, a few times: a job page asks for
// several at once.
const BUSY_RETRIES = 5;

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function request(method, path, body) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await requestOnce(method, path, body);
    } catch (e) {
      if (!(e instanceof ApiError) || e.code !== 'queries_busy' || method !== 'GET' ||
          attempt >= BUSY_RETRIES) {
        throw e;
      }
      await sleep(Math.min(e.retryAfterSeconds || 1, 5) * 1000);
    }
  }
}

async function requestOnce(method, path, body) {
  const headers = {Accept: 'application/json'};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET') headers['X-CSRF-Token'] = sessionStorage.getItem(CSRF_KEY) || '';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'network', `The server did not answer (${e.message}).`);
  }
  let data = null;
  const text = await response.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      throw new ApiError(response.status, 'bad_response', `The server sent a non-JSON answer (HTTP ${response.status}).`);
    }
  }
  if (!response.ok) {
    const err = (data && data.error) || {};
    const error = new ApiError(response.status, err.code || 'http_' + response.status,
                               err.message || `HTTP ${response.status}`);
    error.retryAfterSeconds = Number(response.headers.get('Retry-After')) || 0;
    throw error;
  }
  return data;
}

export const api = {
  get: (path) => request('GET', path),
  post: (path, body = {}) => request('POST', path, body),
  patch: (path, body) => request('PATCH', path, body),
  del: (path) => request('DELETE', path),

  async signIn(email, password) {
    const r = await request('POST', '/api/v1/session', {email, password});
    sessionStorage.setItem(CSRF_KEY, r.csrf_token);
    return r;
  },
  async signOut() {
    try {
      await request('DELETE', '/api/v1/session');
    } finally {
      sessionStorage.removeItem(CSRF_KEY);
    }
  },
  forgetSession() {
    sessionStorage.removeItem(CSRF_KEY);
  },
};

// Path segments are always encoded, so an id can never change the route it is sent to.
export function path(strings, ...values) {
  return strings.reduce((out, s, i) => out + s + (i < values.length ? encodeURIComponent(values[i]) : ''), '');
}
