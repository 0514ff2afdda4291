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

  var DEF = {
    all: 'Every message and presence message counted: inbound + outbound + stored. Spec, quota rules: with persistence enabled, each published message counts twice, and each retrieval of a persisted message counts once more (here in outbound).',
    inbound: 'Messages and presence messages the service received: published over REST or a realtime connection, presence enter, update and leave.',
    outbound: 'Messages and presence messages the service sent: once per realtime connection that got them, and every message a REST history read returned.',
    stored: 'Messages and presence messages written to persisted history (channels with persistence enabled). Not a field of the record: all − inbound − outbound.',
    persisted: 'stored + messages retrieved from persisted history. The retrievals are also in outbound, so all counts them once: all ≠ inbound + outbound + persisted.',
    reads: 'Messages read back from persisted history (REST history of a persisted channel). Not a field of the record: persisted − stored.',
  };

  window.DASHBOARD_FIGURES = {
    intro:
      'Spec: statistics are aggregated over all channels of the application. They are kept in sub-minute intervals of 6 seconds, and start and end are rounded down to the nearest sub-minute boundary. Counts add up over a range; peaks are the highest interval.',
    charts: [
      {
        id: 'messages',
        title: 'Messages',
        format: 'count',
        note: 'Messages and presence messages together. all = inbound + outbound + stored; persisted = stored + history reads.',
        series: [
          { label: 'all', field: 'messages.all.all.count', how: sum, color: '#1f5fbf', def: DEF.all },
          { label: 'inbound', field: 'messages.inbound.all.all.count', how: sum, color: '#2a9d4b', def: DEF.inbound },
          { label: 'outbound', field: 'messages.outbound.all.all.count', how: sum, color: '#d9822b', def: DEF.outbound },
          { label: 'stored', field: 'derived.stored.count', derive: stored('count'), how: sum, color: '#8e44ad', def: DEF.stored },
          { label: 'persisted', field: 'messages.persisted.all.count', how: sum, color: '#b5179e', chart: false, def: DEF.persisted },
          { label: 'history reads', field: 'derived.historyReads.count', derive: historyReads('count'), how: sum, color: '#7f8c8d', def: DEF.reads },
        ],
      },
      {
        id: 'data',
        title: 'Data volume',
        format: 'bytes',
        note: 'The payload sizes of the messages above, in bytes, split the same way.',
        series: [
          { label: 'all', field: 'messages.all.all.data', how: sum, color: '#1f5fbf', def: 'Bytes of all messages counted: inbound + outbound + stored.' },
          { label: 'inbound', field: 'messages.inbound.all.all.data', how: sum, color: '#2a9d4b', def: 'Bytes of the inbound messages and presence messages.' },
          { label: 'outbound', field: 'messages.outbound.all.all.data', how: sum, color: '#d9822b', def: 'Bytes of the outbound messages, once per connection or read that got them.' },
          { label: 'stored', field: 'derived.stored.data', derive: stored('data'), how: sum, color: '#8e44ad', def: 'Bytes written to persisted history: all − inbound − outbound.' },
          { label: 'persisted', field: 'messages.persisted.all.data', how: sum, color: '#b5179e', chart: false, def: 'Bytes stored + bytes read back from persisted history.' },
          { label: 'history reads', field: 'derived.historyReads.data', derive: historyReads('data'), how: sum, color: '#7f8c8d', def: 'Bytes read back from persisted history: persisted − stored.' },
        ],
      },
      {
        id: 'presence',
        title: 'Presence',
        format: 'count',
        note: 'Presence messages alone (they are also in Messages above).',
        series: [
          { label: 'inbound', field: 'messages.inbound.all.presence.count', how: sum, color: '#2a9d4b', def: 'Presence enter, update and leave messages clients sent (the leaves the service makes for a connection that went are not inbound).' },
          { label: 'outbound', field: 'messages.outbound.all.presence.count', how: sum, color: '#d9822b', def: 'Presence messages sent to realtime connections, once per connection: live events and each member present at a sync.' },
          { label: 'stored', field: 'messages.persisted.presence.count', how: sum, color: '#8e44ad', def: 'Presence messages written to persisted presence history.' },
        ],
      },
      {
        id: 'connections',
        title: 'Realtime connections',
        format: 'count',
        note: 'Realtime (WebSocket and comet) connections of the app, read in the middle of every 6-second interval.',
        series: [
          { label: 'peak', field: 'connections.all.peak', how: max, color: '#1f5fbf', def: 'Most connections open at one reading (for the range: the highest interval).' },
          { label: 'mean', field: 'connections.all.mean', how: null, color: '#7f8c8d', def: 'Mean of the readings over the interval (no total over a range).' },
          { label: 'opened', field: 'connections.all.opened', how: sum, color: '#2a9d4b', def: 'Connections made (a resumed connection is not a new one). One made and gone between two readings shows here only.' },
        ],
      },
      {
        id: 'channels',
        title: 'Channels',
        format: 'count',
        note: 'A channel is active in a 6-second sample when a message was published on it. Channels that only had subscribers, presence members or a status request are not counted: the spec shows one trigger of activity (GET /channels/<channel_id>) and leaves the others unshown; the service counts publishing.',
        series: [
          { label: 'peak', field: 'channels.peak', how: max, color: '#1f5fbf', def: 'Most channels active in one 6-second sample (for the range: the highest interval).' },
          { label: 'mean', field: 'channels.mean', how: null, color: '#7f8c8d', def: 'Mean number of active channels over the samples of the interval (no total over a range).' },
          { label: 'opened', field: 'channels.opened', how: sum, color: '#2a9d4b', def: 'Channels active in a sample that were not active in the sample before.' },
        ],
      },
      {
        id: 'api',
        title: 'API requests',
        format: 'count',
        note: 'REST requests made with the app’s key or tokens (token requests included). This page’s own requests to /stats count here too.',
        series: [
          { label: 'succeeded', field: 'apiRequests.all.succeeded', how: sum, color: '#2a9d4b', def: 'Answered 2xx or 3xx.' },
          { label: 'refused', field: 'apiRequests.all.refused', how: sum, color: '#d9822b', def: 'Refused: 401, 403 or 429.' },
          { label: 'failed', field: 'apiRequests.all.failed', how: sum, color: '#c0392b', def: 'Any other error (a bad request, a failure of the service).' },
        ],
      },
      {
        id: 'tokens',
        title: 'Token requests',
        format: 'count',
        note: 'Requests for a token (POST /keys/<keyName>/requestToken); also in API requests.',
        series: [
          { label: 'succeeded', field: 'apiRequests.tokenRequests.succeeded', how: sum, color: '#2a9d4b', def: 'Tokens issued.' },
          { label: 'refused', field: 'apiRequests.tokenRequests.refused', how: sum, color: '#d9822b', def: 'Refused: 401, 403 or 429.' },
          { label: 'failed', field: 'apiRequests.tokenRequests.failed', how: sum, color: '#c0392b', def: 'Any other error.' },
        ],
      },
    ],
  };
})();
