// JSON text may spell a lone surrogate (`"a\ud800b"`): JSON.parse accepts it, and the string it
// makes has no UTF-8 form, so the log's MessagePack would hold bytes that are not UTF-8 (which the
// service's own checks then refuse on the way back out). Such text is refused as it comes in.

/** An escape of a surrogate (U+D800 to U+DFFF) anywhere in the text: only then are strings walked. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

// Node 20 has String.prototype.isWellFormed; the ES2022 lib this project compiles against does not declare it.
const wellFormedString = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** Whether every string (and key) of a value parsed from `text` is well-formed UTF-16. */
export function jsonTextWellFormed(text: string, value: unknown): boolean {
  // Most texts have no escape at all: indexOf finds that sooner than the regular expression.
  return text.indexOf('\\u') === -1 || !SURROGATE_ESCAPE.test(text) || stringsWellFormed(value);
}

/** Every string and key in a JSON value well-formed; iterative, so no nesting can overflow the stack. */
export function stringsWellFormed(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (!wellFormedString(v)) return false;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (typeof v === 'object' && v !== null) {
      for (const key of Object.keys(v)) {
        if (!wellFormedString(key)) return false;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return true;
}

/**
 * Whether a value parsed from JSON `text` has a key `__proto__` (JSON.parse makes it an own key;
 * spelt plainly, or with \u escapes). The log's MessagePack decoder refuses such a key, so a record
 * holding one could never be read back (history answered 500, the audit replay stopped on it): it
 * is refused as it comes in, as the REST API's JSON parser refuses it (src/app.ts).
 */
export function jsonTextHasProtoKey(text: string, value: unknown): boolean {
  if (text.indexOf('__proto__') === -1 && text.indexOf('\\u') === -1) return false;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (typeof v === 'object' && v !== null) {
      for (const key of Object.keys(v)) {
        if (key === '__proto__') return true;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}
