// The figures the stats dashboard shows (README: Dashboard), each with what it counts. Loaded
// before dashboard.js, which reads `window.DASHBOARD_FIGURES`. The definitions follow the spec
// (Retrieve usage statistics; Limits: quota rules; Channel activity) and the counting rules of
// README "Usage statistics"; they are copied here, the page reads nothing else.
'use strict';

(function () {
  var sum = 'sum';
  var max = 'max';
  var entry = function (entries, field) {
    return entries && typeof entries[field] === 'number' ? entries[field] : 0;
  };
  /**
   * The part of `all` that is neither inbound nor outbound: what was written to persisted history.
   * The stats record has no field of its own for it: `all` = inbound + outbound + stored, so it is
   * `all` − inbound − outbound.
   */
  var stored = function (what) {
    return function (e) {
      return entry(e, 'messages.all.all.' + what) - entry(e, 'messages.inbound.all.all.' + what) - entry(e, 'messages.outbound.all.all.' + what);
    };
  };
  /** `persisted` = stored + retrieved from persisted history, so the reads are `persisted` − stored. */
  var historyReads = function (what) {
    var s = stored(what);
    return function (e) {
      return entry(e, 'messages.persisted.all.' + what) - s(e);
    };
  };

  var DERIVED = { stored: stored, historyReads: historyReads };
  var COLOUR = { all: '#1f5fbf', peak: '#1f5fbf', inbound: '#2a9d4b', opened: '#2a9d4b', succeeded: '#2a9d4b', outbound: '#d9822b', refused: '#d9822b', stored: '#8e44ad', persisted: '#b5179e', 'history reads': '#7f8c8d', mean: '#7f8c8d', failed: '#c0392b' };

  /** One series: a stats field, or `derived.<name>.<count|data>` computed from others. */
  function series(label, field, how, def, drawn) {
    var s = { label: label, field: field, how: how, color: COLOUR[label], def: def };
    var derived = /^derived\.(\w+)\.(\w+)$/.exec(field);
    if (derived) s.derive = DERIVED[derived[1]](derived[2]);
    if (drawn === false) s.chart = false;
    return s;
  }

  // The ways messages split, counted (`count`) and in bytes (`data`): label, field (with {what}),
  // drawn in the chart or in the table only, what the count counts, what the bytes are.
  var SPLITS = [
    ['all', 'messages.all.all.{what}', true, 'Every message and presence message counted: inbound + outbound + stored. Spec, quota rules: with persistence enabled, each published message counts twice, and each retrieval of a persisted message counts once more (here in outbound).', 'Bytes of all messages counted: inbound + outbound + stored.'],
    ['inbound', 'messages.inbound.all.all.{what}', true, 'Messages and presence messages the service received: published over REST or a realtime connection, presence enter, update and leave.', 'Bytes of the inbound messages and presence messages.'],
    ['outbound', 'messages.outbound.all.all.{what}', true, 'Messages and presence messages the service sent: once per realtime connection that got them, and every message a REST history read returned.', 'Bytes of the outbound messages, once per connection or read that got them.'],
    ['stored', 'derived.stored.{what}', true, 'Messages and presence messages written to persisted history (channels with persistence enabled). Not a field of the record: all − inbound − outbound.', 'Bytes written to persisted history: all − inbound − outbound.'],
    ['persisted', 'messages.persisted.all.{what}', false, 'stored + messages retrieved from persisted history. The retrievals are also in outbound, so all counts them once: all ≠ inbound + outbound + persisted.', 'Bytes stored + bytes read back from persisted history.'],
    ['history reads', 'derived.historyReads.{what}', true, 'Messages read back from persisted history (REST history of a persisted channel). Not a field of the record: persisted − stored.', 'Bytes read back from persisted history: persisted − stored.'],
  ];
  var splits = function (what, column) {
    return SPLITS.map(function (row) {
      return series(row[0], row[1].replace('{what}', what), sum, row[column], row[2]);
    });
  };

  // Readings of a number that goes up and down (connections, active channels): label, how a
  // range totals it, what it is for connections, for channels.
  var GAUGES = [
    ['peak', max, 'Most connections open at one reading (for the range: the highest interval).', 'Most channels active in one 6-second sample (for the range: the highest interval).'],
    ['mean', null, 'Mean of the readings over the interval (no total over a range).', 'Mean number of active channels over the samples of the interval (no total over a range).'],
    ['opened', sum, 'Connections made (a resumed connection is not a new one). One made and gone between two readings shows here only.', 'Channels active in a sample (published to or attached) that were not active in the sample before.'],
  ];
  var gauges = function (prefix, column) {
    return GAUGES.map(function (row) {
      return series(row[0], prefix + row[0], row[1], row[column]);
    });
  };

  // What became of requests: label, for all API requests, for token requests.
  var OUTCOMES = [
    ['succeeded', 'Answered 2xx or 3xx.', 'Tokens issued.'],
    ['refused', 'Refused: 401, 403 or 429.', 'Refused: 401, 403 or 429.'],
    ['failed', 'Any other error (a bad request, a failure of the service).', 'Any other error.'],
  ];
  var outcomes = function (prefix, column) {
    return OUTCOMES.map(function (row) {
      return series(row[0], prefix + row[0], sum, row[column]);
    });
  };

  var chart = function (id, title, format, note, list) {
    return { id: id, title: title, format: format, note: note, series: list };
  };

  window.DASHBOARD_FIGURES = {
    intro:
      'Spec: statistics are aggregated over all channels of the application. They are kept in sub-minute intervals of 6 seconds, and start and end are rounded down to the nearest sub-minute boundary. Counts add up over a range; peaks are the highest interval.',
    charts: [
      chart('messages', 'Messages', 'count', 'Messages and presence messages together. all = inbound + outbound + stored; persisted = stored + history reads.', splits('count', 3)),
      chart('data', 'Data volume', 'bytes', 'The payload sizes of the messages above, in bytes, split the same way.', splits('data', 4)),
      chart('presence', 'Presence', 'count', 'Presence messages alone (they are also in Messages above).', [
        series('inbound', 'messages.inbound.all.presence.count', sum, 'Presence enter, update and leave messages clients sent (the leaves the service makes for a connection that went are not inbound).'),
        series('outbound', 'messages.outbound.all.presence.count', sum, 'Presence messages sent to realtime connections, once per connection: live events and each member present at a sync.'),
        series('stored', 'messages.persisted.presence.count', sum, 'Presence messages written to persisted presence history.'),
      ]),
      chart('connections', 'Realtime connections', 'count', 'Realtime (WebSocket and comet) connections of the app, read in the middle of every 6-second interval.', gauges('connections.all.', 2)),
      chart('channels', 'Channels', 'count', 'A channel is active in a 6-second sample when a message was published on it or a realtime connection attached to it (a subscriber or presence member), counted once either way. A channel stays active in every sample it has a subscriber in; a status request (GET /channels/<channel_id>) is not counted.', gauges('channels.', 3)),
      chart('api', 'API requests', 'count', 'REST requests made with the app’s key or tokens (token requests included). This page’s own requests to /stats count here too.', outcomes('apiRequests.all.', 1)),
      chart('tokens', 'Token requests', 'count', 'Requests for a token (POST /keys/<keyName>/requestToken); also in API requests.', outcomes('apiRequests.tokenRequests.', 2)),
    ],
  };
})();
