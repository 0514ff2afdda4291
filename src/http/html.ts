import { serializeJson } from './format.js';
import { ServiceError } from '../errors.js';

export const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function cell(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'object') return `<code>${escapeHtml(serializeJson(value))}</code>`;
  return escapeHtml(String(value));
}

/** The longest JSON text shown indented (beyond it, as it is). */
export const MAX_INDENTED_JSON = 256 * 1024;

/**
 * The most JSON a page shows. Escaped for HTML, a value grows up to 7 times (a quote in a JSON
 * string is `\&quot;`), one character at a time: a page of 1,000 messages of 64 KB of quotes was
 * 455 M characters, most of V8's longest string, made in about 8 s on the event loop (review finding).
 */
export const MAX_HTML_JSON = 4 * 1024 * 1024;

/** A page a person can read: arrays of records as a table, anything else as formatted JSON. */
export function renderHtml(title: string, body: unknown, links: Record<string, string> = {}): string {
  const json = serializeJson(body ?? null);
  if (json.length > MAX_HTML_JSON) {
    throw new ServiceError(
      'invalidParameterValue',
      `the html format shows at most ${MAX_HTML_JSON} characters of JSON, and this reply has ${json.length}: ask for fewer records (limit), or for format=json or msgpack`,
    );
  }
  let content: string;
  const rows = Array.isArray(body) ? body : undefined;
  if (rows && rows.length > 0 && rows.every((r) => r && typeof r === 'object' && !Array.isArray(r))) {
    const columns = [...new Set(rows.flatMap((r) => Object.keys(r as object)))];
    content =
      `<table><thead><tr>${columns.map((c) => `<th>${escapeHtml(c)}</th>`).join('')}</tr></thead><tbody>` +
      rows
        .map((r) => `<tr>${columns.map((c) => `<td>${cell((r as Record<string, unknown>)[c])}</td>`).join('')}</tr>`)
        .join('') +
      '</tbody></table>';
  } else {
    // Indented, every leaf goes on a line of its own, as far in as it is deep: an envelope of a page
    // of data nested 28 deep grew 32 times (100 messages: 202 MB, 3.5 s; 1,000 would pass the
    // longest string there is, a 500). A large value is shown as it is.
    content = `<pre>${escapeHtml(json.length <= MAX_INDENTED_JSON ? JSON.stringify(JSON.parse(json), null, 2) : json)}</pre>`;
  }
  const nav = Object.entries(links)
    .map(([rel, url]) => `<a rel="${escapeHtml(rel)}" href="${escapeHtml(url)}">${escapeHtml(rel)}</a>`)
    .join(' ');
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}code,pre{font-size:90%}</style>
</head><body><h1>${escapeHtml(title)}</h1>${nav ? `<nav>${nav}</nav>` : ''}${content}</body></html>`;
}
