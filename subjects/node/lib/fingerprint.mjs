// The resume guard: the six fingerprint fields of meta, and their diff.
// Hashes are lowercase hex SHA-256 of a canonical JSON encoding (object keys
// sorted, no whitespace, UTF-8): the system hash over the prompt as a JSON
// string, the tools hash over the list of tool definitions
// [{name, description, input_schema}] in the order of the --tools file.

import { createHash } from 'node:crypto';
import { bug } from './bugs.mjs';

export const FIELDS = ['model', 'system_hash', 'tools_hash', 'thinking_mode', 'max_tokens', 'max_iterations'];

export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export const sha256Hex = (value) => createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex');

export function makeFingerprint({ model, system, tools, thinkingMode = 'off', maxTokens, maxIterations }) {
  return {
    model,
    system_hash: sha256Hex(system),
    tools_hash: sha256Hex(tools),
    thinking_mode: thinkingMode,
    max_tokens: maxTokens,
    max_iterations: maxIterations,
  };
}

// One line per changed field; empty when they match.
export function diffFingerprints(stored, current) {
  const out = [];
  for (const name of FIELDS) {
    const a = stored?.[name];
    const b = current[name];
    if (a === b) continue;
    if (name === 'system_hash' && bug('fingerprint-ignores-system')) continue; // the bug: this field is not compared
    if (name === 'thinking_mode' && bug('fingerprint-ignores-thinking')) continue;
    if (name === 'system_hash') out.push(`system prompt changed (system_hash ${String(a).slice(0, 12)}... -> ${b.slice(0, 12)}...)`);
    else if (name === 'tools_hash') out.push(`tool set changed (tools_hash ${String(a).slice(0, 12)}... -> ${b.slice(0, 12)}...)`);
    else out.push(`${name}: ${JSON.stringify(a)} -> ${JSON.stringify(b)}`);
  }
  return out;
}
