// The developer console's REST side (README: Console): plain browser JavaScript, loaded by
// /console before console.js. It calls the service's public REST interface with the credentials
// typed into the page (`GET /channels`, `GET /channels/<id>`, `GET /channels/<id>/messages`),
// follows Link headers (spec: Pagination) and tells errors as the service does (spec: Errors).
// It holds no page state: console.js does. Exposed as `window.ConsoleRest`.
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
   * GET a path or URL of this origin with the credentials: `{ body, links, url }` on success,
   * a described Error otherwise (a network failure says so, it is not a blank result).
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
      throw new Error('the service did not answer (' + (e && e.message ? e.message : String(e)) + ')');
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

  var channelPath = function (name) {
    return '/channels/' + encodeURIComponent(name);
  };

  /** spec: Channel enumeration, with each channel's details (occupancy). */
  function listChannels(auth, prefix, limit) {
    var q = new URLSearchParams({ by: 'value', limit: String(limit || 100) });
    if (prefix) q.set('prefix', prefix);
    return get('/channels?' + q.toString(), auth);
  }

  /** spec: Channel status. */
  function channelStatus(auth, name) {
    return get(channelPath(name), auth);
  }

  /** spec: Message history, newest first; start and end in ms or undefined. */
  function history(auth, name, range) {
    var q = new URLSearchParams({ direction: 'backwards', limit: String(range.limit) });
    if (range.start !== undefined) q.set('start', String(range.start));
    if (range.end !== undefined) q.set('end', String(range.end));
    return get(channelPath(name) + '/messages?' + q.toString(), auth);
  }

  // --- formatting shared by the live log, presence and history -------------------------------

  var pad = function (n, w) {
    return String(n).padStart(w || 2, '0');
  };
  /** `YYYY-MM-DDTHH:MM:SS` in UTC, as a datetime-local input with seconds holds it. */
  function toInputValue(ms) {
    var d = new Date(ms);
    return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + 'T' + pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds());
  }
  /** A datetime-local value read as UTC (ms), or undefined when empty or malformed. */
  function fromInputValue(value) {
    if (!value) return undefined;
    var ms = Date.parse((value.length === 16 ? value + ':00' : value.slice(0, 19)) + 'Z');
    return Number.isFinite(ms) ? ms : undefined;
  }
  /** `YYYY-MM-DD HH:MM:SS.mmm` (UTC). */
  function timeText(ms) {
    if (typeof ms !== 'number') return '';
    return toInputValue(ms).replace('T', ' ') + '.' + pad(new Date(ms).getUTCMilliseconds(), 3);
  }

  /** Shown at most, per value: the rest is cut, with the full size said. */
  var MAX_TEXT = 2000;

  /**
   * A message's or member's data as text: strings as they are, JSON as JSON, binary as its size
   * and base64. REST bodies may still carry an `encoding` (base64 for binary): said beside it.
   */
  function dataText(data, encoding) {
    var text;
    if (data === undefined || data === null) text = '';
    else if (typeof data === 'string') text = data;
    else if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
      var bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      var binary = '';
      for (var i = 0; i < Math.min(bytes.length, MAX_TEXT); i++) binary += String.fromCharCode(bytes[i]);
      text = '(binary, ' + bytes.length + ' bytes) ' + btoa(binary);
    } else {
      try {
        text = JSON.stringify(data);
      } catch (e) {
        text = String(data);
      }
    }
    if (encoding) text += '  [encoding: ' + encoding + ']';
    return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) + '… (' + text.length + ' characters)' : text;
  }

  window.ConsoleRest = {
    authorization: authorization,
    describedError: describedError,
    listChannels: listChannels,
    channelStatus: channelStatus,
    history: history,
    get: get,
    toInputValue: toInputValue,
    fromInputValue: fromInputValue,
    timeText: timeText,
    dataText: dataText,
  };
})();
