// The stats dashboard's reading of the service (README: Dashboard): GET /time, GET /stats page by
// page (spec: Retrieve usage statistics, Pagination, Errors), interval ids and UTC times, the
// app's first stats, and CSV. Loaded after the pages' shared service-client.js (requests, Link
// headers, errors) and before dashboard.js, which reads `window.DashboardStats`.
'use strict';

(function () {
  /** "1 interval", "2 intervals". */
  function plural(n, word) {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  var UNIT_MS = { minute: 60000, hour: 3600000, day: 86400000 };

  var pad = function (n) {
    return String(n).padStart(2, '0');
  };

  /** `YYYY-MM-DDTHH:MM` in UTC, as a datetime-local input holds it. */
  function toInputValue(ms) {
    var d = new Date(ms);
    return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + 'T' + pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes());
  }

  /** A datetime-local input's value read as UTC (ms), or NaN. */
  function fromInputValue(value) {
    return value ? Date.parse(value.slice(0, 16) + ':00Z') : NaN;
  }

  function utcText(ms) {
    return toInputValue(ms).replace('T', ' ');
  }

  /** The service's clock (GET /time, no credentials), so ranges agree with the stats' times. */
  function serviceNow() {
    return fetch('/time', { credentials: 'omit', cache: 'no-store', headers: { Accept: 'application/json' } })
      .then(function (res) {
        return res.ok ? res.json() : Promise.reject(new Error('GET /time answered ' + res.status));
      })
      .then(function (body) {
        return Array.isArray(body) && typeof body[0] === 'number' ? body[0] : Date.now();
      })
      .catch(function () {
        return Date.now();
      });
  }

  /**
   * The start of the app's oldest stats (ms), or undefined if it has none: the first month with
   * data, then the first day of it, its first hour and minute (four pages of one record, each
   * bounded by the bucket above it, so none reads more than one bucket's rows).
   */
  async function firstData(auth, now) {
    var start = 0;
    var end = now;
    var units = ['month', 'day', 'hour', 'minute'];
    for (var i = 0; i < units.length; i++) {
      var page = await fetchPage(new URL('/stats?' + new URLSearchParams({ unit: units[i], start: String(start), end: String(end), direction: 'forwards', limit: '1' }).toString(), location.href), auth);
      var t = page.records.length ? parseIntervalId(page.records[0].intervalId) : NaN;
      if (Number.isNaN(t)) return undefined;
      start = t;
      end = Math.min(now, nextBucket(t, units[i]) - 1);
    }
    return start;
  }

  /** The unit that draws a span as a line of a few hundred points at most. */
  function unitFor(span) {
    if (span <= 6 * UNIT_MS.hour) return 'minute';
    if (span <= 31 * UNIT_MS.day) return 'hour';
    if (span <= 3 * 366 * UNIT_MS.day) return 'day';
    return 'month';
  }

  function bucketStart(ms, unit) {
    if (unit === 'month') {
      var d = new Date(ms);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    }
    return ms - (((ms % UNIT_MS[unit]) + UNIT_MS[unit]) % UNIT_MS[unit]);
  }

  function nextBucket(ms, unit) {
    if (unit === 'month') {
      var d = new Date(ms);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    }
    return ms + UNIT_MS[unit];
  }

  /** An interval id (yyyy-mm-dd:hh:mm, yyyy-mm-dd:hh, yyyy-mm-dd, yyyy-mm) as UTC ms. */
  function parseIntervalId(id) {
    var m = /^(\d{4})-(\d{2})(?:-(\d{2})(?::(\d{2})(?::(\d{2}))?)?)?/.exec(String(id));
    if (!m) return NaN;
    return Date.UTC(+m[1], +m[2] - 1, m[3] ? +m[3] : 1, m[4] ? +m[4] : 0, m[5] ? +m[5] : 0);
  }

  /** One page of `GET /stats`: its records and the URL of the next page, if any. */
  async function fetchPage(url, auth) {
    var page = await window.ServiceClient.get(url, auth);
    if (!Array.isArray(page.body)) throw new Error('GET /stats did not answer with an array of stats records');
    return { records: page.body, next: page.links.next ? new URL(page.links.next) : null };
  }

  /** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
  function csvField(v) {
    var text = String(v);
    return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  function csvOf(rows) {
    return rows
      .map(function (row) {
        return row.map(csvField).join(',');
      })
      .join('\r\n') + '\r\n';
  }

  window.DashboardStats = {
    plural: plural,
    UNIT_MS: UNIT_MS,
    toInputValue: toInputValue,
    fromInputValue: fromInputValue,
    utcText: utcText,
    serviceNow: serviceNow,
    firstData: firstData,
    unitFor: unitFor,
    bucketStart: bucketStart,
    nextBucket: nextBucket,
    parseIntervalId: parseIntervalId,
    fetchPage: fetchPage,
    csvOf: csvOf,
  };
})();
