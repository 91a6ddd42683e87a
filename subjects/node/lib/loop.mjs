// The agent loop: start a journaled run, suspend it at a loop boundary, resume it.
//
// 1. A boundary is the top of an iteration, where nothing is in flight.  Only
//    there is a suspend honoured (terminal `suspended`, exit 3), and there the
//    iteration cap is checked (terminal `max_iterations`).
// 2. The model is called with the committed conversation; its turn is
//    journaled as an assistant record BEFORE any of its tools runs.
// 3. stop_reason `max_tokens` or `refusal`, or a model error: terminal `error`.
//    A turn without tool_use blocks (and not `pause_turn`) is the answer: the
//    run completes, or a chat run reads one follow-up line from stdin and
//    journals it as a user record (end of input suspends).  Before a turn's
//    tools run, the token budget is checked (terminal `budget`).
// 4. The tools run in tool_use order; each result is journaled the moment its
//    tool returns.  The next request carries one user message of all results.
// 5. Every end of a leg appends exactly one terminal record.
// 6. Resume: lock, fold, refuse an ended run or a changed fingerprint (unless
//    --force) before appending anything, settle the last journaled turn (run
//    only the unanswered tools of a pending batch; an answer whose terminal
//    was never written completes without a model call), then continue at
//    next_iteration with the counters of the fold.

import { ModelError, StoreError, ResumeRefused, FingerprintMismatch } from './errors.mjs';
import { RESUMABLE } from './fold.mjs';
import { diffFingerprints, makeFingerprint } from './fingerprint.mjs';
import { VERSION } from './codec.mjs';
import { bug } from './bugs.mjs';

export const DEFAULT_MAX_TOKENS = 200_000;
export const DEFAULT_MAX_ITERATIONS = 25;
export const DEFAULT_CALL_MAX_TOKENS = 4096;

// How a leg ends: the terminal record it writes.
class End {
  constructor(reason, message = null) {
    this.reason = reason;
    this.message = message;
  }
}

export const exitCodeFor = (reason) => ({ completed: 0, suspended: 3 }[reason] ?? 1);

const answerText = (message) => (typeof message.content === 'string' ? message.content
  : (message.content || []).filter((b) => b && b.type === 'text').map((b) => b.text ?? '').join(''));

// RFC 3339 with milliseconds and the local numeric offset.
export function rfc3339(date = new Date()) {
  const pad = (n, w = 2) => String(Math.abs(n)).padStart(w, '0');
  const off = -date.getTimezoneOffset();
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:`
    + `${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`
    + `${off < 0 ? '-' : '+'}${pad(Math.trunc(off / 60))}:${pad(off % 60)}`;
}

export class Config {
  constructor({ model, system = '', maxTokens = DEFAULT_MAX_TOKENS, maxIterations = DEFAULT_MAX_ITERATIONS,
    callMaxTokens = DEFAULT_CALL_MAX_TOKENS, tools, thinkingMode = 'off' }) {
    Object.assign(this, { model, system, maxTokens, maxIterations, callMaxTokens, tools, thinkingMode });
  }

  fingerprint() {
    return makeFingerprint({ model: this.model, system: this.system, tools: this.tools.definitions(), thinkingMode: this.thinkingMode,
      maxTokens: this.maxTokens, maxIterations: this.maxIterations });
  }

  // withThinking false: no `thinking` parameter whatever the mode (a forced resume under another mode that
  // continues a tool loop whose turn has no thinking block: the API refuses thinking then).
  request(messages, { withThinking = true } = {}) {
    const body = { model: this.model, max_tokens: this.callMaxTokens, messages };
    if (this.system) body.system = this.system;
    if (!withThinking) { /* leave it out */ } else if (this.thinkingMode === 'adaptive') body.thinking = { type: 'adaptive' };
    else if (this.thinkingMode.startsWith('enabled:')) {
      body.thinking = { type: 'enabled', budget_tokens: Number(this.thinkingMode.slice('enabled:'.length)) };
    }
    if (this.tools.size) body.tools = this.tools.definitions();
    return body;
  }
}

// Chat follow-ups: standard input, one per line; null at end of input or on a suspend.
export class LineReader {
  constructor(stream, flag) {
    this.flag = flag;
    this.lines = [];
    this.partial = '';
    this.ended = false;
    this.notify = null;
    stream.setEncoding('utf8');
    stream.on('data', (chunk) => {
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop();
      this.lines.push(...parts);
      this.wake();
    });
    const end = () => {
      if (this.partial) this.lines.push(this.partial);
      this.partial = '';
      this.ended = true;
      this.wake();
    };
    stream.on('end', end);
    stream.on('error', end);
  }

  wake() {
    const n = this.notify;
    this.notify = null;
    if (n) n();
  }

  async next() {
    for (;;) {
      if (this.flag.requested) return null;
      if (this.lines.length) return this.lines.shift().replace(/\r$/, '');
      if (this.ended) return null;
      await new Promise((resolve) => {
        this.notify = resolve;
        this.flag.wakers.add(resolve);
      });
    }
  }
}

class Run {
  constructor({ journal, state, config, model, tools, suspend, input, out, log }) {
    Object.assign(this, { journal, config, model, tools, suspend, input, out, log });
    this.runId = state.runId;
    this.interactive = state.interactive;
    this.messages = [...state.messages];
    this.tokens = state.totalTokens;
    this.iteration = state.nextIteration;
    if (bug('pending-turn-not-counted') && state.pending) this.iteration = Math.max(0, state.nextIteration - 1);
    this.resumed = state.records > 1;
    this.answer = null;
    // The turns before this index were journaled by earlier legs; a resume under another model or thinking
    // mode (--force) must not send thinking with a tool loop whose turn in flight did not think.
    this.inherited = this.messages.length + (state.pending ? 1 : 0);
    const fp = state.fingerprint || {};
    this.changed = this.resumed && (fp.model !== config.model || fp.thinking_mode !== config.thinkingMode);
  }

  requestBody() {
    let messages = this.messages;
    if (bug('thinking-stripped-on-resume') && this.resumed) {
      messages = messages.map((m, i) => (i < this.inherited && m.role === 'assistant' && Array.isArray(m.content)
        ? { ...m, content: m.content.filter((b) => b?.type !== 'thinking' && b?.type !== 'redacted_thinking') } : m));
    }
    let withThinking = true;
    const n = messages.length;
    if (this.changed && n >= 2 && messages[n - 1].role === 'user' && Array.isArray(messages[n - 1].content)
        && messages[n - 1].content.some((b) => b?.type === 'tool_result')) {
      const first = Array.isArray(messages[n - 2].content) ? messages[n - 2].content[0] : null;
      withThinking = first?.type === 'thinking' || first?.type === 'redacted_thinking';
    }
    return this.config.request(messages, { withThinking });
  }

  async drive(state) {
    try {
      await this.settleState(state);
      for (;;) {
        this.boundary();
        const [message, stop] = await this.callModel();
        await this.settle(message, stop, { fresh: true });
      }
    } catch (e) {
      if (e instanceof End) { // rule 5: exactly one terminal record
        const payload = { reason: e.reason };
        if (e.message) payload.message = e.message;
        const skip = e.reason === 'completed' && (bug('completed-never-written') || (bug('resume-skips-completed') && this.resumed));
        if (!skip) {
          this.journal.append('terminal', payload);
        }
        this.log(`run ${this.runId} ended: ${e.reason}${e.message ? ` (${e.message})` : ''}`);
        return { reason: e.reason, message: e.message, answer: this.answer };
      }
      if (e instanceof StoreError) throw e; // the journal refuses appends: no terminal can be written
      try {
        this.journal.append('terminal', { reason: 'error', message: `internal error: ${e?.message ?? e}` });
      } catch { /* the original error is what matters */ }
      throw e;
    }
  }

  // A resume: settle the last journaled turn, if it is not settled yet.
  async settleState(state) {
    if (state.pending) {
      const done = new Map(state.pending.results.map((r) => [r.tool_use_id, r]));
      await this.settle(state.pending.assistant, state.lastStopReason, { done, fresh: false });
    } else if (this.messages.length && this.messages[this.messages.length - 1].role === 'assistant') {
      const last = this.messages.pop();
      const final = !(Array.isArray(last.content) && last.content.some((b) => b?.type === 'tool_use'));
      if (bug('recall-after-final-answer') && final) return; // the journaled answer is ignored: ask again
      await this.settle(last, state.lastStopReason, { fresh: false });
    }
  }

  boundary() {
    if (this.suspend.requested) throw new End('suspended', `suspended by signal ${this.suspend.signal ?? 'request'}`);
    if (this.iteration >= this.config.maxIterations) {
      throw new End('max_iterations', `reached the iteration cap of ${this.config.maxIterations}`);
    }
  }

  async callModel() {
    let response;
    try {
      response = await this.model.complete(this.requestBody());
    } catch (e) {
      if (e instanceof ModelError) throw new End('error', `model error: ${e.message}`);
      throw e;
    }
    const usage = bug('drops-cache-usage') ? { input_tokens: response.usage.input_tokens, output_tokens: response.usage.output_tokens }
      : response.usage;
    const message = { role: 'assistant', content: response.content };
    const payload = { iteration: this.iteration, message };
    if (typeof response.stop_reason === 'string') payload.stop_reason = response.stop_reason;
    payload.in_tokens = usage.input_tokens;
    payload.out_tokens = usage.output_tokens;
    if (usage.cache_read_input_tokens) payload.cache_read_tokens = usage.cache_read_input_tokens;
    if (usage.cache_creation_input_tokens) payload.cache_create_tokens = usage.cache_creation_input_tokens;
    this.journal.append('assistant', payload); // rule 2: before any tool runs
    this.iteration += 1;
    this.tokens += usage.input_tokens + usage.output_tokens + (usage.cache_read_input_tokens || 0)
      + (usage.cache_creation_input_tokens || 0);
    const calls = message.content.filter((b) => b.type === 'tool_use').length;
    this.log(`iteration ${payload.iteration}: ${payload.stop_reason ?? '-'}, ${calls} tool call(s), ${this.tokens} tokens`);
    return [message, payload.stop_reason ?? null];
  }

  // Rule 3: what a journaled assistant turn means; run its tools (rule 4).
  async settle(message, stop, { done = new Map(), fresh }) {
    if (!fresh && (stop === 'max_tokens' || stop === 'refusal') && bug('cut-off-turn-run-on-resume')) stop = 'tool_use';
    if ((stop === 'max_tokens' || stop === 'refusal') && bug('cut-off-turn-run')) stop = 'tool_use';
    if (stop === 'max_tokens') throw new End('error', 'model reply cut off (stop_reason max_tokens); its tool calls were not run');
    if (stop === 'refusal') throw new End('error', 'the model refused (stop_reason refusal)');
    const blocks = (Array.isArray(message.content) ? message.content : [])
      .filter((b) => b && typeof b === 'object' && b.type === 'tool_use' && typeof b.id === 'string');
    if (blocks.length === 0 && stop !== 'pause_turn') {
      this.messages.push(message);
      this.answer = answerText(message);
      if (fresh || (!this.interactive && !bug('answer-not-printed-on-resume'))) this.out(this.answer);
      if (!this.interactive) throw new End('completed');
      await this.followUp();
      return;
    }
    if (this.tokens > this.config.maxTokens) {
      throw new End('budget', `${this.tokens} tokens used, over the budget of ${this.config.maxTokens}`);
    }
    this.messages.push(message);
    if (blocks.length) this.messages.push({ role: 'user', content: await this.runBatch(blocks, done) });
  }

  // Run the unanswered tools in tool_use order, journaling each result as it returns;
  // reuse the journaled results of the answered ones.
  async runBatch(blocks, done) {
    const results = new Map();
    for (const block of blocks) {
      const id = block.id;
      if (results.has(id)) continue;
      const answered = done.get(id);
      if (answered && !bug('resume-reruns-answered')) {
        results.set(id, answered);
        continue;
      }
      const outcome = await this.tools.run(block.name, block.input ?? {}, { toolUseId: id, runId: this.runId });
      if (answered) { // journaled already: keep that result
        results.set(id, answered);
        continue;
      }
      const result = { type: 'tool_result', tool_use_id: id, content: outcome.content, is_error: outcome.isError };
      this.journal.append('tool_result', { tool_use_id: id, result });
      results.set(id, result);
      this.log(`  tool ${block.name} (${id}): ${outcome.isError ? 'error' : 'ok'}`);
    }
    return [...results.values()];
  }

  // Chat: one non-blank follow-up line, journaled as a user record; end of input suspends.
  async followUp() {
    let line;
    for (;;) {
      line = this.input ? await this.input.next() : null;
      if (line === null) {
        throw new End('suspended', this.suspend.requested ? `suspended by signal ${this.suspend.signal ?? 'request'}` : 'end of input');
      }
      if (line.trim()) break;
    }
    const message = { role: 'user', content: [{ type: 'text', text: line }] };
    this.journal.append('user', { message });
    this.messages.push(message);
  }
}

// Start run `runId` and drive it to its first terminal record.
export async function startRun({ store, runId, prompt, config, interactive, ...io }) {
  const meta = { version: VERSION, run_id: runId, created: rfc3339(), fingerprint: config.fingerprint(), prompt };
  if (interactive) meta.interactive = true;
  const journal = store.create(runId, meta);
  try {
    io.log(`run id: ${runId}`);
    const state = journal.state;
    return await new Run({ journal, state, config, ...io }).drive(state);
  } finally {
    journal.close();
  }
}

// Resume run `runId`: open it (lock, then fold), refuse with nothing appended, continue.
// `configFor(storedFingerprint)` builds the configuration (defaults come from the journal).
export async function resumeRun({ store, runId, force, configFor, ...io }) {
  const journal = store.open(runId);
  try {
    const state = journal.state;
    if (journal.cutTail) io.log(`cut a torn final line of ${journal.cutTail.length} bytes at byte ${journal.cutTail.offset}`);
    const ended = bug('ended-leg-not-resumable') ? new Set(['open', 'suspended']) : RESUMABLE;
    if (state.status === 'completed' && bug('completed-new-turn')) { // one more turn, as Claude Code does
      journal.append('user', { message: { role: 'user', content: [{ type: 'text', text: 'continue' }] } });
      return await new Run({ journal, state: journal.state, config: configFor(state.fingerprint), ...io }).drive(journal.state);
    }
    if (!ended.has(state.status)) {
      throw new ResumeRefused(`run ${runId} is ${JSON.stringify(state.status)}; a ${state.status} run cannot be resumed`);
    }
    const config = configFor(state.fingerprint);
    const changes = diffFingerprints(state.fingerprint, config.fingerprint());
    if (changes.length && !force) {
      throw new FingerprintMismatch(`run ${runId} was started with another configuration: ${changes.join('; ')} `
        + '(pass --force to resume anyway; the system prompt and tools are stored only as hashes: pass the same --tools)');
    }
    if (changes.length) io.log(`resuming despite a changed configuration (--force): ${changes.join('; ')}`);
    const pending = state.pending ? `, pending batch: ${state.pending.answered.length} answered, to run: ${state.pending.unanswered.join(', ')}` : '';
    io.log(`resuming run ${runId}: ${state.status}, ${state.records} records, next iteration ${state.nextIteration}, `
      + `${state.totalTokens} tokens used${pending}`);
    return await new Run({ journal, state, config, ...io }).drive(state);
  } finally {
    journal.close();
  }
}
