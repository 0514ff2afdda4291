import { describe, expect, it } from 'vitest';
import { Sql, sql, sqlDate, sqlDottedName, sqlIdentifier, sqlInt, sqlJoin, sqlString, sqlTable } from '../../src/stores/clickhouse/sql.js';

describe('sqlString', () => {
  it('quotes plain text', () => {
    expect(sqlString('hello').text).toBe("'hello'");
    expect(sqlString('').text).toBe("''");
  });

  it('escapes quotes and backslashes, so a literal cannot be closed early', () => {
    expect(sqlString("it's").text).toBe("'it\\'s'");
    expect(sqlString('a\\b').text).toBe("'a\\\\b'");
    // a trailing backslash must not escape the closing quote
    expect(sqlString('x\\').text).toBe("'x\\\\'");
    expect(sqlString("\\'").text).toBe("'\\\\\\''");
  });

  it('escapes NUL, newlines and every other control character', () => {
    expect(sqlString('a\0b').text).toBe("'a\\0b'");
    expect(sqlString('l1\nl2\r\n\t').text).toBe("'l1\\nl2\\r\\n\\t'");
    expect(sqlString('\x01\x1f\x7f\b\f').text).toBe("'\\x01\\x1f\\x7f\\b\\f'");
    // the text of the query holds no raw control character at all
    const all = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('') + '\x7f';
    expect(sqlString(all).text).not.toMatch(/[\x00-\x1f\x7f]/);
  });

  it('keeps unicode as it is (sent as UTF-8)', () => {
    expect(sqlString('é 日本 😀').text).toBe("'é 日本 😀'");
  });

  it('refuses a lone surrogate, which UTF-8 would silently replace', () => {
    expect(() => sqlString('a\uD800b')).toThrow(RangeError);
    expect(() => sqlString('\uDC00')).toThrow(RangeError);
    expect(sqlString('\uD83D\uDE00').text).toBe("'😀'");
  });

  it('neutralises injection attempts', () => {
    const attacks = [
      "x' OR 1=1 --",
      "x'; DROP TABLE t; --",
      "x\\'; DROP TABLE t; --",
      "x' UNION ALL SELECT * FROM system.users --",
      "\\\\' OR '1'='1",
      "x'\0; DROP TABLE t",
    ];
    for (const attack of attacks) {
      const text = sqlString(attack).text;
      expect(text.startsWith("'") && text.endsWith("'")).toBe(true);
      // every quote inside the literal is preceded by an odd number of backslashes
      const inner = text.slice(1, -1);
      for (let i = 0; i < inner.length; i++) {
        if (inner[i] !== "'") continue;
        let slashes = 0;
        for (let j = i - 1; j >= 0 && inner[j] === '\\'; j--) slashes++;
        expect(slashes % 2).toBe(1);
      }
    }
  });

  it('refuses non-strings', () => {
    expect(() => sqlString(1 as unknown as string)).toThrow(TypeError);
    expect(() => sqlString(undefined as unknown as string)).toThrow(TypeError);
  });
});

describe('sqlInt', () => {
  it('writes safe integers and bigints', () => {
    expect(sqlInt(0).text).toBe('0');
    expect(sqlInt(-42).text).toBe('-42');
    expect(sqlInt(Number.MAX_SAFE_INTEGER).text).toBe('9007199254740991');
    expect(sqlInt(2n ** 64n - 1n).text).toBe('18446744073709551615');
    expect(sqlInt(-(2n ** 63n)).text).toBe('-9223372036854775808');
  });

  it('refuses fractions, NaN, infinities, unsafe and out-of-range values', () => {
    for (const v of [1.5, NaN, Infinity, -Infinity, 2 ** 53]) expect(() => sqlInt(v)).toThrow(RangeError);
    expect(() => sqlInt(2n ** 64n)).toThrow(RangeError);
    expect(() => sqlInt(-(2n ** 63n) - 1n)).toThrow(RangeError);
    expect(() => sqlInt('1' as unknown as number)).toThrow(TypeError);
  });
});

describe('sqlDottedName', () => {
  it("backquotes the spec's counter names, identifiers joined by dots", () => {
    expect(sqlDottedName('inbound.rest.messages.count').text).toBe('`inbound.rest.messages.count`');
    expect(sqlDottedName('channels.peak').text).toBe('`channels.peak`');
  });

  it('refuses anything else: a backquote, an empty part, spaces', () => {
    for (const bad of ['a`b', 'a..b', '.a', 'a.', 'a b', '', '1a.b', 'a.b`; DROP TABLE t']) {
      expect(() => sqlDottedName(bad)).toThrow(RangeError);
    }
  });
});

describe('sqlIdentifier / sqlTable', () => {
  it('backquotes plain identifiers', () => {
    expect(sqlIdentifier('history_messages').text).toBe('`history_messages`');
    expect(sqlIdentifier('_t1').text).toBe('`_t1`');
    expect(sqlTable('default', 't_abc_history').text).toBe('`default`.`t_abc_history`');
  });

  it('refuses anything that would need escaping', () => {
    for (const bad of ['', '1abc', 'a b', 'a`b', 'a.b', 'a;b', "a'b", 'a\\b', 'é', 'a\0', 't`; DROP TABLE x; --']) {
      expect(() => sqlIdentifier(bad)).toThrow(RangeError);
    }
  });
});

describe('sqlDate', () => {
  it('accepts calendar days only', () => {
    expect(sqlDate('2024-01-01').text).toBe("'2024-01-01'");
    expect(sqlDate('2024-02-29').text).toBe("'2024-02-29'");
    for (const bad of ['2023-02-29', '2024-13-01', '2024-1-1', "2024-01-01' OR 1", '20240101']) {
      expect(() => sqlDate(bad)).toThrow(RangeError);
    }
  });
});

describe('sql tagged template', () => {
  it('escapes every interpolated value by its type', () => {
    const q = sql`SELECT * FROM ${sqlTable('db', 't')} WHERE a = ${"x'y"} AND n > ${5} AND b IN ${['p', 'q\\']} AND big = ${10n}`;
    expect(q).toBeInstanceOf(Sql);
    expect(q.text).toBe("SELECT * FROM `db`.`t` WHERE a = 'x\\'y' AND n > 5 AND b IN ('p', 'q\\\\') AND big = 10");
  });

  it('embeds fragments built by the module as they are', () => {
    const order = sql`DESC`;
    expect(sql`ORDER BY serial ${order} LIMIT ${10}`.text).toBe('ORDER BY serial DESC LIMIT 10');
    expect(sqlJoin([sql`a = ${1}`, sql`b = ${'x'}`], sql` AND `).text).toBe("a = 1 AND b = 'x'");
  });

  it('refuses values it cannot escape', () => {
    for (const bad of [null, undefined, true, {}, 1.5, [], new Date(0)]) {
      expect(() => sql`SELECT ${bad as unknown as string}`).toThrow();
    }
  });

  it('treats a string that looks like SQL as data', () => {
    const q = sql`SELECT 1 WHERE x = ${'1; DROP TABLE t'}`;
    expect(q.text).toBe("SELECT 1 WHERE x = '1; DROP TABLE t'");
  });
});
