// The developer console's own presence (README: Console): plain browser JavaScript, loaded by
// /console after console-rest.js and before console.js, which makes one panel with
// `window.ConsolePresence(deps)`. The page enters the open channel's presence set as the clientId
// typed in, with optional data (text or JSON), updates its data and leaves, through the SDK's
// realtime presence (spec: Presence). A key, or a token whose clientId is `*`, may enter as any
// clientId (`enterClient`); a token bound to a clientId enters as that one (`enter`), the field
// then shows it and cannot be changed. Closing the channel leaves.
'use strict';

(function () {
  /**
   * deps: `current()` the open channel (`{ name, channel }`, or null), `client()` the SDK's
   * Realtime, `setState(node, state, text)`, `errorText(err)`. The clientId's limits are the
   * service's to enforce (its error is shown); the page refuses only an empty one or `*`.
   */
  window.ConsolePresence = function (deps) {
    var $ = function (id) {
      return document.getElementById(id);
    };
    var form = $('presence-form');
    var clientIdInput = $('presence-client-id');
    var dataInput = $('presence-data');
    var jsonInput = $('presence-json');
    var updateButton = $('presence-update');
    var leaveButton = $('presence-leave');
    var stateEl = $('presence-state');
    /** The channel (`deps.current()`) the page is present on and as whom; null when absent. */
    var present = null; // { open, clientId }

    /** The connection's own clientId when it is bound to one (a token's), else null. */
    function boundClientId() {
      var client = deps.client();
      var id = client && client.auth ? client.auth.clientId : undefined;
      return id && id !== '*' ? id : null;
    }

    function show() {
      var bound = boundClientId();
      if (bound) clientIdInput.value = bound;
      clientIdInput.readOnly = !!bound || !!present;
      updateButton.disabled = !present;
      leaveButton.disabled = !present;
    }

    /** The data field as the member's data: undefined when empty, parsed when "JSON" is ticked. */
    function data() {
      if (jsonInput.checked) return { data: JSON.parse(dataInput.value) };
      return { data: dataInput.value === '' ? undefined : dataInput.value };
    }

    /** Runs a presence call of the open channel; `after` gets its result's clientId on success. */
    function act(verb, after) {
      var open = deps.current();
      if (!open) return deps.setState(stateEl, 'error', 'Open a channel first.');
      var clientId = present ? present.clientId : boundClientId() || clientIdInput.value.trim();
      if (clientId === '' || clientId === '*') return deps.setState(stateEl, 'error', 'Enter a clientId (not *) to be present as.');
      var value;
      try {
        value = verb === 'leave' ? { data: undefined } : data();
      } catch (e) {
        return deps.setState(stateEl, 'error', 'Data is not JSON: ' + e.message);
      }
      var presence = open.channel.presence;
      var call = boundClientId()
        ? presence[verb](value.data)
        : presence[verb + 'Client'](clientId, value.data);
      deps.setState(stateEl, 'busy', verb.charAt(0).toUpperCase() + verb.slice(1) + '…');
      call.then(
        function () {
          if (deps.current() !== open) return;
          after(clientId, open);
          show();
        },
        function (err) {
          if (deps.current() === open) deps.setState(stateEl, 'error', deps.errorText(err));
        },
      );
    }

    form.addEventListener('submit', function (event) {
      event.preventDefault();
      act('enter', function (clientId, open) {
        present = { open: open, clientId: clientId };
        deps.setState(stateEl, 'present', 'Present on ' + open.name + ' as ' + clientId + '.');
      });
    });
    updateButton.addEventListener('click', function () {
      act('update', function (clientId, open) {
        deps.setState(stateEl, 'present', 'Present on ' + open.name + ' as ' + clientId + ' (data updated).');
      });
    });
    leaveButton.addEventListener('click', function () {
      act('leave', function (clientId, open) {
        present = null;
        deps.setState(stateEl, 'absent', 'Left ' + open.name + ' (was ' + clientId + ').');
      });
    });

    return {
      /** A new channel is open (or none): the page is present on none. */
      reset: function () {
        present = null;
        deps.setState(stateEl, 'absent', 'Not present.');
        show();
      },
      /** Before the channel closes: leave, so others see it go at once. */
      leave: function (open) {
        if (!present || present.open !== open) return;
        var p = present;
        present = null;
        var presence = open.channel.presence;
        (boundClientId() ? presence.leave() : presence.leaveClient(p.clientId)).catch(function () {});
      },
      /** The clientId field as the connection allows (a token's own clientId, once connected). */
      refresh: show,
      /** Whether a member is the page's own: entered on this page's connection. */
      isOwn: function (member) {
        var client = deps.client();
        return !!client && member.connectionId === client.connection.id;
      },
    };
  };
})();
