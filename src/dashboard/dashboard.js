// The stats dashboard (README: Dashboard). Plain browser JavaScript, loaded by /dashboard after
// uPlot. It reads GET /stats (spec: Retrieve usage statistics) with the credentials typed into
// the page, follows the `next` Link headers to get the whole range, and draws one chart per group
// of counters, with the totals of the range in a table (each cell carries its stats field and
// value as data attributes).
'use strict';

(function () {
  /** Pages of `GET /stats` one load follows at most (a page holds up to `limit` intervals). */
  var MAX_PAGES = 200;
  /** Intervals without data are drawn as zeros while the range has at most this many intervals. */
  var MAX_FILLED = 200000;
  var STORAGE_KEY = 'channel-messaging.dashboard.credential';

  var FIGURES = window.DASHBOARD_FIGURES;
  var CHARTS = FIGURES.charts;
  var max = 'max';
  /** Auto-refresh choices (seconds); the stats advance in 6-second samples. */
  var REFRESH_DEFAULT = 30;

  /** A series' value in one record: its stats field, or what it is derived from. */
  function valueOf(record, s) {
    var e = record && record.entries;
    if (s.derive) return s.derive(e || {});
    return e && typeof e[s.field] === 'number' ? e[s.field] : 0;
  }
  /** "1 interval", "2 intervals". */
  function plural(n, word) {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  var UNIT_MS = { minute: 60000, hour: 3600000, day: 86400000 };

  var $ = function (id) {
    return document.getElementById(id);
  };
  var form = $('query');
  var kindInput = $('auth-kind');
  var credentialInput = $('credential');
  var rememberInput = $('remember');
  var presetInput = $('preset');
  var startInput = $('start');
  var endInput = $('end');
  var unitInput = $('unit');
  var loadButton = $('load');
  var statusEl = $('status');
  var errorEl = $('error');
  var chartsEl = $('charts');
  var totalsSection = $('totals-section');
  var totalsBody = $('totals').querySelector('tbody');
  var refreshInput = $('refresh');
  var csvButton = $('csv');

  $('intro').textContent = FIGURES.intro;

  var plots = [];
  var loading = 0;

  // --- formatting ---------------------------------------------------------------------------

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
  var numberFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 3 });
  function formatValue(format, v) {
    if (v === null || v === undefined) return '–';
    if (format !== 'bytes') return numberFormat.format(v);
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? numberFormat.format(v) : v.toFixed(1)) + ' ' + units[i];
  }

  // --- state shown to the user --------------------------------------------------------------

  function setStatus(state, text) {
    statusEl.dataset.state = state;
    statusEl.textContent = text;
  }
  function showError(message) {
    errorEl.hidden = message === '';
    errorEl.textContent = message;
  }

  // --- credentials --------------------------------------------------------------------------

  /** Base64 of the UTF-8 bytes (btoa alone takes Latin-1 only). */
  function base64(text) {
    var bytes = new TextEncoder().encode(text);
    var binary = '';
    for (var i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
    return btoa(binary);
  }
  function authorization() {
    var value = credentialInput.value.trim();
    if (value === '') return undefined;
    return (kindInput.value === 'token' ? 'Bearer ' : 'Basic ') + base64(value);
  }
  function remember() {
    try {
      if (rememberInput.checked && credentialInput.value.trim() !== '') {
        sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ kind: kindInput.value, value: credentialInput.value.trim() }));
      } else {
        sessionStorage.removeItem(STORAGE_KEY);
      }
    } catch (e) {
      // storage blocked: nothing is kept
    }
  }
  function restore() {
    try {
      var saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || 'null');
      if (saved && typeof saved.value === 'string') {
        kindInput.value = saved.kind === 'token' ? 'token' : 'key';
        credentialInput.value = saved.value;
        rememberInput.checked = true;
      }
    } catch (e) {
      // nothing saved, or storage blocked
    }
    placeholder();
  }
  function placeholder() {
    credentialInput.placeholder = kindInput.value === 'token' ? 'token string' : 'appId.keyId:secret';
  }

  // --- time range ---------------------------------------------------------------------------

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
  /** The preset chosen, as its option says: a span (ms) and unit, or the app's data (`data`). */
  function preset() {
    var option = presetInput.selectedOptions[0];
    return { name: presetInput.value, span: Number(option.dataset.span), unit: option.dataset.unit };
  }
  /** Fills the range inputs from a preset with a fixed span, ending now (service time). */
  function applyPreset() {
    var p = preset();
    if (p.name === 'custom' || p.name === 'data') return Promise.resolve();
    if (p.unit) unitInput.value = p.unit;
    return serviceNow().then(function (now) {
      // The user may have picked another preset, or typed a range, while the time was asked.
      if (presetInput.value !== p.name) return now;
      endInput.value = toInputValue(now);
      startInput.value = toInputValue(now - p.span);
      return now;
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

  /**
   * The range to show: the inputs for a custom range; else ending now (service time), from the
   * preset's span, or for `data` from the app's first stats (a new app fills the chart instead of
   * being a dot at the right edge of a day). An app without stats gets the last hour.
   */
  async function resolveRange(auth) {
    var p = preset();
    if (p.name !== 'custom') {
      var now = await serviceNow();
      var from;
      if (p.name === 'data') {
        var first = await firstData(auth, now);
        from = first === undefined ? now - UNIT_MS.hour : Math.min(first, now - UNIT_MS.minute);
        unitInput.value = unitFor(now - from);
      } else {
        from = now - p.span;
        if (p.unit) unitInput.value = p.unit;
      }
      startInput.value = toInputValue(from);
      endInput.value = toInputValue(now);
    }
    var start = fromInputValue(startInput.value);
    var to = fromInputValue(endInput.value);
    if (Number.isNaN(start) || Number.isNaN(to)) throw new Error('Give both ends of the range.');
    // "To" names a whole minute: the range ends at that minute's last millisecond.
    var end = to + 59999;
    if (start > end) throw new Error('The range starts after it ends.');
    return { start: start, to: to, end: end, unit: unitInput.value };
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

  // --- GET /stats, every page ---------------------------------------------------------------

  /** `Link` header relations (RFC 5988: `<url>; rel="next", ...`). */
  function parseLinks(header) {
    var links = {};
    if (!header) return links;
    var re = /<([^>]*)>\s*;\s*rel="?([^";,]+)"?/g;
    var m;
    while ((m = re.exec(header))) links[m[2]] = m[1];
    return links;
  }

  /** An error as the service tells it (spec: Errors), from its body or its headers. */
  function serviceError(res, body) {
    var e = body && typeof body === 'object' && body.error && typeof body.error === 'object' ? body.error : {};
    var message = typeof e.message === 'string' ? e.message : res.headers.get('X-Service-ErrorMessage') || res.statusText || 'request failed';
    var code = e.code !== undefined ? e.code : res.headers.get('X-Service-ErrorCode');
    var status = e.statusCode !== undefined ? e.statusCode : res.status;
    var err = new Error(message + (code ? ' (code ' + code + ', status ' + status + ')' : ' (status ' + status + ')'));
    err.service = { code: code, statusCode: status, message: message };
    return err;
  }

  /** One page of `GET /stats`: its records and the URL of the next page, if any. */
  async function fetchPage(url, auth) {
    var res = await fetch(url, {
      credentials: 'omit',
      cache: 'no-store',
      headers: { Authorization: auth, Accept: 'application/json', 'X-Service-Version': '2' },
    });
    var body;
    try {
      body = await res.json();
    } catch (e) {
      body = undefined;
    }
    if (!res.ok) throw serviceError(res, body);
    if (!Array.isArray(body)) throw new Error('GET /stats did not answer with an array of stats records');
    var next = parseLinks(res.headers.get('Link')).next;
    return { records: body, next: next ? new URL(next, url) : null };
  }

  /** Every record of the range, oldest first, following `next` links (spec: Pagination). */
  async function fetchAll(query, auth, quiet) {
    var url = new URL('/stats?' + new URLSearchParams(query).toString(), location.href);
    var records = [];
    var pages = 0;
    while (url) {
      if (pages >= MAX_PAGES) return { records: records, pages: pages, truncated: true };
      if (!quiet) setStatus('loading', 'Loading page ' + (pages + 1) + '… (' + plural(records.length, 'interval') + ' so far)');
      var page = await fetchPage(url, auth);
      pages++;
      for (var i = 0; i < page.records.length; i++) records.push(page.records[i]);
      url = page.next;
    }
    return { records: records, pages: pages, truncated: false };
  }

  // --- totals and charts --------------------------------------------------------------------

  function totalsOf(records) {
    var totals = {};
    CHARTS.forEach(function (chart) {
      chart.series.forEach(function (s) {
        if (!s.how) return;
        var total = 0;
        records.forEach(function (r) {
          var v = valueOf(r, s);
          total = s.how === max ? Math.max(total, v) : total + v;
        });
        totals[s.field] = total;
      });
    });
    return totals;
  }

  /** The table's rows as shown (header first), values as numbers: what the CSV export holds. */
  var tableRows = [];

  function renderTotals(totals) {
    totalsBody.textContent = '';
    tableRows = [['chart', 'series', 'what it counts', 'stats field', 'how', 'value']];
    CHARTS.forEach(function (chart) {
      chart.series
        .filter(function (s) {
          return s.how;
        })
        .forEach(function (s, i) {
          var tr = document.createElement('tr');
          var field = s.derive ? 'derived: ' + s.field.replace(/^derived\./, '') : s.field;
          var cells = [i === 0 ? chart.title : '', s.label, s.def, field, s.how === max ? 'highest' : 'total'];
          cells.forEach(function (text, j) {
            var td = document.createElement('td');
            td.textContent = text;
            if (j === 2) td.className = 'def';
            if (j === 3) td.className = 'field';
            tr.appendChild(td);
          });
          var value = document.createElement('td');
          value.className = 'num';
          value.dataset.field = s.field;
          value.dataset.value = String(totals[s.field]);
          value.textContent = formatValue(chart.format, totals[s.field]);
          tr.appendChild(value);
          totalsBody.appendChild(tr);
          tableRows.push([chart.title, s.label, s.def, field, s.how === max ? 'highest' : 'total', totals[s.field]]);
        });
    });
    totalsSection.hidden = false;
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
  /** Saves the shown table as a CSV file (a download of a blob made in the page: nothing is sent). */
  function exportCsv() {
    if (!shown) return;
    var blob = new Blob([csvOf(tableRows)], { type: 'text/csv;charset=utf-8' });
    var link = document.createElement('a');
    link.href = URL.createObjectURL(blob);
    link.download = 'stats-' + toInputValue(shown.start).replace(':', '') + '-' + toInputValue(shown.to).replace(':', '') + '-' + shown.unit + '.csv';
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () {
      URL.revokeObjectURL(link.href);
    }, 10000);
  }

  /** x (seconds, as uPlot takes them) and one array per field, zeros where an interval had no data. */
  function columns(records, unit, start, end) {
    var byStart = new Map();
    records.forEach(function (r) {
      var t = parseIntervalId(r.intervalId);
      if (!Number.isNaN(t)) byStart.set(t, r);
    });
    var xs = [];
    var first = bucketStart(start, unit);
    var last = bucketStart(end, unit);
    var count = unit === 'month' ? 0 : Math.floor((last - first) / UNIT_MS[unit]) + 1;
    if (unit === 'month' || count <= MAX_FILLED) {
      for (var t = first; t <= last; t = nextBucket(t, unit)) xs.push(t);
      byStart.forEach(function (_r, t2) {
        if (t2 < first || t2 > last) xs.push(t2);
      });
    } else {
      xs = Array.from(byStart.keys());
    }
    xs.sort(function (a, b) {
      return a - b;
    });
    var data = { x: xs.map(function (t3) { return t3 / 1000; }) };
    CHARTS.forEach(function (chart) {
      chart.series.forEach(function (s) {
        data[s.field] = xs.map(function (t4) {
          var r = byStart.get(t4);
          return r ? valueOf(r, s) : 0;
        });
      });
    });
    return data;
  }

  /** The width of a chart's grid cell. */
  function chartWidth(box) {
    return Math.max(300, (box.clientWidth || 560) - 2);
  }

  function destroyPlots() {
    plots.forEach(function (p) {
      p.destroy();
    });
    plots = [];
    plotted = null;
    chartsEl.textContent = '';
  }

  /** The series a chart draws (some, like `persisted`, are in the table only). */
  function drawn(chart) {
    return chart.series.filter(function (s) {
      return s.chart !== false;
    });
  }
  function chartColumns(chart, data) {
    return [data.x].concat(
      drawn(chart).map(function (s) {
        return data[s.field];
      }),
    );
  }

  /** The unit the charts are drawn per, while they are. */
  var plotted = null;

  function renderCharts(data, unit) {
    if (plotted === unit && plots.length === CHARTS.length) {
      // A refresh: new data in the same charts (the cursor and the page stay where they are).
      CHARTS.forEach(function (chart, i) {
        plots[i].setData(chartColumns(chart, data));
      });
      return;
    }
    destroyPlots();
    plotted = unit;
    var utc = function (ts) {
      return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC');
    };
    var timeLabel = { minute: '{YYYY}-{MM}-{DD} {HH}:{mm}', hour: '{YYYY}-{MM}-{DD} {HH}:00', day: '{YYYY}-{MM}-{DD}', month: '{YYYY}-{MM}' }[unit];
    var timeFormat = uPlot.fmtDate(timeLabel);
    var tickFormats = { time: uPlot.fmtDate('{HH}:{mm}'), dayTime: uPlot.fmtDate('{MM}-{DD} {HH}:{mm}'), day: uPlot.fmtDate('{YYYY}-{MM}-{DD}'), month: uPlot.fmtDate('{YYYY}-{MM}') };
    /** 24-hour UTC tick labels; the date where it changes, as the hover legend shows it. */
    var timeTicks = function (_u, splits) {
      var step = splits.length > 1 ? splits[1] - splits[0] : 86400;
      var lastDay = '';
      return splits.map(function (s) {
        var d = utc(s);
        if (step >= 28 * 86400) return tickFormats.month(d);
        if (step >= 86400) return tickFormats.day(d);
        var day = tickFormats.day(d);
        var label = day !== lastDay ? tickFormats.dayTime(d) : tickFormats.time(d);
        lastDay = day;
        return label;
      });
    };
    CHARTS.forEach(function (chart) {
      var outer = document.createElement('div');
      outer.className = 'chart';
      outer.id = 'chart-' + chart.id;
      var box = document.createElement('div');
      var note = document.createElement('p');
      note.className = 'note';
      note.textContent = chart.note;
      outer.appendChild(box);
      outer.appendChild(note);
      chartsEl.appendChild(outer);
      /** Without a cursor on the chart, the legend shows the newest interval (never a blank "–"). */
      var newest = function (u, v, sidx, idx) {
        if (idx !== null && idx !== undefined) return v;
        var xs = u.data[0];
        return xs.length ? u.data[sidx][xs.length - 1] : null;
      };
      var opts = {
        title: chart.title + ' per ' + unit,
        width: chartWidth(box),
        height: 220,
        tzDate: utc,
        cursor: { sync: { key: 'stats' }, points: { size: 7 } },
        legend: { live: true },
        scales: { x: { time: true }, y: { range: function (_u, _min, dataMax) { return [0, dataMax > 0 ? dataMax * 1.1 : 1]; } } },
        series: [
          {
            label: 'UTC',
            value: function (u, v, sidx, idx) {
              var t = newest(u, v, sidx, idx);
              if (t === null || t === undefined) return '–';
              return (idx === null || idx === undefined ? 'newest ' : '') + timeFormat(utc(t));
            },
          },
        ].concat(
          drawn(chart).map(function (s) {
            return {
              label: s.label,
              stroke: s.color,
              width: 2,
              points: { show: data.x.length <= 120 },
              value: function (u, v, sidx, idx) {
                return formatValue(chart.format, newest(u, v, sidx, idx));
              },
            };
          }),
        ),
        axes: [
          { stroke: '#444', grid: { stroke: '#e5e5e5' }, values: timeTicks },
          {
            stroke: '#444',
            grid: { stroke: '#e5e5e5' },
            size: 70,
            values: function (_u, vals) {
              return vals.map(function (v) {
                return formatValue(chart.format, v);
              });
            },
          },
        ],
      };
      plots.push(new uPlot(opts, chartColumns(chart, data), box));
    });
  }

  // --- one load -----------------------------------------------------------------------------

  /** The range on show (for the CSV's name), once a load has succeeded. */
  var shown = null;
  var refreshTimer;
  var loads = 0;

  /** Keeps what is shown in the page's URL (replacing the entry: a reload or a link shows the same). */
  function writeUrl() {
    var params = new URLSearchParams(location.search);
    ['range', 'start', 'end', 'unit', 'refresh'].forEach(function (k) {
      params.delete(k);
    });
    if (presetInput.value === 'custom') {
      params.set('start', startInput.value);
      params.set('end', endInput.value);
      params.set('unit', unitInput.value);
    } else {
      params.set('range', presetInput.value);
    }
    params.set('refresh', refreshInput.value);
    history.replaceState(null, '', location.pathname + '?' + params.toString());
  }
  /** The range and refresh the URL names, where they are valid; the defaults otherwise. */
  function readUrl() {
    var params = new URLSearchParams(location.search);
    var has = function (select, value) {
      return Array.prototype.some.call(select.options, function (o) {
        return o.value === value;
      });
    };
    var range = params.get('range');
    var start = params.get('start');
    var end = params.get('end');
    if (start && end && !Number.isNaN(fromInputValue(start)) && !Number.isNaN(fromInputValue(end))) {
      presetInput.value = 'custom';
      startInput.value = toInputValue(fromInputValue(start));
      endInput.value = toInputValue(fromInputValue(end));
      if (has(unitInput, params.get('unit'))) unitInput.value = params.get('unit');
    } else if (range && range !== 'custom' && has(presetInput, range)) {
      presetInput.value = range;
    }
    var refresh = params.get('refresh');
    if (refresh !== null && has(refreshInput, refresh)) refreshInput.value = refresh;
  }

  /** The next refresh, if one is chosen and the last load succeeded (a hidden tab waits for its turn). */
  function scheduleRefresh() {
    clearTimeout(refreshTimer);
    var seconds = Number(refreshInput.value);
    if (!seconds || !shown) return;
    refreshTimer = setTimeout(function () {
      if (document.hidden || loadButton.disabled) scheduleRefresh();
      else load(true);
    }, seconds * 1000);
  }

  /** Shows the range's stats; `quiet` for a refresh (no "loading" line, the charts kept). */
  async function load(quiet) {
    var auth = authorization();
    if (!quiet) showError('');
    if (!auth) {
      setStatus('error', 'Enter a key or token first.');
      showError('No credentials: enter an API key (appId.keyId:secret) or a token.');
      return;
    }
    remember();
    var mine = ++loading;
    loadButton.disabled = true;
    clearTimeout(refreshTimer);
    try {
      if (!quiet) setStatus('loading', 'Finding the range…');
      var range = await resolveRange(auth);
      writeUrl();
      var unit = range.unit;
      var limit = Number(new URLSearchParams(location.search).get('limit')) || 1000;
      var query = { unit: unit, start: String(range.start), end: String(range.end), direction: 'forwards', limit: String(Math.max(1, Math.min(1000, limit))) };
      var result = await fetchAll(query, auth, quiet);
      if (mine !== loading) return;
      var records = result.records;
      renderTotals(totalsOf(records));
      shown = range;
      showError('');
      var text = utcText(range.start) + ' to ' + utcText(range.to) + ' UTC';
      statusEl.dataset.pages = String(result.pages);
      statusEl.dataset.intervals = String(records.length);
      statusEl.dataset.start = String(range.start);
      statusEl.dataset.end = String(range.end);
      statusEl.dataset.unit = unit;
      statusEl.dataset.loads = String(++loads);
      var refreshed = Number(refreshInput.value) ? ' Refreshed every ' + refreshInput.selectedOptions[0].textContent + '.' : '';
      if (records.length === 0) {
        destroyPlots();
        var empty = document.createElement('p');
        empty.className = 'empty';
        empty.id = 'empty';
        empty.textContent = 'No stats in this range (' + text + '). Usage is counted in 6-second samples, so the last seconds may not show yet.';
        chartsEl.appendChild(empty);
        setStatus('empty', 'No stats from ' + text + '.' + refreshed);
        return;
      }
      renderCharts(columns(records, unit, range.start, range.end), unit);
      var line = plural(records.length, 'interval') + ' with data (per ' + unit + ') from ' + text + ', in ' + plural(result.pages, 'page') + '.' + refreshed;
      if (result.truncated) {
        line += ' Stopped after ' + MAX_PAGES + ' pages: pick a shorter range or a larger unit to see all of it.';
        showError(line);
      }
      setStatus(result.truncated ? 'truncated' : 'done', line);
    } catch (err) {
      if (mine !== loading) return;
      shown = null;
      destroyPlots();
      totalsSection.hidden = true;
      var message = err && err.message ? err.message : String(err);
      if (err instanceof TypeError) message = 'Could not reach the service: ' + message;
      showError(message);
      setStatus('error', 'Failed to load the stats.');
    } finally {
      if (mine === loading) {
        loadButton.disabled = false;
        scheduleRefresh();
      }
    }
  }

  // --- wiring -------------------------------------------------------------------------------

  form.addEventListener('submit', function (e) {
    e.preventDefault();
    load();
  });
  kindInput.addEventListener('change', function () {
    placeholder();
    if (rememberInput.checked) remember();
  });
  credentialInput.addEventListener('input', function () {
    if (rememberInput.checked) remember();
  });
  rememberInput.addEventListener('change', remember);
  presetInput.addEventListener('change', function () {
    applyPreset();
  });
  refreshInput.addEventListener('change', function () {
    if (shown) writeUrl();
    scheduleRefresh();
  });
  csvButton.addEventListener('click', exportCsv);
  [startInput, endInput].forEach(function (input) {
    input.addEventListener('input', function () {
      presetInput.value = 'custom';
    });
  });
  var resizeTimer;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      plots.forEach(function (p) {
        p.setSize({ width: chartWidth(p.root.parentNode), height: 220 });
      });
    }, 100);
  });

  restore();
  readUrl();
  applyPreset();
  document.body.dataset.ready = 'true';
  // A remembered credential: show what the URL names at once (a reload keeps the view).
  if (credentialInput.value.trim() !== '') load();
})();
