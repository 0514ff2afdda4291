// GET /time every quarter second on a connection of its own, for the whole run: the service must
// keep answering while the fuzzer works. A liveness check, not a speed check: only a request that
// fails or gets no answer within HttpClient's hang limit counts against it; the slowest is printed.
import { HttpClient } from './http-client.js';

const EVERY_MS = 250;

export class TimeWatch {
  private readonly client: HttpClient;
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;
  private readonly failed: string[] = [];
  answered = 0;
  worstMs = 0;

  constructor(port: number) {
    this.client = new HttpClient(port);
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), EVERY_MS);
  }

  private async tick(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    const started = performance.now();
    try {
      const res = await this.client.send({ method: 'GET', target: '/time', headers: {} });
      const body = JSON.parse(res.body.toString()) as unknown;
      if (res.status !== 200 || !Array.isArray(body) || typeof body[0] !== 'number') this.failed.push(`status ${res.status}: ${res.body.toString().slice(0, 100)}`);
      else this.answered++;
    } catch (err) {
      this.failed.push((err as Error).message);
    } finally {
      this.worstMs = Math.max(this.worstMs, performance.now() - started);
      this.inFlight = false;
    }
  }

  failures(): string[] {
    return [...this.failed];
  }

  stop(): { answered: number; failed: number; worstMs: number } {
    clearInterval(this.timer);
    this.client.close();
    return { answered: this.answered, failed: this.failed.length, worstMs: this.worstMs };
  }
}
