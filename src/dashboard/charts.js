// The stats dashboard's charts (README: Dashboard): one uPlot per group of figures, with the
// group's note under it, intervals without data drawn as zeros, the legend showing the newest
// interval until the cursor is on a chart. Loaded after uPlot and stats-client.js, before
// dashboard.js, which makes one with `window.DashboardCharts(box, charts)`.
'use strict';

(function () {
  var S = window.DashboardStats;
  var UNIT_MS = S.UNIT_MS;
  var bucketStart = S.bucketStart;
  var nextBucket = S.nextBucket;
  var parseIntervalId = S.parseIntervalId;
  /** Intervals without data are drawn as zeros while the range has at most this many intervals. */
  var MAX_FILLED = 200000;

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

  /** A series' value in one record: its stats field, or what it is derived from. */
  function valueOf(record, s) {
    var e = record && record.entries;
    if (s.derive) return s.derive(e || {});
    return e && typeof e[s.field] === 'number' ? e[s.field] : 0;
  }

  window.DashboardCharts = function (chartsEl, CHARTS) {
    var plots = [];

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

    var resizeTimer;
    window.addEventListener('resize', function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () {
        plots.forEach(function (p) {
          p.setSize({ width: chartWidth(p.root.parentNode), height: 220 });
        });
      }, 100);
    });

    return { columns: columns, render: renderCharts, destroy: destroyPlots, valueOf: valueOf, formatValue: formatValue };
  };
})();
