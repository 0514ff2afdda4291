// The stats dashboard (README: Dashboard). Plain browser JavaScript, loaded by /dashboard after
// uPlot. It reads GET /stats (spec: Retrieve usage statistics) with the credentials typed into
// the page, follows the `next` Link headers to get the whole range, and draws one chart per group
// of counters, with the totals of the range in a table (each cell carries its stats field and
// value as data attributes).
'use strict';

(function () {
  /** Pages of `GET /stats` one load follows at most (a page holds up to `limit` intervals). */
  var MAX_PAGES = 200;

  var S = window.DashboardStats;
  var plural = S.plural;
  var UNIT_MS = S.UNIT_MS;
  var toInputValue = S.toInputValue;
  var fromInputValue = S.fromInputValue;
  var utcText = S.utcText;
  var serviceNow = S.serviceNow;
  var firstData = S.firstData;
  var unitFor = S.unitFor;
  var bucketStart = S.bucketStart;
  var nextBucket = S.nextBucket;
  var parseIntervalId = S.parseIntervalId;
  var fetchPage = S.fetchPage;
  var csvOf = S.csvOf;
  var FIGURES = window.DASHBOARD_FIGURES;
  var charts = window.DashboardCharts(document.getElementById('charts'), FIGURES.charts);
  var valueOf = charts.valueOf;
  var formatValue = charts.formatValue;
  var destroyPlots = charts.destroy;
  var CHARTS = FIGURES.charts;
  var max = 'max';


  var $ = function (id) {
    return document.getElementById(id);
  };
  var form = $('query');
  var credentials = window.ServiceClient.credentialForm({ kind: $('auth-kind'), credential: $('credential'), remember: $('remember'), storageKey: 'channel-messaging.dashboard.credential' });
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

  var loading = 0;

  // --- formatting ---------------------------------------------------------------------------


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

  // --- time range ---------------------------------------------------------------------------

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
   * The range to show: the inputs for a custom range; else ending now (service time), from the
   * preset's span, or for `data` from the app's first stats (a new app fills the chart instead of
   * being a dot at the right edge of a day). An app without stats gets the last hour.
   */
  var firstKnown = null;
  async function resolveRange(auth) {
    var p = preset();
    if (p.name !== 'custom') {
      var now = await serviceNow();
      var from;
      if (p.name === 'data') {
        // The first stats of an app stay where they are: found once per credential (each
        // request to /stats counts in the app's API requests).
        var first = firstKnown && firstKnown.auth === auth ? firstKnown.start : await firstData(auth, now);
        if (first !== undefined) firstKnown = { auth: auth, start: first };
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

  // --- GET /stats, every page ---------------------------------------------------------------

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
    // A custom range stays put: only the ranges that end now move on.
    if (!seconds || !shown || presetInput.value === 'custom') return;
    refreshTimer = setTimeout(function () {
      if (document.hidden || loadButton.disabled) scheduleRefresh();
      else load(true);
    }, seconds * 1000);
  }

  /** Shows the range's stats; `quiet` for a refresh (no "loading" line, the charts kept). */
  async function load(quiet) {
    var auth = credentials.authorization();
    if (!quiet) showError('');
    if (!auth) {
      setStatus('error', 'Enter a key or token first.');
      showError('No credentials: enter an API key (appId.keyId:secret) or a token.');
      return;
    }
    credentials.remember();
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
      var refreshed = Number(refreshInput.value) && presetInput.value !== 'custom' ? ' Refreshed every ' + refreshInput.selectedOptions[0].textContent + '.' : '';
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
      charts.render(charts.columns(records, unit, range.start, range.end), unit);
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

  credentials.restore();
  readUrl();
  applyPreset();
  document.body.dataset.ready = 'true';
  // A remembered credential: show what the URL names at once (a reload keeps the view).
  if (credentials.value() !== '') load();
})();
