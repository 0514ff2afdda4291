// The developer console's history panel (README: Console): plain browser JavaScript, loaded by
// /console after console-rest.js and before console.js, which makes one panel with
// `window.ConsoleHistory(deps)`. It reads `GET /channels/<id>/messages` newest first, a page at a
// time along the Link headers (spec: Pagination), in the range of the From/To inputs (UTC, To
// inclusive to its second), and shows the messages decoded as a subscriber receives them.
'use strict';

(function () {
  var Rest = window.ConsoleRest;
  /** The spec's largest history page. */
  var MAX_LIMIT = 1000;

  /**
   * REST bodies keep each message's `encoding` (`json`, `base64`, ...): the SDK's own decoder
   * (Message.fromEncodedArray) turns them into what a subscriber receives. What it cannot decode
   * (a cipher without its key) is shown as it came, with its encoding.
   */
  async function decoded(messages) {
    if (!Array.isArray(messages) || !window.Ably) return messages;
    try {
      return await window.Ably.Rest.Message.fromEncodedArray(messages);
    } catch (e) {
      return messages;
    }
  }

  /**
   * deps: `current()` the open channel (`{ name }`, or null) whose answers may still be shown,
   * `auth()` the Authorization header, `setState(node, state, text)`, `errorText(err)`,
   * `cell(tr, text, className)`, `onRange()` called when a read is asked (the URL keeps the range).
   */
  window.ConsoleHistory = function (deps) {
    var $ = function (id) {
      return document.getElementById(id);
    };
    var form = $('history-form');
    var startInput = $('history-start');
    var endInput = $('history-end');
    var limitInput = $('history-limit');
    var stateEl = $('history-state');
    var body = $('history').querySelector('tbody');
    var firstButton = $('history-first');
    var nextButton = $('history-next');
    var page = { links: {}, number: 0 };

    function row(m) {
      var tr = document.createElement('tr');
      tr.dataset.id = m.id || '';
      // Date and time as two lines in a table, one on a phone (console.css).
      var when = deps.cell(tr, '', 'mono time');
      Rest.timeText(m.timestamp)
        .split(' ')
        .forEach(function (part, i) {
          if (i > 0) when.appendChild(document.createTextNode(' '));
          var span = document.createElement('span');
          span.textContent = part;
          when.appendChild(span);
        });
      var cells = [when, deps.cell(tr, m.name), deps.cell(tr, Rest.dataText(m.data, m.encoding), 'mono data'), deps.cell(tr, m.clientId), deps.cell(tr, m.id, 'mono')];
      // The labels of a phone's layout (console.css), where the header row is hidden.
      ['time', 'name', 'data', 'clientId', 'id'].forEach(function (label, i) {
        cells[i].dataset.label = label;
      });
      return tr;
    }

    function render(answer) {
      body.textContent = '';
      (Array.isArray(answer.body) ? answer.body : []).forEach(function (m) {
        body.appendChild(row(m));
      });
      page.links = answer.links;
      nextButton.hidden = !answer.links.next;
      firstButton.hidden = page.number <= 1;
      var n = body.children.length;
      stateEl.dataset.page = String(page.number);
      stateEl.dataset.count = String(n);
      deps.setState(
        stateEl,
        'done',
        n === 0 && page.number === 1
          ? 'No messages in this range.'
          : 'Page ' + page.number + ': ' + n + ' message' + (n === 1 ? '' : 's') + ', newest first' + (answer.links.next ? '; older ones on the next page.' : '; no older ones.'),
      );
    }

    /** The first page of the range, or the page a Link relation (`next`, `first`) names. */
    async function load(rel) {
      var open = deps.current();
      var auth = deps.auth();
      if (!open || !auth) return;
      var limit = Number(limitInput.value || '100');
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
        return deps.setState(stateEl, 'error', 'Per page must be a whole number from 1 to ' + MAX_LIMIT + '.');
      }
      var start = Rest.fromInputValue(startInput.value);
      var end = Rest.fromInputValue(endInput.value);
      if (start !== undefined && end !== undefined && start > end) return deps.setState(stateEl, 'error', 'From must not be after To.');
      deps.onRange();
      deps.setState(stateEl, 'loading', 'Loading…');
      try {
        var answer;
        var number;
        if (rel && page.links[rel]) {
          answer = await window.ServiceClient.get(page.links[rel], auth);
          number = rel === 'next' ? page.number + 1 : 1;
        } else {
          answer = await Rest.history(auth, open.name, { start: start, end: end === undefined ? undefined : end + 999, limit: limit });
          number = 1;
        }
        answer.body = await decoded(answer.body);
        if (deps.current() !== open) return;
        page.number = number;
        render(answer);
      } catch (e) {
        if (deps.current() === open) deps.setState(stateEl, 'error', deps.errorText(e));
      }
    }

    form.addEventListener('submit', function (event) {
      event.preventDefault();
      load();
    });
    nextButton.addEventListener('click', function () {
      load('next');
    });
    firstButton.addEventListener('click', function () {
      load('first');
    });

    return {
      load: load,
      clear: function () {
        body.textContent = '';
        page = { links: {}, number: 0 };
        nextButton.hidden = true;
        firstButton.hidden = true;
      },
    };
  };
})();
