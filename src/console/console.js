// The developer console (README: Console): plain browser JavaScript, loaded by /console after the
// SDK's browser build (window.Ably), the pages' shared service-client.js (window.ServiceClient)
// and console-rest.js (window.ConsoleRest). One realtime
// connection per credential entered; one open channel at a time, attached for messages and
// presence, with its status (REST), its presence members, the page's own presence
// (console-presence.js), a publish form and its history (REST,
// a page at a time along Link headers). What is open (channel, history range) is kept in the
// URL's fragment, which never reaches the service, so a reload or a shared link restores it;
// the credentials never go there.
'use strict';

(function () {
  var Rest = window.ConsoleRest;
  var Client = window.ServiceClient;
  /** Live entries kept on the page; older ones are dropped (the page must not grow without end). */
  var MAX_LOG = 300;
  /** Channel rows "More channels" adds up to; past it, a prefix narrows the list. */
  var MAX_CHANNEL_ROWS = 1000;
  /** Channels per `GET /channels` page: `?limit=N` on the page's URL (1 to 1000), 100 otherwise. */
  var askedPage = Number(new URLSearchParams(location.search).get('limit'));
  var CHANNELS_PAGE = Number.isInteger(askedPage) && askedPage >= 1 && askedPage <= 1000 ? askedPage : 100;

  var $ = function (id) {
    return document.getElementById(id);
  };
  var el = {
    credentials: $('credentials'),
    kind: $('auth-kind'),
    credential: $('credential'),
    remember: $('remember'),
    connection: $('connection'),
    error: $('error'),
    channelsForm: $('channels-form'),
    prefix: $('prefix'),
    channelsState: $('channels-state'),
    channelsBody: $('channels').querySelector('tbody'),
    channelsMore: $('channels-more'),
    channelForm: $('channel-form'),
    channel: $('channel'),
    detach: $('detach'),
    channelState: $('channel-state'),
    channelBody: $('channel-body'),
    status: $('status'),
    statusRefresh: $('status-refresh'),
    log: $('log'),
    logClear: $('log-clear'),
    membersBody: $('members').querySelector('tbody'),
    membersCount: $('members-count'),
    publishForm: $('publish-form'),
    pubName: $('pub-name'),
    pubData: $('pub-data'),
    pubJson: $('pub-json'),
    pubExtras: $('pub-extras'),
    publishState: $('publish-state'),
    historyStart: $('history-start'),
    historyEnd: $('history-end'),
    historyLimit: $('history-limit'),
  };

  var credentials = Client.credentialForm({ kind: el.kind, credential: el.credential, remember: el.remember, storageKey: 'channel-messaging.console.credential' });

  /** The connection and the open channel; `opened` tells a current channel's events from a closed one's. */
  var client = null;
  var auth = null;
  var open = null; // { name, channel, onMessage, onPresence, onState }
  var channelsNext = null;

  // --- what the page tells the user ----------------------------------------------------------

  function setState(node, state, text) {
    node.dataset.state = state;
    node.textContent = text;
  }
  function showError(text) {
    el.error.hidden = !text;
    el.error.textContent = text || '';
  }
  /** An SDK ErrorInfo or an Error, as the service told it. */
  function errorText(err) {
    if (!err) return 'unknown error';
    if (err.code !== undefined && err.message !== undefined && !err.service) return Client.describedError(err.message, err.code, err.statusCode).message;
    return err.message || String(err);
  }
  function cell(tr, text, className) {
    var td = document.createElement('td');
    td.textContent = text === undefined || text === null ? '' : String(text);
    if (className) td.className = className;
    tr.appendChild(td);
    return td;
  }

  // --- the URL fragment: what is open --------------------------------------------------------

  function readFragment() {
    var q = new URLSearchParams(location.hash.slice(1));
    return { channel: q.get('channel') || '', start: q.get('start') || '', end: q.get('end') || '', limit: q.get('limit') || '' };
  }
  function writeFragment() {
    var q = new URLSearchParams();
    if (open) q.set('channel', open.name);
    if (el.historyStart.value) q.set('start', el.historyStart.value);
    if (el.historyEnd.value) q.set('end', el.historyEnd.value);
    if (el.historyLimit.value && el.historyLimit.value !== '100') q.set('limit', el.historyLimit.value);
    var hash = q.toString();
    if (hash !== location.hash.slice(1)) history.replaceState(null, '', hash ? '#' + hash : location.pathname + location.search);
  }
  function applyFragment() {
    var f = readFragment();
    el.channel.value = f.channel;
    el.historyStart.value = f.start;
    el.historyEnd.value = f.end;
    el.historyLimit.value = f.limit || '100';
    return f;
  }

  // --- credentials and the realtime connection -----------------------------------------------

  /**
   * The SDK's options for this page's own origin. `endpoint` is read as a host only when it has a
   * dot, `::` or is `localhost` (otherwise the SDK takes it for a routing policy of the hosted
   * platform): a single-label host gets the root's trailing dot, the same host to DNS.
   */
  function clientOptions(kind, value) {
    var host = location.hostname;
    if (host.indexOf('.') < 0 && host.indexOf('::') < 0 && host !== 'localhost') host += '.';
    var tls = location.protocol === 'https:';
    var port = Number(location.port) || (tls ? 443 : 80);
    var options = {
      endpoint: host,
      tls: tls,
      port: port,
      tlsPort: port,
      // The SDK's default check asks the hosted platform; the service's own /time answers here.
      connectivityCheckUrl: location.origin + '/time',
      logLevel: 1,
    };
    options[kind === 'token' ? 'token' : 'key'] = value;
    return options;
  }

  function connect() {
    var value = credentials.value();
    showError('');
    if (value === '') {
      showError('Enter a key (appId.keyId:secret) or a token first.');
      return;
    }
    credentials.remember();
    closeChannel();
    if (client) client.close();
    client = null;
    auth = credentials.authorization();
    var created;
    try {
      created = new window.Ably.Realtime(clientOptions(el.kind.value, value));
    } catch (e) {
      // The SDK refuses a malformed key before any request.
      setState(el.connection, 'failed', 'Not connected.');
      showError(errorText(e));
      return;
    }
    client = created;
    setState(el.connection, 'connecting', 'Connecting…');
    created.connection.on(function (change) {
      if (client !== created) return;
      var text = change.current.charAt(0).toUpperCase() + change.current.slice(1);
      if (change.current === 'connected') text += ' (connection ' + created.connection.id + ')';
      if (change.reason && change.current !== 'connected') text += ': ' + errorText(change.reason);
      setState(el.connection, change.current, text);
      if (change.current === 'failed' || change.current === 'suspended') showError(errorText(change.reason || created.connection.errorReason));
      if (change.current === 'connected') showError('');
    });
    listChannels(false);
    if (el.channel.value.trim() !== '') openChannel(el.channel.value.trim());
  }

  // --- active channels (GET /channels) -------------------------------------------------------

  function renderChannelRow(details) {
    var name = typeof details === 'string' ? details : details.channelId;
    var m = (details.status && details.status.occupancy && details.status.occupancy.metrics) || {};
    var tr = document.createElement('tr');
    tr.dataset.channel = name;
    var td = document.createElement('td');
    var button = document.createElement('button');
    button.type = 'button';
    button.className = 'link';
    button.textContent = name;
    button.addEventListener('click', function () {
      el.channel.value = name;
      openChannel(name);
    });
    td.appendChild(button);
    tr.appendChild(td);
    ['connections', 'publishers', 'subscribers', 'presenceMembers'].forEach(function (k) {
      cell(tr, m[k] === undefined ? '' : m[k], 'num').dataset.metric = k;
    });
    el.channelsBody.appendChild(tr);
  }

  async function listChannels(more) {
    if (!auth) {
      setState(el.channelsState, 'error', 'Connect first.');
      return;
    }
    setState(el.channelsState, 'loading', 'Loading…');
    try {
      var page = more && channelsNext ? await Client.get(channelsNext, auth) : await Rest.listChannels(auth, el.prefix.value.trim(), CHANNELS_PAGE);
      if (!more) el.channelsBody.textContent = '';
      page.body.forEach(renderChannelRow);
      var n = el.channelsBody.children.length;
      var full = n >= MAX_CHANNEL_ROWS;
      channelsNext = full ? null : page.links.next || null;
      el.channelsMore.hidden = !channelsNext;
      setState(
        el.channelsState,
        'done',
        n === 0 ? 'No active channels.' : n + ' active channel' + (n === 1 ? '' : 's') + (full && page.links.next ? ' shown, the most this page lists: narrow them with a prefix.' : channelsNext ? ' so far.' : '.'),
      );
    } catch (e) {
      setState(el.channelsState, 'error', errorText(e));
    }
  }

  // --- the open channel: attachment, live log, presence --------------------------------------

  function closeChannel() {
    if (!open) return;
    var o = open;
    open = null;
    o.channel.unsubscribe(o.onMessage);
    o.channel.presence.unsubscribe(o.onPresence);
    o.channel.off(o.onState);
    presencePanel.leave(o);
    if (o.channel.state === 'attached' || o.channel.state === 'attaching') o.channel.detach().catch(function () {});
    el.detach.disabled = true;
    el.channelBody.hidden = true;
    setState(el.channelState, 'none', 'No channel open.');
    writeFragment();
  }

  function openChannel(name) {
    if (!client) {
      setState(el.channelState, 'none', 'Connect to open ' + name + '.');
      return;
    }
    if (open && open.name === name && open.channel.state === 'attached') return refreshAll();
    closeChannel();
    var channel = client.channels.get(name);
    var o = { name: name, channel: channel };
    open = o;
    o.onState = function (change) {
      if (open !== o) return;
      var text = name + ': ' + change.current + (change.reason ? ' (' + errorText(change.reason) + ')' : '');
      setState(el.channelState, change.current, text);
      if (change.current === 'failed' || change.current === 'suspended') showError(text);
    };
    o.onMessage = function (m) {
      if (open === o) logEntry('message', m);
    };
    o.onPresence = function (p) {
      if (open !== o) return;
      logEntry('presence', p);
      refreshMembers();
    };
    channel.on(o.onState);
    el.log.textContent = '';
    el.membersBody.textContent = '';
    historyPanel.clear();
    presencePanel.reset();
    el.channelBody.hidden = false;
    el.detach.disabled = false;
    setState(el.channelState, 'attaching', name + ': attaching…');
    writeFragment();
    Promise.all([channel.subscribe(o.onMessage), channel.presence.subscribe(o.onPresence)]).then(
      function () {
        if (open !== o) return;
        setState(el.channelState, 'attached', name + ': attached');
        presencePanel.refresh();
        refreshAll();
      },
      function (err) {
        if (open !== o) return;
        var text = name + ': ' + errorText(err);
        setState(el.channelState, 'failed', text);
        showError(text);
      },
    );
  }

  function refreshAll() {
    refreshMembers();
    refreshStatus();
    historyPanel.load();
  }

  function logEntry(kind, m) {
    var li = document.createElement('li');
    li.dataset.kind = kind;
    var label = kind === 'message' ? m.name || '(no name)' : m.action;
    if (kind === 'message') li.dataset.name = m.name || '';
    else li.dataset.action = m.action;
    if (m.clientId) li.dataset.clientId = m.clientId;
    var head = document.createElement('div');
    head.className = 'entry-head';
    [
      ['time', Rest.timeText(m.timestamp)],
      ['kind', kind === 'message' ? 'message' : 'presence'],
      ['name', label],
      ['who', m.clientId ? 'client ' + m.clientId : m.connectionId ? 'connection ' + m.connectionId : ''],
    ].forEach(function (part) {
      var span = document.createElement('span');
      span.className = part[0];
      span.textContent = part[1];
      head.appendChild(span);
    });
    li.appendChild(head);
    var data = document.createElement('pre');
    data.className = 'data';
    data.textContent = Rest.dataText(m.data, m.encoding);
    li.appendChild(data);
    if (m.extras) {
      var extras = document.createElement('pre');
      extras.className = 'extras';
      extras.textContent = 'extras ' + Rest.dataText(m.extras);
      li.appendChild(extras);
    }
    el.log.insertBefore(li, el.log.firstChild);
    while (el.log.children.length > MAX_LOG) el.log.removeChild(el.log.lastChild);
  }

  function refreshMembers() {
    var o = open;
    if (!o) return;
    o.channel.presence.get().then(
      function (members) {
        if (open !== o) return;
        el.membersBody.textContent = '';
        members.forEach(function (p) {
          var tr = document.createElement('tr');
          tr.dataset.clientId = p.clientId;
          if (presencePanel.isOwn(p)) tr.dataset.own = 'true';
          cell(tr, p.clientId);
          cell(tr, p.connectionId, 'mono');
          cell(tr, Rest.dataText(p.data, p.encoding), 'mono');
          el.membersBody.appendChild(tr);
        });
        el.membersCount.textContent = '(' + members.length + ')';
      },
      function (err) {
        if (open === o) el.membersCount.textContent = '(' + errorText(err) + ')';
      },
    );
  }

  // --- channel status (GET /channels/<id>) ---------------------------------------------------

  async function refreshStatus() {
    var o = open;
    if (!o || !auth) return;
    el.status.dataset.state = 'loading';
    try {
      var details = (await Rest.channelStatus(auth, o.name)).body;
      if (open !== o) return;
      var m = (details.status && details.status.occupancy && details.status.occupancy.metrics) || {};
      var rows = [['channelId', details.channelId], ['isActive', details.status && details.status.isActive]];
      Object.keys(m).forEach(function (k) {
        rows.push([k, m[k]]);
      });
      el.status.textContent = '';
      rows.forEach(function (r) {
        var dt = document.createElement('dt');
        dt.textContent = r[0];
        var dd = document.createElement('dd');
        dd.textContent = String(r[1]);
        dd.dataset.field = r[0];
        el.status.appendChild(dt);
        el.status.appendChild(dd);
      });
      el.status.dataset.state = 'done';
    } catch (e) {
      if (open !== o) return;
      el.status.textContent = errorText(e);
      el.status.dataset.state = 'error';
    }
  }

  // --- publish ----------------------------------------------------------------------------------

  function publish() {
    var o = open;
    if (!o) return setState(el.publishState, 'error', 'Open a channel first.');
    var message = {};
    if (el.pubName.value !== '') message.name = el.pubName.value;
    try {
      if (el.pubJson.checked) message.data = JSON.parse(el.pubData.value);
      else if (el.pubData.value !== '') message.data = el.pubData.value;
    } catch (e) {
      return setState(el.publishState, 'error', 'Data is not JSON: ' + e.message);
    }
    if (el.pubExtras.value.trim() !== '') {
      try {
        message.extras = JSON.parse(el.pubExtras.value);
      } catch (e) {
        return setState(el.publishState, 'error', 'Extras are not JSON: ' + e.message);
      }
      if (!message.extras || typeof message.extras !== 'object' || Array.isArray(message.extras)) {
        return setState(el.publishState, 'error', 'Extras must be a JSON object.');
      }
    }
    setState(el.publishState, 'publishing', 'Publishing…');
    o.channel.publish(message).then(
      function () {
        setState(el.publishState, 'done', 'Published to ' + o.name + ' at ' + Rest.timeText(Date.now()) + ' (browser clock).');
      },
      function (err) {
        setState(el.publishState, 'error', errorText(err));
      },
    );
  }

  var presencePanel = window.ConsolePresence({
    current: function () {
      return open;
    },
    client: function () {
      return client;
    },
    setState: setState,
    errorText: errorText,
  });

  var historyPanel = window.ConsoleHistory({
    current: function () {
      return open;
    },
    auth: function () {
      return auth;
    },
    setState: setState,
    errorText: errorText,
    cell: cell,
    onRange: writeFragment,
  });

  // --- wiring ----------------------------------------------------------------------------------

  var onSubmit = function (form, action) {
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      action();
    });
  };
  onSubmit(el.credentials, connect);
  onSubmit(el.channelsForm, function () {
    listChannels(false);
  });
  onSubmit(el.channelForm, function () {
    var name = el.channel.value.trim();
    if (name === '') return setState(el.channelState, 'none', 'Enter a channel name.');
    openChannel(name);
  });
  onSubmit(el.publishForm, publish);
  el.channelsMore.addEventListener('click', () => listChannels(true));
  el.detach.addEventListener('click', closeChannel);
  el.statusRefresh.addEventListener('click', refreshStatus);
  el.logClear.addEventListener('click', () => (el.log.textContent = ''));
  // A link pasted into this tab: open what it says.
  window.addEventListener('hashchange', function () {
    var f = applyFragment();
    if (f.channel && (!open || open.name !== f.channel)) openChannel(f.channel);
    else if (open) historyPanel.load();
  });

  var fragment = applyFragment();
  if (!window.Ably) {
    showError('The realtime client (the SDK browser build) did not load: realtime is unavailable.');
  } else if (credentials.restore()) {
    connect();
  } else if (fragment.channel) {
    setState(el.channelState, 'none', 'Enter a key or token and press Connect to open ' + fragment.channel + '.');
  }
  document.body.dataset.ready = 'true';
})();
