#!/usr/bin/env node
// The foreign subject: an agent that honours docs/subject.md and writes and
// reads its own fisk-ai v2 journal, written from scratch in JavaScript
// (Node.js 20, no dependencies).  See README.md.
//
//   node agent.mjs run --checkpoint --name ID --model M --base-url URL --tools FILE \
//       --max-tokens N --max-iterations N [--chat] -- PROMPT
//   node agent.mjs run --resume ID [--force] --model M --base-url URL --tools FILE \
//       --max-tokens N --max-iterations N
//   node agent.mjs status ID
//   node agent.mjs session [--state-dir D] show ID      (text, as fisk-ai prints it)
//
// Exit: 0 completed, 3 suspended, 1 error (also budget, max_iterations, locked,
// missing run), 2 usage error or refused resume.  With AGENT_EXIT_STYLE=fisk-ai it
// exits as fisk-ai's command line does: 0 also on a suspend, 1 also on a refusal.
// --config FILE gives the configuration flags' defaults as one JSON object.

import { suspendFlag } from './lib/signals.mjs'; // first: signals set a flag from here on
import fs from 'node:fs';
import path from 'node:path';
import { bug, configureBugs } from './lib/bugs.mjs';
import { configureFormat } from './lib/codec.mjs';
import { acquireLock, releaseLock } from './lib/lock.mjs';
import { AgentError, RunNotFound, UsageError } from './lib/errors.mjs';
import { Store, defaultStoreDir, journalName, loadJournal, validateRunId } from './lib/store.mjs';
import { loadTools } from './lib/tools.mjs';
import { ModelClient, DEFAULT_BASE_URL } from './lib/model.mjs';
import { Config, LineReader, exitCodeFor, resumeRun, startRun, DEFAULT_CALL_MAX_TOKENS } from './lib/loop.mjs';

const USAGE = `usage:
  agent.mjs run --checkpoint --name ID --model M [--base-url URL] [--tools FILE] [--system FILE] [--thinking MODE]
                [--max-tokens N] [--max-iterations N] [--call-max-tokens N] [--chat] [-q] -- PROMPT
  agent.mjs run --resume ID [--force] [--model M] [--base-url URL] [--tools FILE] [--system FILE] [--thinking MODE]
                [--max-tokens N] [--max-iterations N] [-q]
  agent.mjs status ID
  agent.mjs session [--state-dir D] show ID
  (--config FILE: a JSON object {model, tools, max_tokens, max_iterations, base_url} of defaults)
exit status: 0 completed, 3 suspended, 1 error, 2 usage error or refused resume
  (AGENT_EXIT_STYLE=fisk-ai: 0 completed or suspended, 1 error or refused)`;

const VALUE_FLAGS = new Set(['--name', '--resume', '--model', '--base-url', '--tools', '--system', '--max-tokens',
  '--max-iterations', '--call-max-tokens', '--timeout', '--config', '--thinking']);
const BOOL_FLAGS = new Set(['--checkpoint', '--force', '--chat', '--quiet', '-q']);

// --config FILE: a JSON object of defaults for the configuration flags, as agents that take their model and
// tools from a configuration file do ({"model", "tools", "max_tokens", "max_iterations", "base_url"}).
function applyConfigFile(opts) {
  if (opts.config === undefined) return;
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(opts.config, 'utf8'));
  } catch (e) {
    throw new UsageError(`cannot read the --config file: ${e.code || e.message}`, { path: opts.config });
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new UsageError('--config: not a JSON object');
  for (const [key, flag] of [['model', 'model'], ['tools', 'tools'], ['max_tokens', 'max-tokens'],
    ['max_iterations', 'max-iterations'], ['base_url', 'base-url']]) {
    if (opts[flag] === undefined && doc[key] !== undefined) opts[flag] = String(doc[key]);
  }
}

function parseRunArgs(argv) {
  const opts = {};
  const prompt = [];
  for (let i = 0; i < argv.length; i += 1) {
    let arg = argv[i];
    if (arg === '--') { prompt.push(...argv.slice(i + 1)); break; }
    let value = null;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) { value = arg.slice(eq + 1); arg = arg.slice(0, eq); }
    if (VALUE_FLAGS.has(arg)) {
      if (value === null) {
        if (i + 1 >= argv.length) throw new UsageError(`${arg} needs a value`);
        value = argv[++i];
      }
      opts[arg.slice(2)] = value;
    } else if (BOOL_FLAGS.has(arg) && value === null) {
      opts[arg === '-q' ? 'quiet' : arg.slice(2)] = true;
    } else if (arg.startsWith('-') && arg !== '-') {
      throw new UsageError(`unknown option ${arg}`);
    } else {
      prompt.push(arg);
    }
  }
  applyConfigFile(opts);
  for (const name of ['max-tokens', 'max-iterations', 'call-max-tokens', 'timeout']) {
    if (opts[name] === undefined) continue;
    const n = Number(opts[name]);
    if (!/^[0-9]+$/.test(opts[name]) || !Number.isSafeInteger(n) || n < 1) {
      throw new UsageError(`--${name} must be a positive integer, got ${JSON.stringify(opts[name])}`);
    }
    opts[name] = n;
  }
  if (opts.resume !== undefined) {
    const extra = [['PROMPT', prompt.length], ['--checkpoint', opts.checkpoint], ['--name', opts.name !== undefined],
      ['--chat', opts.chat]].filter(([, on]) => on).map(([f]) => f);
    if (extra.length) throw new UsageError(`--resume takes no ${extra.join(', ')}: the journal holds them`);
  } else {
    if (opts.force) throw new UsageError('--force only applies to a resume (run --resume ID --force)');
    if (!opts.checkpoint) throw new UsageError('this agent only runs checkpointed runs: pass --checkpoint');
    if (!prompt.join(' ').trim()) throw new UsageError('a PROMPT is required (after --)');
    if (!opts.model) throw new UsageError('--model is required');
  }
  if (opts.thinking !== undefined && !/^(off|adaptive|enabled:[0-9]+)$/.test(opts.thinking)) {
    throw new UsageError(`--thinking must be off, adaptive or enabled:N, got ${JSON.stringify(opts.thinking)}`);
  }
  return { opts, prompt: prompt.join(' ') };
}

function readSystem(file) {
  if (file === undefined) return '';
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read the --system file: ${e.code || e.message}`, { path: file });
  }
}

function newRunId() {
  const d = new Date();
  const p = (n) => String(n).padStart(2, '0');
  const hex = Math.floor(Math.random() * 0x1000000).toString(16).padStart(6, '0');
  return `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}-${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}-${hex}`;
}

async function runCommand(argv) {
  const { opts, prompt } = parseRunArgs(argv);
  const quiet = Boolean(opts.quiet);
  const log = (line) => { if (!quiet) process.stderr.write(`${line}\n`); };
  const out = (text) => { try { process.stdout.write(`${text}\n`); } catch { /* output is best effort */ } };
  const tools = loadTools(opts.tools);
  const system = readSystem(opts.system);
  const store = new Store(defaultStoreDir());
  const model = new ModelClient(opts['base-url'] || process.env.ANTHROPIC_BASE_URL || DEFAULT_BASE_URL,
    process.env.ANTHROPIC_API_KEY, { timeoutMs: (opts.timeout ?? 120) * 1000 });
  const makeConfig = (stored = null) => new Config({
    model: opts.model ?? stored?.model,
    system,
    maxTokens: opts['max-tokens'] ?? stored?.max_tokens,
    maxIterations: opts['max-iterations'] ?? stored?.max_iterations,
    thinkingMode: opts.thinking ?? stored?.thinking_mode ?? 'off',
    callMaxTokens: opts['call-max-tokens'] ?? DEFAULT_CALL_MAX_TOKENS,
    tools,
  });
  // Chat follow-ups; stdin is touched only when the run needs one (the chat flag of a resume is in the journal).
  const input = new LazyLines(process.stdin, suspendFlag);
  const io = { model, tools, suspend: suspendFlag, input, out, log };
  let result;
  if (opts.resume !== undefined) {
    result = await resumeRun({ store, runId: opts.resume, force: Boolean(opts.force), configFor: makeConfig, ...io });
  } else {
    const runId = opts.name ?? newRunId();
    result = await startRun({ store, runId, prompt, config: makeConfig(), interactive: Boolean(opts.chat), ...io });
  }
  if (result.reason === 'suspended') process.stderr.write(`run suspended; resume with: run --resume ${opts.resume ?? opts.name}\n`);
  else if (result.reason !== 'completed' && quiet) process.stderr.write(`agent: run ended: ${result.reason}: ${result.message}\n`);
  return exitCodeFor(result.reason);
}

// A LineReader that attaches to the stream on the first read only (a non-chat run never touches stdin).
class LazyLines {
  constructor(stream, flag) { this.stream = stream; this.flag = flag; this.reader = null; }

  next() {
    this.reader ??= new LineReader(this.stream, this.flag);
    return this.reader.next();
  }
}

// The agent's own fold of run ID's journal in store DIR, read as a reader reads it (no lock).
function readRun(runId, dir) {
  validateRunId(runId);
  if (bug('reader-locks')) releaseLock(acquireLock(path.join(dir, `${runId}.lock`), runId));
  return loadJournal(path.join(dir, journalName(runId)), runId).folder.state();
}

function blocksText(content) {
  return typeof content === 'string' ? content : content.filter((b) => b?.type === 'text').map((b) => b.text).join('');
}

function statusCommand(argv) {
  if (argv.length !== 1) throw new UsageError('usage: agent.mjs status ID');
  let s;
  try {
    s = readRun(argv[0], defaultStoreDir());
  } catch (e) { // AGENT_STORE=opaque (subjects/node/opaque.toml): no such run reads as status null
    if (!(e instanceof RunNotFound) || process.env.AGENT_STORE !== 'opaque') throw e;
    process.stdout.write(`${JSON.stringify({ status: null, tool_results: [], answer: null })}\n`);
    return 0;
  }
  const out = { status: s.status, records: s.records, last_seq: s.lastSeq,
    pending: s.pending ? s.pending.unanswered : null, next_iteration: s.nextIteration };
  if (process.env.AGENT_STORE === 'opaque') { // what its saved state holds: results and a completed run's answer
    const blocks = [...s.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])), ...(s.pending?.results ?? [])];
    const last = s.messages.filter((m) => m.role === 'assistant').at(-1);
    out.tool_results = blocks.filter((b) => b?.type === 'tool_result').map((b) => b.tool_use_id);
    out.answer = s.status === 'completed' && last ? blocksText(last.content) : null;
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  return 0;
}

// fisk-ai's `session [--state-dir D] show ID`: the same fold as text lines (subjects/fisk-ai/profile.toml [reading]).
function sessionCommand(argv) {
  const dir = argv[0] === '--state-dir' ? argv[1] : undefined;
  const rest = dir === undefined ? argv : argv.slice(2);
  if (rest.length !== 2 || rest[0] !== 'show' || dir === '') {
    throw new UsageError('usage: agent.mjs session [--state-dir D] show ID');
  }
  const s = readRun(rest[1], dir ?? defaultStoreDir());
  const c = s.counters;
  process.stdout.write([`Session ${rest[1]}`, `Status: ${s.status}`, `Model: ${s.fingerprint?.model ?? ''}`,
    `Next iter: ${s.nextIteration}`, `LLM calls: ${c.llm_calls}`,
    `Tool calls: ${c.tool_calls} (remote ${c.remote_tool_calls})`, `Tokens: ${c.in_tokens} in / ${c.out_tokens} out`,
    `Prompt: ${s.meta?.prompt ?? ''}`, ''].join('\n'));
  return 0;
}

async function main(argv) {
  // Output is best effort (a reader that went away must not end a durable run); the journal is the record.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  const bugError = configureBugs() || configureFormat();
  if (bugError) {
    process.stderr.write(`agent: ${bugError}\n`);
    return 2;
  }
  const [command, ...rest] = argv;
  if (command === 'run') return runCommand(rest);
  if (command === 'status') return statusCommand(rest);
  if (command === 'session') return sessionCommand(rest);
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  throw new UsageError(command ? `unknown command ${JSON.stringify(command)}\n${USAGE}` : USAGE);
}

let code;
try {
  code = await main(process.argv.slice(2));
} catch (e) {
  if (e instanceof AgentError) {
    process.stderr.write(`agent: ${e.name}: ${e.describe()}\n`);
    code = e.exitCode;
  } else {
    process.stderr.write(`agent: internal error: ${e?.name ?? 'Error'}: ${e?.message ?? e}\n`);
    code = 1;
  }
}
// AGENT_EXIT_STYLE=fisk-ai: exit as fisk-ai's command line does (0 on a suspend, 1 on a refused resume).
if (process.env.AGENT_EXIT_STYLE === 'fisk-ai') code = { 3: 0, 2: 1 }[code] ?? code;
process.exit(code);
