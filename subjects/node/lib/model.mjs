// The model client: POST {base-url}/v1/messages (Anthropic Messages API) with
// node:http / node:https.  The API key goes in x-api-key and never into the
// journal.  Any failure is a ModelError, which ends the run with `error`.

import http from 'node:http';
import https from 'node:https';
import { ModelError, UsageError } from './errors.mjs';

export const ANTHROPIC_VERSION = '2023-06-01';
export const DEFAULT_BASE_URL = 'https://api.anthropic.com';

const snippet = (text) => {
  const t = String(text).split(/\s+/).join(' ').trim();
  return t.length <= 200 ? t : `${t.slice(0, 200)}...`;
};

// Validate a response body: content (list of objects), stop_reason (string or null),
// usage with non-negative int input_tokens and output_tokens (cache counts optional).
export function checkResponse(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ModelError('model response is not a JSON object');
  if (body.type === 'error') throw new ModelError(`model server returned an error: ${snippet(JSON.stringify(body.error))}`);
  const { content, usage } = body;
  if (!Array.isArray(content) || !content.every((b) => b !== null && typeof b === 'object' && !Array.isArray(b))) {
    throw new ModelError("model response has no 'content' list of blocks");
  }
  const stop = body.stop_reason;
  if (stop !== undefined && stop !== null && typeof stop !== 'string') throw new ModelError("model response 'stop_reason' is not a string");
  if (usage === null || typeof usage !== 'object') throw new ModelError("model response has no 'usage' object");
  for (const key of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens']) {
    const v = usage[key];
    const required = key === 'input_tokens' || key === 'output_tokens';
    if ((v === undefined || v === null) ? required : !(Number.isInteger(v) && v >= 0)) {
      throw new ModelError(`model response usage.${key} is not a non-negative integer`);
    }
  }
  return body;
}

export class ModelClient {
  constructor(baseUrl, apiKey, { timeoutMs = 120_000 } = {}) {
    let url;
    try {
      url = new URL(baseUrl.replace(/\/+$/, '') + '/v1/messages');
    } catch {
      throw new UsageError(`--base-url is not a URL: ${JSON.stringify(baseUrl)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new UsageError(`--base-url must start with http:// or https://, got ${JSON.stringify(baseUrl)}`);
    }
    this.url = url;
    this.apiKey = apiKey || null;
    this.timeoutMs = timeoutMs;
  }

  // One request; resolves to the validated response body.
  complete(request) {
    const data = Buffer.from(JSON.stringify(request), 'utf8');
    const headers = { 'content-type': 'application/json', 'anthropic-version': ANTHROPIC_VERSION,
      'content-length': String(data.length) };
    if (this.apiKey) headers['x-api-key'] = this.apiKey;
    const lib = this.url.protocol === 'https:' ? https : http;
    const where = this.url.href;
    return new Promise((resolve, reject) => {
      const req = lib.request(this.url, { method: 'POST', headers, timeout: this.timeoutMs, agent: false }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', (e) => reject(new ModelError(`model request to ${where} failed: ${e.message}`)));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode < 200 || res.statusCode >= 300) {
            reject(new ModelError(`model server answered HTTP ${res.statusCode} at ${where}: ${snippet(raw)}`));
            return;
          }
          let body;
          try {
            body = JSON.parse(raw);
          } catch {
            reject(new ModelError(`model server sent a body that is not JSON (HTTP ${res.statusCode}): ${snippet(raw)}`));
            return;
          }
          try {
            resolve(checkResponse(body));
          } catch (e) {
            reject(e);
          }
        });
      });
      req.on('timeout', () => req.destroy(new ModelError(`model request to ${where} timed out after ${this.timeoutMs / 1000} s`)));
      req.on('error', (e) => reject(e instanceof ModelError ? e : new ModelError(`cannot reach model server at ${where}: ${e.code || e.message}`)));
      req.end(data);
    });
  }
}
