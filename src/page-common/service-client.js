// What the console and the dashboard share (README: Console, Dashboard): plain browser JavaScript,
// served to both pages by src/routes/static-page.ts and loaded before their own scripts. The
// service's REST interface with the credentials typed into the page (a GET of this origin only,
// Link headers per spec: Pagination, errors as the service tells them per spec: Errors), and the
// credential form: a key or a token, kept across reloads only when "remember in this tab" is
// ticked (sessionStorage, never localStorage). Exposed as `window.ServiceClient`.
'use strict';

(function () {
  /** Base64 of the UTF-8 bytes (btoa alone takes Latin-1 only). */
  function base64(text) {
    var bytes = new TextEncoder().encode(text);
    var binary = '';
    for (var i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
    return btoa(binary);
  }

  /** The Authorization header of a key (Basic) or a token (Bearer, base64 as the spec says). */
  function authorization(kind, value) {
    return (kind === 'token' ? 'Bearer ' : 'Basic ') + base64(value);
  }

  /** `Link` header relations (RFC 8288: `<url>; rel="next", ...`). */
  function parseLinks(header) {
    var links = {};
    if (!header) return links;
    var re = /<([^>]*)>\s*;\s*rel="?([^";,]+)"?/g;
    var m;
    while ((m = re.exec(header))) links[m[2]] = m[1];
    return links;
  }

  /** An Error carrying the service's error (spec: Errors): message, code and status. */
  function describedError(message, code, statusCode) {
    var text = message + (code ? ' (code ' + code + (statusCode ? ', status ' + statusCode : '') + ')' : statusCode ? ' (status ' + statusCode + ')' : '');
    var err = new Error(text);
    err.service = { code: code, statusCode: statusCode, message: message };
    return err;
  }

  /** The error of a refused request, from its body or, failing that, its headers. */
  function serviceError(res, body) {
    var e = body && typeof body === 'object' && body.error && typeof body.error === 'object' ? body.error : {};
    var message = typeof e.message === 'string' ? e.message : res.headers.get('X-Service-ErrorMessage') || res.statusText || 'request failed';
    var code = e.code !== undefined ? e.code : res.headers.get('X-Service-ErrorCode');
    return describedError(message, code, e.statusCode !== undefined ? e.statusCode : res.status);
  }

  /**
   * GET a path or URL of this origin with the credentials: `{ body, links, url }` on success
   * (links made absolute), a described Error otherwise (a network failure says so, it is not a
   * blank result).
   */
  async function get(pathOrUrl, auth) {
    var url = new URL(pathOrUrl, location.href);
    if (url.origin !== location.origin) throw new Error('refusing to send credentials to another origin: ' + url.origin);
    var res;
    try {
      res = await fetch(url, {
        credentials: 'omit',
        cache: 'no-store',
        headers: { Authorization: auth, Accept: 'application/json', 'X-Service-Version': '2' },
      });
    } catch (e) {
      throw new Error('Could not reach the service: ' + (e && e.message ? e.message : String(e)));
    }
    var body;
    try {
      body = await res.json();
    } catch (e) {
      body = undefined;
    }
    if (!res.ok) throw serviceError(res, body);
    var links = parseLinks(res.headers.get('Link'));
    // Link URLs are relative to the request's (spec: Pagination): made absolute here.
    Object.keys(links).forEach(function (rel) {
      links[rel] = new URL(links[rel], url).href;
    });
    return { body: body, links: links, url: url.href };
  }

  /**
   * The credential form: `kind` (a select of `key`/`token`), `credential` (the input), `remember`
   * (the checkbox), kept under `storageKey`. Keeps the storage in step with the form as it
   * changes; `restore()` fills the form from a remembered credential and says whether there was one.
   */
  function credentialForm(fields) {
    function value() {
      return fields.credential.value.trim();
    }
    function placeholder() {
      fields.credential.placeholder = fields.kind.value === 'token' ? 'token string' : 'appId.keyId:secret';
    }
    function remember() {
      try {
        if (fields.remember.checked && value() !== '') {
          sessionStorage.setItem(fields.storageKey, JSON.stringify({ kind: fields.kind.value, value: value() }));
        } else {
          sessionStorage.removeItem(fields.storageKey);
        }
      } catch (e) {
        // storage blocked: nothing is kept
      }
    }
    function restore() {
      var found = false;
      try {
        var saved = JSON.parse(sessionStorage.getItem(fields.storageKey) || 'null');
        if (saved && typeof saved.value === 'string') {
          fields.kind.value = saved.kind === 'token' ? 'token' : 'key';
          fields.credential.value = saved.value;
          fields.remember.checked = true;
          found = true;
        }
      } catch (e) {
        // nothing saved, or storage blocked
      }
      placeholder();
      return found;
    }
    fields.kind.addEventListener('change', function () {
      placeholder();
      remember();
    });
    fields.credential.addEventListener('input', remember);
    fields.remember.addEventListener('change', remember);
    return {
      value: value,
      kind: function () {
        return fields.kind.value;
      },
      /** The Authorization header of what the form holds, or undefined when it is empty. */
      authorization: function () {
        return value() === '' ? undefined : authorization(fields.kind.value, value());
      },
      remember: remember,
      restore: restore,
    };
  }

  window.ServiceClient = {
    authorization: authorization,
    parseLinks: parseLinks,
    describedError: describedError,
    serviceError: serviceError,
    get: get,
    credentialForm: credentialForm,
  };
})();
