// SPDX-License-Identifier: Apache-2.0
/**
 * JSON with exact fences. The gateway's fences are integers from 1 to 2^63 − 1, written as JSON integers;
 * JSON.parse turns them into numbers, which round every integer above 2^53 (9007199254740993 reads as
 * 9007199254740992), so two fences would compare equal that are not. Owns: reading answer bodies with every
 * fence member as a bigint, and writing request bodies in which a bigint is a JSON integer. Must not: send
 * anything, or change how any other member reads (a row's columns are the table's data and read as
 * JSON.parse reads them).
 *
 * A fence member is one named in FENCE_MEMBERS whose value is an integer, anywhere in an answer except
 * inside the members that carry a table's or a key's data (DATA_MEMBERS): the `fence` of an acquire, a
 * renewal, a status, a watch, a write, a read and each lock of a lock set; `presented_fence` and
 * `current_fence` of a stale_fence problem and of the audit records; `revoked_fence` of a revoke.
 */

/** The members that hold fences. */
const FENCE_MEMBERS = new Set(["fence", "presented_fence", "current_fence", "revoked_fence"]);
/** The members whose contents are the user's data: nothing in them is read as a fence. */
const DATA_MEMBERS = new Set(["row", "set", "fields", "value"]);

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

class Reader {
  at = 0;

  constructor(private readonly text: string) {}

  fail(what: string): never {
    throw new SyntaxError(`${what} at position ${this.at} of the JSON text`);
  }

  space(): void {
    while (this.at < this.text.length && " \t\n\r".includes(this.text[this.at]!)) this.at++;
  }

  /** The value at the current position; fences says whether an integer here is a fence. */
  value(fences: boolean, data: boolean): unknown {
    this.space();
    const c = this.text[this.at];
    if (c === "{") return this.object(data);
    if (c === "[") return this.array(fences, data);
    if (c === '"') return this.string();
    for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return value;
      }
    }
    NUMBER.lastIndex = this.at;
    const m = NUMBER.exec(this.text);
    if (!m) this.fail("unexpected character");
    this.at += m[0].length;
    return fences && INTEGER.test(m[0]) ? BigInt(m[0]) : Number(m[0]);
  }

  string(): string {
    const start = this.at++;
    for (;;) {
      const c = this.text[this.at];
      if (c === undefined) this.fail("unterminated string");
      this.at++;
      if (c === "\\") this.at++;
      else if (c === '"') break;
    }
    return JSON.parse(this.text.slice(start, this.at)) as string;
  }

  expect(c: string): void {
    this.space();
    if (this.text[this.at] !== c) this.fail(`expected '${c}'`);
    this.at++;
  }

  /** The next character after white space is c (and is consumed). */
  next(c: string): boolean {
    this.space();
    if (this.text[this.at] !== c) return false;
    this.at++;
    return true;
  }

  object(data: boolean): Record<string, unknown> {
    this.at++;
    const out: Record<string, unknown> = {};
    if (this.next("}")) return out;
    do {
      this.space();
      if (this.text[this.at] !== '"') this.fail("expected a member name");
      const name = this.string();
      this.expect(":");
      const inData = data || DATA_MEMBERS.has(name);
      const value = this.value(!inData && FENCE_MEMBERS.has(name), inData);
      // As JSON.parse does: a later duplicate wins; "__proto__" is an own member, not the prototype.
      Object.defineProperty(out, name, { value, writable: true, enumerable: true, configurable: true });
    } while (this.next(","));
    this.expect("}");
    return out;
  }

  array(fences: boolean, data: boolean): unknown[] {
    this.at++;
    const out: unknown[] = [];
    if (this.next("]")) return out;
    do out.push(this.value(fences, data));
    while (this.next(","));
    this.expect("]");
    return out;
  }
}

/** Parses a JSON answer as JSON.parse does, except that every fence member is a bigint (see above). */
export function parseJson(text: string): unknown {
  const reader = new Reader(text);
  const value = reader.value(false, false);
  reader.space();
  if (reader.at !== text.length) reader.fail("unexpected text after the JSON value");
  return value;
}

/**
 * The JSON text of a request body, as JSON.stringify writes it, except that a bigint (a fence, or a value
 * of a bigint column) is written as the JSON integer it is, where JSON.stringify throws.
 */
export function stringifyJson(value: unknown): string {
  const ancestors: object[] = [];
  const write = (v: unknown): string | undefined => {
    if (typeof v === "bigint") return v.toString();
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
      v = (v as { toJSON: () => unknown }).toJSON();
      if (typeof v === "bigint") return v.toString();
    }
    if (v === null || typeof v !== "object" || v instanceof Number || v instanceof String || v instanceof Boolean) {
      return JSON.stringify(v);
    }
    if (ancestors.includes(v)) throw new TypeError("cannot write a cyclic structure as JSON");
    ancestors.push(v);
    try {
      if (Array.isArray(v)) return `[${v.map((item) => write(item) ?? "null").join(",")}]`;
      const members: string[] = [];
      for (const [name, item] of Object.entries(v)) {
        const text = write(item);
        if (text !== undefined) members.push(`${JSON.stringify(name)}:${text}`);
      }
      return `{${members.join(",")}}`;
    } finally {
      ancestors.pop();
    }
  };
  const text = write(value);
  if (text === undefined) throw new TypeError("the request body is not JSON");
  return text;
}
