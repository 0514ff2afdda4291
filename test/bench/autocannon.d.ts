// The part of autocannon's API the bench uses (the package ships no types, and adding
// @types/autocannon would touch package.json).
declare module 'autocannon' {
  namespace autocannon {
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
    }
    interface Client {
      setRequests(requests: Request[]): void;
    }
    interface Options {
      url: string;
      connections?: number;
      pipelining?: number;
      /** seconds */
      duration?: number;
      /** requests per second over all connections */
      overallRate?: number;
      /** seconds */
      timeout?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      requests?: Request[];
      setupClient?: (client: Client) => void;
    }
    interface Histogram {
      average: number;
      stddev: number;
      min: number;
      max: number;
      p50: number;
      p90: number;
      p99: number;
    }
    interface Result {
      /** seconds, as measured */
      duration: number;
      requests: Histogram & { total: number; sent: number };
      latency: Histogram;
      errors: number;
      timeouts: number;
      non2xx: number;
      resets: number;
      '2xx': number;
      statusCodeStats: Record<string, { count: number }>;
    }
    interface Instance extends PromiseLike<Result> {
      on(event: 'tick', listener: (tick: { counter: number; bytes: number }) => void): this;
      /** every response: its status and its latency in ms */
      on(event: 'response', listener: (client: Client, statusCode: number, resBytes: number, responseTime: number) => void): this;
      /** a request that failed without a response (connection error, timeout) */
      on(event: 'reqError', listener: (error: Error) => void): this;
      stop(): void;
    }
  }
  function autocannon(options: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
