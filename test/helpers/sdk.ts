import type * as Ably from 'ably';

/** What the SDK rejects with, as far as these tests look at it. */
export type ErrorLike = { code?: number; statusCode?: number; message?: string };

/** Collects every item of a paginated result, page by page, following `next` links. */
export async function allPages<T>(first: Ably.PaginatedResult<T>): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let page: Ably.PaginatedResult<T> | null = first;
  let pages = 0;
  while (page) {
    pages++;
    items.push(...page.items);
    page = page.hasNext() ? await page.next() : null;
  }
  return { items, pages };
}

/** The error a promise rejects with; fails the test if it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<ErrorLike> {
  try {
    await promise;
  } catch (err) {
    return err as ErrorLike;
  }
  throw new Error('expected the SDK to reject');
}

/** The SDK's two wire formats, for `describe.each`: JSON, and MessagePack (`useBinaryProtocol`). */
export const WIRE_FORMATS: { format: 'json' | 'msgpack'; useBinaryProtocol: boolean }[] = [
  { format: 'json', useBinaryProtocol: false },
  { format: 'msgpack', useBinaryProtocol: true },
];
