// The developer console's REST side (README: Console): plain browser JavaScript, loaded by
// /console before console.js. It calls the service's public REST interface with the credentials
// typed into the page (`GET /channels`, `GET /channels/<id>`, `GET /channels/<id>/messages`)
// and formats what the pages show (times, data).
// It holds no page state: console.js does. The requests themselves, Link headers and errors are
// src/page-common/service-client.js's (`window.ServiceClient`). Exposed as `window.ConsoleRest`.
'use strict';

(function () {
  var get = window.ServiceClient.get;

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
    listChannels: listChannels,
    channelStatus: channelStatus,
    history: history,
    toInputValue: toInputValue,
    fromInputValue: fromInputValue,
    timeText: timeText,
    dataText: dataText,
  };
})();
