// SIGTERM / SIGINT (src/startup.ts, shutdownSignals): the first begins the graceful shutdown; a
// second forces the exit; the same one again within a second is one request delivered twice (a
// terminal's Ctrl-C reaches the process from the terminal and from npm and tsx, a few ms apart),
// which must not cut the graceful shutdown short.
import { describe, expect, it } from 'vitest';
import { shutdownSignals } from '../../src/startup.js';

function harness(): { onSignal: (s: string) => void; events: string[]; at: (ms: number) => void } {
  let t = 0;
  const events: string[] = [];
  const onSignal = shutdownSignals({
    begin: (s) => events.push(`begin ${s}`),
    force: (s) => events.push(`force ${s}`),
    logger: { info: (_o, msg) => events.push(`info ${msg}`), warn: (_o, msg) => events.push(`warn ${msg}`) },
    now: () => t,
    repeatMs: 1000,
  });
  return { onSignal, events, at: (ms) => (t = ms) };
}

describe('shutdown signals', () => {
  it('the first signal begins the shutdown; a second, later, forces the exit', () => {
    const h = harness();
    h.onSignal('SIGTERM');
    expect(h.events).toEqual(['begin SIGTERM']);
    h.at(5000);
    h.onSignal('SIGINT');
    expect(h.events.slice(1)).toEqual(['warn a second signal during the shutdown; exiting now (code 1)', 'force SIGINT']);
  });

  it('the same Ctrl-C delivered twice within a second (terminal and npm) does not force the exit', () => {
    const h = harness();
    h.onSignal('SIGINT');
    h.at(40);
    h.onSignal('SIGINT');
    expect(h.events).toEqual(['begin SIGINT', 'info already shutting down (the same signal again, from a wrapper or the terminal)']);
    h.at(1500);
    h.onSignal('SIGINT');
    expect(h.events.at(-1)).toBe('force SIGINT');
  });
});
