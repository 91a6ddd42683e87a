// The fisk-ai v2 journal codec and reader: one JSON object per line,
// {"seq": N, "protocol": "<id>", "<payload key>": {...}} (docs/spec.md
// sections 3-7).  Pure: bytes in, records out; no IO here.

import { CorruptJournal, UnsupportedVersion } from './errors.mjs';
import { bug } from './bugs.mjs';

export const VERSION = 2;
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;

export const PROTOCOLS = {
  meta: 'io.choria.fisk-ai.v1.session.meta',
  assistant: 'io.choria.fisk-ai.v1.session.assistant',
  user: 'io.choria.fisk-ai.v1.session.user',
  tool_result: 'io.choria.fisk-ai.v1.session.tool_result',
  terminal: 'io.choria.fisk-ai.v1.session.terminal',
};
const KIND_OF = Object.fromEntries(Object.entries(PROTOCOLS).map(([k, p]) => [p, k]));

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isInt = (v) => typeof v === 'number' && Number.isInteger(v);

// ---------------------------------------------------------------------------
// Encoding

function finiteOnly(key, value) {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new TypeError(`field ${JSON.stringify(key)} is not a finite number`);
  }
  return value;
}

// The journal's line format, AGENT_JOURNAL_FORMAT: 'fisk-ai-v2' (the default), or 'envelope', this
// agent's own JSON-lines format: each record as {"n": seq, "type": kind, "data": payload}, one per line,
// with the same payloads, seqs and durability rules (fisk-ai cannot read it; the harness judges it as a
// generic JSON-lines journal).
export const JOURNAL_FORMATS = ['fisk-ai-v2', 'envelope'];
let envelope = false;

// Read the variable once.  Returns an error message for an unknown format, else null.
export function configureFormat(env = process.env) {
  const name = env.AGENT_JOURNAL_FORMAT || 'fisk-ai-v2';
  if (!JOURNAL_FORMATS.includes(name)) {
    return `unknown AGENT_JOURNAL_FORMAT ${JSON.stringify(name)}; known: ${JOURNAL_FORMATS.join(', ')}`;
  }
  envelope = name === 'envelope';
  return null;
}

// An 'envelope' line's object as the fisk-ai v2 record it holds (checked as one by checkRecord).
function unwrap(obj) {
  const fail = (field, message) => Object.assign(new Error(message), { field });
  for (const k of Object.keys(obj)) {
    if (k !== 'n' && k !== 'type' && k !== 'data') throw fail(k, `unexpected member '${k}' in the envelope`);
  }
  if (typeof obj.type !== 'string' || !Object.hasOwn(PROTOCOLS, obj.type)) {
    throw fail('type', `unknown record type ${JSON.stringify(obj.type)}`);
  }
  if (!Object.hasOwn(obj, 'data')) throw fail('data', 'missing data');
  return { seq: obj.n, protocol: PROTOCOLS[obj.type], [obj.type]: obj.data };
}

// One record as one line (a Buffer ending in "\n").  `payload` is built by
// the caller with its fields in the order of the spec's tables.  Compact
// JSON; non-ASCII stays raw UTF-8, control characters and lone surrogates
// are escaped by JSON.stringify, so the record is one physical line.
export function encodeRecord(kind, seq, payload) {
  if (!Object.hasOwn(PROTOCOLS, kind)) throw new TypeError(`unknown record kind ${kind}`);
  const record = envelope ? { n: seq, type: kind, data: payload } : { seq, protocol: PROTOCOLS[kind], [kind]: payload };
  const text = JSON.stringify(record, finiteOnly);
  const line = Buffer.from(text + '\n', 'utf8');
  if (line.length > MAX_RECORD_BYTES) {
    throw new RangeError(`${kind} record of ${line.length} bytes is over the limit of ${MAX_RECORD_BYTES}`);
  }
  return line;
}

// ---------------------------------------------------------------------------
// Decoding one line

// A line that is not a JSON object at all: a torn tail when it is the last line.
class NotAnObject extends Error {}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function finiteReviver(key, value) {
  if (typeof value === 'number' && !Number.isFinite(value)) throw new NotAnObject('number out of range');
  return value;
}

function parseObject(bytes) {
  let text;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new NotAnObject('not valid UTF-8');
  }
  let value;
  try {
    value = JSON.parse(text, finiteReviver);
  } catch (e) {
    if (e instanceof NotAnObject) throw e;
    throw new NotAnObject(`not JSON (${e.message})`);
  }
  if (!isObject(value)) throw new NotAnObject('not a JSON object');
  return value;
}

// Field checks: [name, test, required, what].  null is refused for every listed field.
const FIELDS = {
  meta: [
    ['version', isInt, true, 'an int'],
    ['run_id', (v) => typeof v === 'string', true, 'a string'],
    ['created', (v) => typeof v === 'string', true, 'a string'],
    ['fingerprint', isObject, true, 'an object'],
    ['prompt', (v) => typeof v === 'string', false, 'a string'],
    ['interactive', (v) => typeof v === 'boolean', false, 'a bool'],
  ],
  assistant: [
    ['iteration', (v) => isInt(v) && v >= 0, true, 'an int >= 0'],
    ['message', (v) => isObject(v) && v.role === 'assistant' && (Array.isArray(v.content) || typeof v.content === 'string'),
      true, 'an assistant message'],
    ['stop_reason', (v) => typeof v === 'string', false, 'a string'],
    ['in_tokens', (v) => isInt(v) && v >= 0, true, 'an int >= 0'],
    ['out_tokens', (v) => isInt(v) && v >= 0, true, 'an int >= 0'],
    ['cache_read_tokens', (v) => isInt(v) && v >= 0, false, 'an int >= 0'],
    ['cache_create_tokens', (v) => isInt(v) && v >= 0, false, 'an int >= 0'],
  ],
  user: [
    ['message', (v) => isObject(v) && v.role === 'user' && (Array.isArray(v.content) || typeof v.content === 'string'),
      true, 'a user message'],
  ],
  tool_result: [
    ['tool_use_id', (v) => typeof v === 'string', true, 'a string'],
    ['result', (v) => isObject(v) && v.type === 'tool_result', true, 'a tool_result block'],
    ['remote', (v) => typeof v === 'boolean', false, 'a bool'],
  ],
  terminal: [
    ['reason', (v) => typeof v === 'string' && v.length > 0, true, 'a non-empty string'],
    ['message', (v) => typeof v === 'string', false, 'a string'],
  ],
};

const FP_FIELDS = [
  ['model', 'string'], ['system_hash', 'string'], ['tools_hash', 'string'], ['thinking_mode', 'string'],
  ['max_tokens', 'int'], ['max_iterations', 'int'],
];

// Check the envelope and payload of a parsed line; return {seq, kind, payload}.
// Throws a plain Error with a `field` property (the caller adds the place).
function checkRecord(obj) {
  const fail = (field, message) => Object.assign(new Error(message), { field });
  const keys = Object.keys(obj);
  const protocol = obj.protocol;
  if (typeof protocol !== 'string') throw fail('protocol', 'missing or non-string protocol');
  const kind = KIND_OF[protocol];
  if (!kind) throw fail('protocol', `unknown protocol ${JSON.stringify(protocol)}`);
  if (!isInt(obj.seq) || obj.seq < 1) throw fail('seq', 'seq must be an int >= 1');
  if (!Object.hasOwn(obj, kind)) throw fail(kind, `protocol ${protocol} without its payload key '${kind}'`);
  const extra = keys.filter((k) => k !== 'seq' && k !== 'protocol' && k !== kind);
  if (extra.length) throw fail(extra[0], `unexpected member '${extra[0]}' in the envelope`);
  const payload = obj[kind];
  if (!isObject(payload)) throw fail(kind, `payload '${kind}' is not an object`);
  if (kind === 'meta' && isInt(payload.version) && payload.version > VERSION) {
    throw Object.assign(new UnsupportedVersion(
      `journal version ${payload.version} is newer than the newest this agent reads (${VERSION})`), { field: 'meta.version' });
  }
  for (const [name, test, required, what] of FIELDS[kind]) {
    if (!Object.hasOwn(payload, name)) {
      if (required) throw fail(`${kind}.${name}`, `required field ${kind}.${name} is missing`);
      continue;
    }
    if (!test(payload[name])) throw fail(`${kind}.${name}`, `${kind}.${name} must be ${what}`);
  }
  if (kind === 'meta') {
    if (payload.version < 1) throw fail('meta.version', 'meta.version must be 1 or 2');
    for (const [name, type] of FP_FIELDS) {
      const v = payload.fingerprint[name];
      if (type === 'string' ? typeof v !== 'string' : !isInt(v)) {
        throw fail(`meta.fingerprint.${name}`, `meta.fingerprint.${name} must be ${type === 'string' ? 'a string' : 'an int'}`);
      }
    }
  }
  if (kind === 'tool_result' && payload.result.tool_use_id !== payload.tool_use_id) {
    throw fail('tool_result.result.tool_use_id', 'result.tool_use_id differs from the record\'s tool_use_id');
  }
  return { seq: obj.seq, kind, payload };
}

// ---------------------------------------------------------------------------
// Reading a whole journal

// Read a journal's bytes (Buffer).  Returns {records, tornTail, goodSize, lines}:
// `records` the complete valid records in order (each {seq, kind, payload, line, offset}),
// `tornTail` null or {offset, length} (a final segment without "\n", or a final
// line that is not a JSON object at all: an append that never completed),
// `goodSize` the byte length of the complete valid lines (where a writer cuts to).
// Throws CorruptJournal / UnsupportedVersion naming path, line and byte offset.
export function readJournal(bytes, path = null) {
  const records = [];
  let offset = 0;
  let lineNo = 0;
  let tornTail = null;
  while (offset < bytes.length) {
    lineNo += 1;
    const nl = bytes.indexOf(0x0a, offset);
    if (nl < 0) {
      tornTail = { offset, length: bytes.length - offset };
      break;
    }
    const isLast = nl + 1 === bytes.length;
    const line = bytes.subarray(offset, nl);
    if (bug('nul-block-ends-journal') && line[0] === 0) { // the bug: zeros are where the journal ends
      tornTail = { offset, length: bytes.length - offset };
      break;
    }
    const where = { path, line: lineNo, offset };
    if (line.length + 1 > MAX_RECORD_BYTES) {
      if (isLast) { tornTail = { offset, length: bytes.length - offset }; break; }
      throw new CorruptJournal(`line of ${line.length + 1} bytes is over the record limit of ${MAX_RECORD_BYTES}`, where);
    }
    let obj;
    try {
      obj = parseObject(line);
    } catch (e) {
      if (isLast) { tornTail = { offset, length: bytes.length - offset }; break; }
      if (bug('reader-tolerates-corruption')) { offset = nl + 1; continue; } // the bug: skip it, read on
      throw new CorruptJournal(`unreadable line (${e.message}) before the end of the journal`, where);
    }
    let rec;
    try {
      rec = checkRecord(envelope ? unwrap(obj) : obj);
    } catch (e) {
      if (e instanceof UnsupportedVersion) { Object.assign(e, where); throw e; }
      throw new CorruptJournal(`field '${e.field}': ${e.message}`, where);
    }
    rec.line = lineNo;
    rec.offset = offset;
    records.push(rec);
    offset = nl + 1;
  }
  return { records, tornTail, goodSize: tornTail ? tornTail.offset : bytes.length, lines: records.length };
}
