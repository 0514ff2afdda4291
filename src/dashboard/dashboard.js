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

  var sum = 'sum';
  var max = 'max';
  /**
   * The charts and their series: `field` is the stats record's flat entry (version 2 and later),
   * `how` how the range's total is made from the intervals' values (none for means: a mean of
   * the range is not made from the intervals' means, so the table leaves them out).
   */
  var CHARTS = [
    {
      id: 'messages',
      title: 'Messages',
      format: 'count',
      series: [
        { label: 'all', field: 'messages.all.all.count', how: sum, color: '#1f5fbf' },
        { label: 'inbound', field: 'messages.inbound.all.all.count', how: sum, color: '#2a9d4b' },
        { label: 'outbound', field: 'messages.outbound.all.all.count', how: sum, color: '#d9822b' },
        { label: 'persisted', field: 'messages.persisted.all.count', how: sum, color: '#8e44ad' },
      ],
    },
    {
      id: 'data',
      title: 'Data volume',
      format: 'bytes',
      series: [
        { label: 'all', field: 'messages.all.all.data', how: sum, color: '#1f5fbf' },
        { label: 'inbound', field: 'messages.inbound.all.all.data', how: sum, color: '#2a9d4b' },
        { label: 'outbound', field: 'messages.outbound.all.all.data', how: sum, color: '#d9822b' },
        { label: 'persisted', field: 'messages.persisted.all.data', how: sum, color: '#8e44ad' },
      ],
    },
    {
      id: 'api',
      title: 'API requests',
      format: 'count',
      series: [
        { label: 'succeeded', field: 'apiRequests.all.succeeded', how: sum, color: '#2a9d4b' },
        { label: 'refused', field: 'apiRequests.all.refused', how: sum, color: '#d9822b' },
        { label: 'failed', field: 'apiRequests.all.failed', how: sum, color: '#c0392b' },
      ],
    },
    {
      id: 'tokens',
      title: 'Token requests',
      format: 'count',
      series: [
        { label: 'succeeded', field: 'apiRequests.tokenRequests.succeeded', how: sum, color: '#2a9d4b' },
        { label: 'refused', field: 'apiRequests.tokenRequests.refused', how: sum, color: '#d9822b' },
        { label: 'failed', field: 'apiRequests.tokenRequests.failed', how: sum, color: '#c0392b' },
      ],
    },
    {
      id: 'channels',
      title: 'Channels',
      format: 'count',
      series: [
        { label: 'peak', field: 'channels.peak', how: max, color: '#1f5fbf' },
        { label: 'mean', field: 'channels.mean', how: null, color: '#7f8c8d' },
        { label: 'opened', field: 'channels.opened', how: sum, color: '#2a9d4b' },
      ],
    },
    {
      id: 'connections',
      title: 'Realtime connections',
      format: 'count',
      series: [
        { label: 'peak', field: 'connections.all.peak', how: max, color: '#1f5fbf' },
        { label: 'mean', field: 'connections.all.mean', how: null, color: '#7f8c8d' },
        { label: 'opened', field: 'connections.all.opened', how: sum, color: '#2a9d4b' },
      ],
    },
  ];

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
  /** Fills the range inputs from the preset, ending now (service time). */
  function applyPreset() {
    if (presetInput.value === 'custom') return Promise.resolve();
    var span = Number(presetInput.value);
    var unit = presetInput.selectedOptions[0].dataset.unit;
    if (unit) unitInput.value = unit;
    var preset = presetInput.value;
    return serviceNow().then(function (now) {
      // The user may have picked another preset, or typed a range, while the time was asked.
      if (presetInput.value !== preset) return now;
      endInput.value = toInputValue(now);
      startInput.value = toInputValue(now - span);
      return now;
    });
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

  /** Every record of the range, oldest first, following `next` links (spec: Pagination). */
  async function fetchAll(query, auth) {
    var url = new URL('/stats?' + new URLSearchParams(query).toString(), location.href);
    var records = [];
    var pages = 0;
    while (url) {
      if (pages >= MAX_PAGES) return { records: records, pages: pages, truncated: true };
      setStatus('loading', 'Loading page ' + (pages + 1) + '… (' + records.length + ' intervals so far)');
      var res = await fetch(url, {
        credentials: 'omit',
        cache: 'no-store',
        headers: { Authorization: auth, Accept: 'application/json', 'X-Service-Version': '2' },
      });
      pages++;
      var body;
      try {
        body = await res.json();
      } catch (e) {
        body = undefined;
      }
      if (!res.ok) throw serviceError(res, body);
      if (!Array.isArray(body)) throw new Error('GET /stats did not answer with an array of stats records');
      for (var i = 0; i < body.length; i++) records.push(body[i]);
      var next = parseLinks(res.headers.get('Link')).next;
      url = next ? new URL(next, url) : null;
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
          var v = r.entries && typeof r.entries[s.field] === 'number' ? r.entries[s.field] : 0;
          total = s.how === max ? Math.max(total, v) : total + v;
        });
        totals[s.field] = total;
      });
    });
    return totals;
  }

  function renderTotals(totals) {
    totalsBody.textContent = '';
    CHARTS.forEach(function (chart) {
      chart.series
        .filter(function (s) {
          return s.how;
        })
        .forEach(function (s, i) {
        var tr = document.createElement('tr');
        var cells = [i === 0 ? chart.title : '', s.label, s.field, s.how === max ? 'highest' : 'total'];
        cells.forEach(function (text, j) {
          var td = document.createElement('td');
          td.textContent = text;
          if (j === 2) td.className = 'field';
          tr.appendChild(td);
        });
        var value = document.createElement('td');
        value.className = 'num';
        value.dataset.field = s.field;
        value.dataset.value = String(totals[s.field]);
        value.textContent = formatValue(chart.format, totals[s.field]);
        tr.appendChild(value);
        totalsBody.appendChild(tr);
      });
    });
    totalsSection.hidden = false;
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
          return r && r.entries && typeof r.entries[s.field] === 'number' ? r.entries[s.field] : 0;
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
    chartsEl.textContent = '';
  }

  function renderCharts(data, unit) {
    destroyPlots();
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
      var box = document.createElement('div');
      box.className = 'chart';
      box.id = 'chart-' + chart.id;
      chartsEl.appendChild(box);
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
            value: function (_u, v) {
              return v === null || v === undefined ? '–' : timeFormat(utc(v));
            },
          },
        ].concat(
          chart.series.map(function (s) {
            return {
              label: s.label,
              stroke: s.color,
              width: 2,
              points: { show: data.x.length <= 120 },
              value: function (_u, v) {
                return formatValue(chart.format, v);
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
      var columnsOfChart = [data.x].concat(
        chart.series.map(function (s) {
          return data[s.field];
        }),
      );
      plots.push(new uPlot(opts, columnsOfChart, box));
    });
  }

  // --- one load -----------------------------------------------------------------------------

  async function load() {
    var auth = authorization();
    showError('');
    if (!auth) {
      setStatus('error', 'Enter a key or token first.');
      showError('No credentials: enter an API key (appId.keyId:secret) or a token.');
      return;
    }
    remember();
    var mine = ++loading;
    loadButton.disabled = true;
    try {
      if (presetInput.value !== 'custom') await applyPreset();
      var start = fromInputValue(startInput.value);
      var to = fromInputValue(endInput.value);
      if (Number.isNaN(start) || Number.isNaN(to)) throw new Error('Give both ends of the range.');
      // "To" names a whole minute: the range ends at that minute's last millisecond.
      var end = to + 59999;
      if (start > end) throw new Error('The range starts after it ends.');
      var unit = unitInput.value;
      var limit = Number(new URLSearchParams(location.search).get('limit')) || 1000;
      var query = { unit: unit, start: String(start), end: String(end), direction: 'forwards', limit: String(Math.max(1, Math.min(1000, limit))) };
      var result = await fetchAll(query, auth);
      if (mine !== loading) return;
      var records = result.records;
      renderTotals(totalsOf(records));
      var range = utcText(start) + ' to ' + utcText(to) + ' UTC';
      if (records.length === 0) {
        destroyPlots();
        var empty = document.createElement('p');
        empty.className = 'empty';
        empty.id = 'empty';
        empty.textContent = 'No stats in this range (' + range + '). Usage is counted in 6-second samples, so the last seconds may not show yet.';
        chartsEl.appendChild(empty);
        setStatus('empty', 'No stats from ' + range + '.');
        return;
      }
      renderCharts(columns(records, unit, start, end), unit);
      var text = records.length + ' intervals (per ' + unit + ') from ' + range + ', in ' + result.pages + (result.pages === 1 ? ' page' : ' pages') + '.';
      if (result.truncated) {
        text += ' Stopped after ' + MAX_PAGES + ' pages: pick a shorter range or a larger unit to see all of it.';
        showError(text);
      }
      statusEl.dataset.pages = String(result.pages);
      statusEl.dataset.intervals = String(records.length);
      setStatus(result.truncated ? 'truncated' : 'done', text);
    } catch (err) {
      if (mine !== loading) return;
      destroyPlots();
      totalsSection.hidden = true;
      var message = err && err.message ? err.message : String(err);
      if (err instanceof TypeError) message = 'Could not reach the service: ' + message;
      showError(message);
      setStatus('error', 'Failed to load the stats.');
    } finally {
      if (mine === loading) loadButton.disabled = false;
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
  applyPreset();
  document.body.dataset.ready = 'true';
})();
