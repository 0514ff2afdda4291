import { serializeJson } from './format.js';

export const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function cell(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'object') return `<code>${escapeHtml(serializeJson(value))}</code>`;
  return escapeHtml(String(value));
}

/** A page a person can read: arrays of records as a table, anything else as formatted JSON. */
export function renderHtml(title: string, body: unknown, links: Record<string, string> = {}): string {
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
    content = `<pre>${escapeHtml(JSON.stringify(JSON.parse(serializeJson(body ?? null)), null, 2))}</pre>`;
  }
  const nav = Object.entries(links)
    .map(([rel, url]) => `<a rel="${escapeHtml(rel)}" href="${escapeHtml(url)}">${escapeHtml(rel)}</a>`)
    .join(' ');
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}code,pre{font-size:90%}</style>
</head><body><h1>${escapeHtml(title)}</h1>${nav ? `<nav>${nav}</nav>` : ''}${content}</body></html>`;
}
