// The one audited place where values become ClickHouse SQL text (ARCHITECTURE: "every literal goes
// through one audited escaping function"). The dialect kept here is the one that ClickHouse 18.16
// and current releases share: quoted string literals with backslash escapes, backquoted
// identifiers, plain integer literals. Server-side parameters ({name:Type}) do not exist on 18.16.

/** SQL text built only by this module; the `sql` tag embeds it as is, everything else is escaped. */
export class Sql {
  /** @internal use the `sql` tag or the helpers below */
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** A value the `sql` tag accepts. */
export type SqlValue = string | number | bigint | Sql | readonly (string | number | bigint)[];

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UINT64_MAX = 2n ** 64n - 1n;
const INT64_MIN = -(2n ** 63n);

const ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  "'": "\\'",
  '\0': '\\0',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

/**
 * A string literal. Backslash and quote are escaped; so is every control character, so the text
 * of a query stays on one line and a NUL cannot end it early. Non-ASCII text is sent as UTF-8.
 * A string with a lone surrogate is refused: it has no UTF-8 form and would be silently altered.
 */
export function sqlString(value: string): Sql {
  if (typeof value !== 'string') throw new TypeError(`sqlString: expected a string, got ${typeof value}`);
  if (LONE_SURROGATE.test(value)) throw new RangeError('sqlString: string has a lone surrogate');
  const escaped = value.replace(/[\\'\x00-\x1f\x7f]/g, (c) => ESCAPES[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return new Sql(`'${escaped}'`);
}

/** An integer literal (Int64 to UInt64 range); anything else, NaN and fractions included, is refused. */
export function sqlInt(value: number | bigint): Sql {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new RangeError(`sqlInt: ${value} is not a safe integer`);
    return new Sql(String(value));
  }
  if (typeof value === 'bigint') {
    if (value < INT64_MIN || value > UINT64_MAX) throw new RangeError(`sqlInt: ${value} is out of the 64-bit range`);
    return new Sql(value.toString());
  }
  throw new TypeError(`sqlInt: expected a number or bigint, got ${typeof value}`);
}

/**
 * An identifier (database, table, column). Only [A-Za-z_][A-Za-z0-9_]* is accepted, so no name ever
 * needs escaping; it is backquoted anyway so that keywords are safe as names.
 */
export function sqlIdentifier(name: string): Sql {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new RangeError(`sqlIdentifier: ${JSON.stringify(name)} is not a plain identifier`);
  }
  return new Sql(`\`${name}\``);
}

const DOTTED_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/**
 * A column name made of plain identifiers joined by dots, such as the spec's counter names
 * (`inbound.rest.messages.count`), backquoted so that analysts can select it by that name.
 */
export function sqlDottedName(name: string): Sql {
  if (typeof name !== 'string' || !DOTTED_NAME.test(name)) {
    throw new RangeError(`sqlDottedName: ${JSON.stringify(name)} is not identifiers joined by dots`);
  }
  return new Sql(`\`${name}\``);
}

/** `database`.`table` */
export function sqlTable(database: string, table: string): Sql {
  return new Sql(`${sqlIdentifier(database).text}.${sqlIdentifier(table).text}`);
}

/** A Date literal ('YYYY-MM-DD'), as used for day partitions. */
export function sqlDate(day: string): Sql {
  if (typeof day !== 'string' || !DATE.test(day) || !isCalendarDay(day)) {
    throw new RangeError(`sqlDate: ${JSON.stringify(day)} is not a YYYY-MM-DD date`);
  }
  return sqlString(day);
}

const isCalendarDay = (day: string): boolean => {
  const t = Date.parse(`${day}T00:00:00Z`);
  return !Number.isNaN(t) && new Date(t).toISOString().slice(0, 10) === day;
};

/** Escapes one interpolated value by its type. */
export function sqlValue(value: SqlValue): Sql {
  if (value instanceof Sql) return value;
  if (typeof value === 'string') return sqlString(value);
  if (typeof value === 'number' || typeof value === 'bigint') return sqlInt(value);
  if (Array.isArray(value)) {
    if (value.length === 0) throw new RangeError('sql: an empty list has no SQL form');
    return new Sql(`(${value.map((v) => sqlValue(v as string | number | bigint).text).join(', ')})`);
  }
  throw new TypeError(`sql: cannot interpolate a value of type ${value === null ? 'null' : typeof value}`);
}

/**
 * Tagged template: sql`SELECT * FROM ${sqlTable(db, t)} WHERE id = ${id}`. Strings become quoted
 * literals, numbers integer literals, arrays parenthesised lists (for IN), and fragments built by
 * this module are embedded as they are. Anything else throws.
 */
export function sql(strings: TemplateStringsArray, ...values: SqlValue[]): Sql {
  let text = strings[0];
  for (let i = 0; i < values.length; i++) text += sqlValue(values[i]).text + strings[i + 1];
  return new Sql(text);
}

/** Joins fragments with a separator (itself a fragment), e.g. for optional WHERE clauses. */
export function sqlJoin(parts: readonly Sql[], separator: Sql): Sql {
  return new Sql(parts.map((p) => p.text).join(separator.text));
}
