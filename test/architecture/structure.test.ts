import { describe, expect, it } from 'vitest';
import { assertNoCycles, buildImportGraph, checkRealtimeHasNoCycle, cycles, cyclesThroughDomain, domainEscapes, subgraph, upwardArrows } from './import-graph.js';

// The structure the design asks for (issue 25), read from the import graph of src/ and
// projections/ (type-only imports included). The map of the whole tree:
// `npx tsx test/architecture/structure-map.ts`.

const graph = buildImportGraph();

describe('the import graph', () => {
  it('holds the domain floor and the files that import it', () => {
    expect(graph.get('src/domain/events.ts')).toEqual(new Set(['src/domain/message.ts', 'src/domain/presence-event.ts', 'src/domain/app.ts', 'src/domain/webhook-rule.ts']));
    expect(graph.get('src/log/event-codec.ts')).toContain('src/domain/events.ts');
  });

  it('finds a cycle when there is one, across folders and through a file importing itself', () => {
    const g = new Map([
      ['a/x.ts', new Set(['b/y.ts'])],
      ['b/y.ts', new Set(['c/z.ts'])],
      ['c/z.ts', new Set(['a/x.ts'])],
      ['d/w.ts', new Set(['d/w.ts', 'a/x.ts'])],
    ]);
    expect(cycles(g)).toEqual([['a/x.ts', 'b/y.ts', 'c/z.ts'], ['d/w.ts']]);
    expect(() => assertNoCycles(cycles(g), 'in the example')).toThrow(/cycle 1: a\/x.ts, b\/y.ts, c\/z.ts/);
  });
});

describe('the domain floor (src/domain)', () => {
  it('imports only src/domain (and node or npm packages)', () => {
    expect(domainEscapes(graph)).toEqual([]);
  });

  it('has no import cycle among its own files', () => {
    assertNoCycles(cycles(subgraph(graph, (f) => f.startsWith('src/domain/'))), 'inside src/domain');
  });

  it('lies on no import cycle anywhere in the tree', () => {
    assertNoCycles(cyclesThroughDomain(graph), 'through src/domain');
  });
});

describe('the realtime wing (src/realtime)', () => {
  it('has no import cycle among its own files (a connection talks to the gateway through context.ts)', () => {
    checkRealtimeHasNoCycle(graph);
  });

  it('a connection does not import the gateway, the registry or delivery', () => {
    const imports = [...(graph.get('src/realtime/connection.ts') ?? [])];
    expect(imports.filter((f) => /src\/realtime\/(gateway|sessions|delivery|handshake)\.ts$/.test(f))).toEqual([]);
  });
});

describe('the layers (domain < codec, log, stores < projections < messages, presence, apps, auth < realtime, routes, http < service)', () => {
  it('no import runs up a layer (the map: npx tsx test/architecture/structure-map.ts)', () => {
    expect(upwardArrows(graph)).toEqual([]);
  });
});
