// The fold: records in journal order -> the run's state (docs/spec.md section 8).
// Pure: no IO, no clock.  The agent resumes from this state and `status`
// prints it.

import { ConsistencyError, UnsupportedVersion } from './errors.mjs';
import { VERSION } from './codec.mjs';
import { bug } from './bugs.mjs';

// Every status but completed is resumed (docs/spec.md section 12, rule 2, as fisk-ai v2): a leg that ended
// with error, budget or max_iterations ends the same way again when its reason still holds.
export const RESUMABLE = new Set(['open', 'suspended', 'error', 'budget', 'max_iterations']);

const toolUseIds = (message) => (Array.isArray(message.content) ? message.content : [])
  .filter((b) => b && typeof b === 'object' && b.type === 'tool_use' && typeof b.id === 'string')
  .map((b) => b.id);

const blocksOf = (content) => (typeof content === 'string' ? [{ type: 'text', text: content }] : content);

export class Folder {
  constructor(path = null) {
    this.path = path;
    this.meta = null;
    this.messages = [];
    this.current = null; // {iteration, message, ids, results: [], answered: Set}
    this.counters = { llm_calls: 0, tool_calls: 0, remote_tool_calls: 0, in_tokens: 0, out_tokens: 0,
      cache_read_tokens: 0, cache_create_tokens: 0 };
    this.nextIteration = 0;
    this.lastStopReason = null;
    this.terminal = null;
    this.lastIsTerminal = false;
    this.status = 'open';
    this.lastSeq = 0;
    this.records = 0;
  }

  fail(rec, message, field = null) {
    const e = new ConsistencyError(field ? `field '${field}': ${message}` : message,
      { path: this.path, line: rec.line ?? this.records + 1, offset: rec.offset ?? null });
    e.field = field;
    return e;
  }

  // Throw ConsistencyError when record `rec` ({seq, kind, payload, line?, offset?}) would break
  // a fold rule here; changes nothing.  The writer calls it before it writes a byte.
  check(rec) {
    const p = rec.payload;
    if (this.meta === null) {
      if (rec.kind !== 'meta') throw this.fail(rec, 'the first record is not meta');
      if (rec.seq !== 1) throw this.fail(rec, `meta has seq ${rec.seq}, not 1`, 'seq');
      if (p.version > VERSION) throw new UnsupportedVersion(`journal version ${p.version} is newer than ${VERSION}`);
      return;
    }
    if (rec.kind === 'meta') throw this.fail(rec, 'duplicate meta record');
    if (rec.seq <= this.lastSeq) throw this.fail(rec, `seq ${rec.seq} repeated (last was ${this.lastSeq})`, 'seq');
    if (rec.seq > this.lastSeq + 1) throw this.fail(rec, `seq ${rec.seq} skips ahead (last was ${this.lastSeq})`, 'seq');
    // rule 7: only a completed run is never continued; every other terminal ends one leg
    const ended = bug('ended-leg-not-resumable') ? this.terminal?.reason !== 'suspended' : this.terminal?.reason === 'completed';
    if (this.lastIsTerminal && ended && !(bug('completed-new-turn') && rec.kind === 'user')) {
      throw this.fail(rec, `a record after the run ended (${this.terminal.reason})`);
    }
    const cur = this.current;
    if (rec.kind === 'assistant' || rec.kind === 'user') { // both commit the current turn
      const missing = cur ? cur.ids.filter((id) => !cur.answered.has(id)) : [];
      if (missing.length) {
        throw this.fail(rec, `the turn of iteration ${cur.iteration} still has unanswered tool_use ids: ${missing.join(', ')}`);
      }
    }
    if (rec.kind === 'assistant') {
      const ids = toolUseIds(p.message);
      if (new Set(ids).size !== ids.length) throw this.fail(rec, 'the message repeats a tool_use id', 'assistant.message');
    } else if (rec.kind === 'tool_result') {
      const field = 'tool_result.tool_use_id';
      if (cur === null) throw this.fail(rec, 'tool_result with no open assistant turn', field);
      if (!cur.ids.includes(p.tool_use_id)) throw this.fail(rec, `orphan tool_result for ${p.tool_use_id}`, field);
      if (cur.answered.has(p.tool_use_id)) throw this.fail(rec, `duplicate tool_result for ${p.tool_use_id}`, field);
    } else if (rec.kind !== 'user' && rec.kind !== 'terminal') {
      throw this.fail(rec, `unknown record kind ${rec.kind}`);
    }
  }

  // Apply one record; throws ConsistencyError (and changes nothing) when it breaks a rule.
  add(rec) {
    this.check(rec);
    const p = rec.payload;
    const c = this.counters;
    switch (rec.kind) {
      case 'meta':
        this.meta = p;
        if (typeof p.prompt === 'string' && p.prompt !== '') {
          this.messages.push({ role: 'user', content: [{ type: 'text', text: p.prompt }] });
        }
        break;
      case 'assistant':
        this.commit();
        this.current = { iteration: p.iteration, message: p.message, ids: toolUseIds(p.message), results: [], answered: new Set() };
        this.lastStopReason = p.stop_reason ?? null;
        this.nextIteration = p.iteration + 1;
        c.llm_calls += 1;
        c.in_tokens += p.in_tokens;
        c.out_tokens += p.out_tokens;
        c.cache_read_tokens += p.cache_read_tokens ?? 0;
        c.cache_create_tokens += p.cache_create_tokens ?? 0;
        break;
      case 'tool_result':
        this.current.answered.add(p.tool_use_id);
        this.current.results.push(p.result);
        c.tool_calls += 1;
        if (p.remote === true) c.remote_tool_calls += 1;
        break;
      case 'user': {
        this.commit();
        const last = this.messages[this.messages.length - 1];
        if (last && last.role === 'user') { // roles alternate: merge into the last user message
          this.messages[this.messages.length - 1] = { ...last, content: [...blocksOf(last.content), ...blocksOf(p.message.content)] };
        } else {
          this.messages.push(p.message);
        }
        break;
      }
      default: // terminal
        this.terminal = { reason: p.reason, message: p.message ?? null, seq: rec.seq };
    }
    this.lastSeq = rec.seq;
    this.records += 1;
    this.lastIsTerminal = rec.kind === 'terminal';
    if (rec.kind === 'terminal') {
      this.status = p.reason;
    } else if (!bug('status-stays-suspended')) {
      this.status = 'open'; // a resumed run is open again until its next terminal record
    }
  }

  // Commit the current (fully answered: check() saw to it) turn into the conversation.
  commit() {
    const cur = this.current;
    if (cur === null) return;
    this.messages.push(cur.message);
    if (cur.results.length) this.messages.push({ role: 'user', content: [...cur.results] });
    this.current = null;
  }

  // The state after the records so far.  The current turn is committed when every id
  // is answered, else it is the pending turn (not part of `messages`).
  state() {
    const messages = [...this.messages];
    let pending = null;
    const cur = this.current;
    if (cur !== null) {
      const unanswered = cur.ids.filter((id) => !cur.answered.has(id));
      if (unanswered.length === 0) {
        messages.push(cur.message);
        if (cur.results.length) messages.push({ role: 'user', content: [...cur.results] });
      } else {
        pending = { iteration: cur.iteration, assistant: cur.message, results: [...cur.results],
          answered: cur.ids.filter((id) => cur.answered.has(id)), unanswered, ids: [...cur.ids] };
      }
    }
    const c = this.counters;
    return {
      meta: this.meta,
      runId: this.meta?.run_id ?? null,
      interactive: this.meta?.interactive === true,
      fingerprint: this.meta?.fingerprint ?? null,
      messages,
      counters: { ...c },
      totalTokens: c.in_tokens + c.out_tokens + c.cache_read_tokens + c.cache_create_tokens,
      nextIteration: this.nextIteration,
      lastStopReason: this.lastStopReason,
      pending,
      terminal: this.terminal,
      status: this.status,
      lastSeq: this.lastSeq,
      records: this.records,
    };
  }
}

export function fold(records, path = null) {
  const f = new Folder(path);
  for (const rec of records) f.add(rec);
  return f;
}
