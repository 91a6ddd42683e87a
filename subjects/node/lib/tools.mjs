// Command tools from a --tools JSON file: [{name, description, input_schema,
// command: [argv...], timeout_seconds?}].  A tool runs `command` with the tool
// input as JSON on standard input; its standard output is the result, a
// non-zero exit an error result.  Running a tool never throws: every failure
// is an error result the model sees.

import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { UsageError } from './errors.mjs';

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export class Tools {
  constructor(entries = []) {
    this.entries = entries;
    this.byName = new Map(entries.map((t) => [t.name, t]));
  }

  // What the model is told (and what the fingerprint's tools_hash covers).
  definitions() {
    return this.entries.map(({ name, description, input_schema }) => ({ name, description, input_schema }));
  }

  get size() { return this.entries.length; }

  // Run tool `name`; resolves to {content, isError}.
  async run(name, input, { toolUseId = '', runId = '' } = {}) {
    const tool = this.byName.get(name);
    if (!tool) return { content: `unknown tool ${JSON.stringify(name)}; available: ${[...this.byName.keys()].join(', ') || 'none'}`, isError: true };
    return runCommand(tool, input, { toolUseId, runId });
  }
}

function runCommand(tool, input, { toolUseId, runId }) {
  const env = { ...process.env, FISKJ_TOOL_NAME: tool.name, FISKJ_TOOL_USE_ID: toolUseId, FISKJ_RUN_ID: runId };
  const [cmd, ...args] = tool.command;
  return new Promise((resolve) => {
    let child;
    try {
      // Its own session: a Ctrl-C meant for the agent (a suspend) does not reach the tool.
      child = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    } catch (e) {
      resolve({ content: `command tool ${JSON.stringify(tool.name)} could not start ${JSON.stringify(cmd)}: ${e.code || e.message}`, isError: true });
      return;
    }
    const out = [];
    const err = [];
    let timer = null;
    let timedOut = false;
    let settled = false;
    const done = (result) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      resolve(result);
    };
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => err.push(c));
    child.stdin.on('error', () => { /* the tool did not read its input: its exit tells */ });
    child.on('error', (e) => done({ content: `command tool ${JSON.stringify(tool.name)} could not start ${JSON.stringify(cmd)}: ${e.code || e.message}`, isError: true }));
    child.on('close', (code, signal) => {
      const stdout = Buffer.concat(out).toString('utf8');
      if (timedOut) { done({ content: `command tool ${JSON.stringify(tool.name)} timed out after ${tool.timeout_seconds} s`, isError: true }); return; }
      if (code === 0) { done({ content: stdout, isError: false }); return; }
      const stderr = Buffer.concat(err).toString('utf8');
      const how = signal ? `was killed by ${signal}` : `exited with status ${code}`;
      done({ content: stderr || stdout || `command tool ${JSON.stringify(tool.name)} ${how}`, isError: true });
    });
    if (tool.timeout_seconds) {
      timer = setTimeout(() => { timedOut = true; try { process.kill(-child.pid, 'SIGKILL'); } catch { child.kill('SIGKILL'); } }, tool.timeout_seconds * 1000);
    }
    child.stdin.end(Buffer.from(JSON.stringify(input ?? {}), 'utf8'));
  });
}

// Load the --tools file; UsageError (exit 2) naming the file and the entry on any problem.
export function loadTools(file) {
  if (!file) return new Tools([]);
  let data;
  try {
    data = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    const why = e.code ? e.code : `not valid JSON (${e.message})`;
    throw new UsageError(`cannot read the tools file: ${why}`, { path: file });
  }
  if (!Array.isArray(data)) throw new UsageError('the tools file must hold a JSON list of tool definitions', { path: file });
  const seen = new Set();
  const entries = data.map((e, i) => {
    const where = `tool ${i}`;
    if (e === null || typeof e !== 'object' || Array.isArray(e)) throw new UsageError(`${where} is not an object`, { path: file });
    const { name, description, input_schema: schema, command, timeout_seconds: timeout } = e;
    if (typeof name !== 'string' || !NAME.test(name)) throw new UsageError(`${where}: 'name' must be 1-64 of [a-zA-Z0-9_-]`, { path: file });
    if (seen.has(name)) throw new UsageError(`${where}: tool ${JSON.stringify(name)} is defined twice`, { path: file });
    seen.add(name);
    if (typeof description !== 'string') throw new UsageError(`${where} (${name}): 'description' must be a string`, { path: file });
    if (schema === null || typeof schema !== 'object' || schema.type !== 'object') {
      throw new UsageError(`${where} (${name}): 'input_schema' must be a JSON Schema object with type 'object'`, { path: file });
    }
    if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string' && a)) {
      throw new UsageError(`${where} (${name}): 'command' must be a non-empty list of strings (argv)`, { path: file });
    }
    if (timeout !== undefined && !(typeof timeout === 'number' && timeout > 0)) {
      throw new UsageError(`${where} (${name}): 'timeout_seconds' must be a positive number`, { path: file });
    }
    return { name, description, input_schema: schema, command, timeout_seconds: timeout };
  });
  return new Tools(entries);
}
