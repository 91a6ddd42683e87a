// The store: $XDG_STATE_HOME/fisk-ai/runs/<id>.json (the journal; see journalName) and <id>.lock.
//
// Writers (create, open) hold the run lock from before their first change of
// the journal until they close it.  Each append is ONE write of the whole
// line, then fsync of the journal; the first append to a new journal also
// fsyncs the store directory.  A failed write or fsync poisons the journal:
// the run stops with an error, nothing is retried.

import fs from 'node:fs';
import path from 'node:path';
import { encodeRecord, readJournal } from './codec.mjs';
import { Folder, fold } from './fold.mjs';
import { acquireLock, releaseLock } from './lock.mjs';
import { bug } from './bugs.mjs';
import {
  AgentError, ConsistencyError, InvalidRecord, RunExists, RunLocked, RunNeverCreated, RunNotFound, StoreIOError, UsageError,
} from './errors.mjs';

const C = fs.constants;
const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export function validateRunId(id) {
  if (typeof id !== 'string' || !RUN_ID.test(id)) {
    throw new UsageError(`invalid run id ${JSON.stringify(id)}: use 1-128 of [A-Za-z0-9_-], starting with a letter or digit`);
  }
}

// $XDG_STATE_HOME/fisk-ai/runs when XDG_STATE_HOME is absolute, else $HOME/.local/state/fisk-ai/runs.
export function defaultStoreDir(env = process.env) {
  const xdg = env.XDG_STATE_HOME;
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, 'fisk-ai', 'runs');
  const home = env.HOME;
  if (home && path.isAbsolute(home)) return path.join(home, '.local', 'state', 'fisk-ai', 'runs');
  throw new UsageError('no store directory: neither XDG_STATE_HOME nor HOME is an absolute path');
}

// The journal's file name: <id> and AGENT_JOURNAL_SUFFIX (default '.json'), so that a profile can name the
// journal otherwise ([journal] path) and the harness must find it by the profile, not by the contract's name.
export function journalName(runId, env = process.env) {
  const suffix = env.AGENT_JOURNAL_SUFFIX || '.json';
  if (!/^\.[A-Za-z0-9._-]{1,32}$/.test(suffix) || suffix === '.lock') {
    throw new UsageError(`bad AGENT_JOURNAL_SUFFIX ${JSON.stringify(suffix)}: a dot, then 1-32 of [A-Za-z0-9._-], not .lock`);
  }
  return `${runId}${suffix}`;
}

const ioError = (what, p, e) => new StoreIOError(`${what} failed: ${e.code || e.message}`, { path: p });

function closeQuietly(fd) {
  try { fs.closeSync(fd); } catch { /* already gone */ }
}

export function fsyncDir(dir) {
  const fd = fs.openSync(dir, C.O_RDONLY | C.O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function lexists(p) {
  try { fs.lstatSync(p); return true; } catch (e) { if (e.code === 'ENOENT') return false; throw ioError('lstat', p, e); }
}

// Read the whole file open on `fd` from byte 0.
function readAll(fd) {
  const chunks = [];
  let pos = 0;
  for (;;) {
    const buf = Buffer.allocUnsafe(1 << 20);
    const n = fs.readSync(fd, buf, 0, buf.length, pos);
    if (n === 0) break;
    chunks.push(buf.subarray(0, n));
    pos += n;
  }
  return Buffer.concat(chunks);
}

// Read and fold the journal open on `fd`.  Returns {folder, reader}.
// Throws RunNeverCreated for a journal with no complete record.
export function foldFd(fd, jpath) {
  let bytes;
  try {
    bytes = readAll(fd);
  } catch (e) {
    throw ioError('reading the journal', jpath, e);
  }
  const reader = readJournal(bytes, jpath);
  if (reader.lines === 0) {
    const what = reader.tornTail ? `holds only a torn line of ${reader.tornTail.length} bytes` : 'is empty';
    throw new RunNeverCreated(`journal ${what}: its create died before the meta record was acknowledged`,
      { path: jpath, line: 1, offset: 0 });
  }
  return { folder: fold(reader.records, jpath), reader };
}

function openRegular(jpath, flags, runId, mode) {
  let fd;
  try {
    fd = fs.openSync(jpath, flags | C.O_NOFOLLOW | C.O_NONBLOCK, mode);
  } catch (e) {
    if (e.code === 'ENOENT') throw new RunNotFound(`no run ${runId} in the store`, { path: jpath });
    if (e.code === 'EEXIST') throw e;
    if (e.code === 'ELOOP' || e.code === 'EISDIR' || e.code === 'ENXIO') {
      throw new StoreIOError(`the journal of run ${runId} is a symlink or not a regular file; refusing it`, { path: jpath });
    }
    throw ioError('opening the journal', jpath, e);
  }
  if (!fs.fstatSync(fd).isFile()) {
    closeQuietly(fd);
    throw new StoreIOError(`the journal of run ${runId} is not a regular file; refusing it`, { path: jpath });
  }
  return fd;
}

// Read and fold a journal by path, without the lock (status, and the reclaim check).
export function loadJournal(jpath, runId = null) {
  const fd = openRegular(jpath, C.O_RDONLY, runId ?? path.basename(jpath));
  try {
    return foldFd(fd, jpath);
  } finally {
    closeQuietly(fd);
  }
}

// True when `jpath` holds no complete record (a create that died before its meta was acknowledged).
function neverCreated(jpath, runId) {
  try {
    loadJournal(jpath, runId);
  } catch (e) {
    return e instanceof RunNeverCreated;
  }
  return false;
}

export class Journal {
  constructor({ runId, jpath, dir, fd, lockFd, folder, size, isNew, cutTail = null }) {
    Object.assign(this, { runId, jpath, dir, fd, lockFd, folder, size, isNew, cutTail });
    this.poison = null;
  }

  get state() { return this.folder.state(); }

  poisoned(what, seq, e) {
    this.poison = `${what} of seq ${seq} failed (${e.code || e.message})`;
    return new StoreIOError(`${what} of seq ${seq} of run ${this.runId} failed: ${e.code || e.message}; `
      + 'the journal refuses further appends (no retry)', { path: this.jpath });
  }

  // Append one record durably; returns its seq once written and fsynced.
  append(kind, payload) {
    if (this.fd === null) throw new AgentError(`internal: journal of run ${this.runId} is closed`);
    if (this.poison) throw new StoreIOError(`journal of run ${this.runId} refuses appends: ${this.poison}`, { path: this.jpath });
    const seq = this.folder.lastSeq + 1;
    const record = { seq, kind, payload };
    let line;
    try {
      line = encodeRecord(kind, seq, payload);
      this.folder.check(record); // a record that would not fold is refused before any byte is written
    } catch (e) {
      throw new InvalidRecord(`refusing to append a ${kind} record as seq ${seq} of run ${this.runId}: ${e.message}; nothing was written`,
        { path: this.jpath });
    }
    if (bug('newline-first')) { // the separator goes first: the last record never ends in its newline
      line = Buffer.concat([Buffer.from(this.size > 0 ? '\n' : ''), line.subarray(0, line.length - 1)]);
    }
    let written;
    try {
      written = fs.writeSync(this.fd, line, 0, line.length); // ONE write of the whole line
    } catch (e) {
      throw this.poisoned('write', seq, e);
    }
    if (written !== line.length) throw this.poisoned('write', seq, new Error(`short write: ${written} of ${line.length} bytes`));
    if (!bug('no-fsync')) {
      try {
        fs.fsyncSync(this.fd);
      } catch (e) {
        if (!bug('fsync-error-swallowed')) throw this.poisoned('fsync', seq, e);
        process.stderr.write(`agent: warning: fsync of the journal failed (${e.code}); carrying on\n`);
      }
    }
    if (this.isNew) {
      if (!bug('no-dir-fsync')) {
        try {
          fsyncDir(this.dir);
        } catch (e) {
          throw this.poisoned('store directory fsync', seq, e);
        }
      }
      this.isNew = false;
    }
    this.size += line.length;
    this.folder.add(record);
    return seq;
  }

  // Close the journal, then release the lock (last).
  close() {
    if (bug('unlock-before-close') && this.lockFd !== null) { releaseLock(this.lockFd); this.lockFd = null; }
    if (this.fd !== null) closeQuietly(this.fd);
    if (this.lockFd !== null) releaseLock(this.lockFd);
    this.fd = null;
    this.lockFd = null;
  }
}

export class Store {
  constructor(dir = defaultStoreDir()) {
    this.dir = dir;
  }

  journalPath(runId) { return path.join(this.dir, journalName(runId)); }

  lockPath(runId) { return path.join(this.dir, `${runId}.lock`); }

  // Check an existing store directory: a directory of ours, not writable by others (tightened to 0700).
  checkDir() {
    let st;
    try {
      st = fs.statSync(this.dir);
    } catch (e) {
      if (e.code === 'ENOENT') return false;
      throw ioError('stat of the store directory', this.dir, e);
    }
    if (!st.isDirectory()) throw new StoreIOError('the store path is not a directory', { path: this.dir });
    if (typeof process.geteuid === 'function' && st.uid !== process.geteuid()) {
      throw new StoreIOError(`the store directory is owned by uid ${st.uid}, not by this user; refusing it`, { path: this.dir });
    }
    const mode = st.mode & 0o777;
    if (mode & 0o022) {
      throw new StoreIOError(`the store directory has mode ${mode.toString(8)}: writable by others; refusing it`, { path: this.dir });
    }
    if (mode & 0o077) fs.chmodSync(this.dir, 0o700);
    return true;
  }

  // mkdir -p the store directory, 0700; fsync the parent of every directory made.
  ensureDir() {
    const missing = [];
    for (let d = this.dir; !lexists(d); d = path.dirname(d)) {
      missing.push(d);
      if (path.dirname(d) === d) break;
    }
    for (const d of missing.reverse()) {
      try {
        fs.mkdirSync(d, 0o700);
        if ((fs.statSync(d).mode & 0o777) !== 0o700) fs.chmodSync(d, 0o700); // the umask took bits
      } catch (e) {
        if (e.code !== 'EEXIST') throw ioError('creating the store directory', d, e);
      }
      if (!bug('store-dir-not-durable')) {
        try {
          fsyncDir(path.dirname(d));
        } catch (e) {
          throw ioError("fsync of the store directory's parent", path.dirname(d), e);
        }
      }
    }
    this.checkDir();
  }

  // Create run `runId` with `meta` as seq 1: lock, create the journal O_CREAT|O_EXCL, append meta.
  create(runId, meta) {
    validateRunId(runId);
    const jpath = this.journalPath(runId);
    const noExcl = bug('create-without-excl');
    if (noExcl && lexists(jpath) && !neverCreated(jpath, runId)) {
      throw new RunExists(`run ${runId} already exists`, { path: jpath });
    }
    this.ensureDir();
    let lockFd;
    try {
      lockFd = acquireLock(this.lockPath(runId), runId);
    } catch (e) {
      if (e instanceof RunLocked) {
        throw new RunExists(`run ${runId} already exists: another process holds it`, { path: jpath });
      }
      throw e;
    }
    const flags = C.O_WRONLY | C.O_CREAT | C.O_APPEND | (noExcl ? 0 : C.O_EXCL);
    let fd;
    try {
      try {
        fd = openRegular(jpath, flags, runId, 0o600);
      } catch (e) {
        if (e.code !== 'EEXIST') throw e;
        if (!neverCreated(jpath, runId)) {
          throw new RunExists(`run ${runId} already exists; resume it with --resume ${runId}`, { path: jpath });
        }
        // It holds nothing acknowledged and we hold the lock: reclaim it.
        fs.unlinkSync(jpath);
        fsyncDir(this.dir);
        fd = openRegular(jpath, flags, runId, 0o600);
      }
      if ((fs.fstatSync(fd).mode & 0o777) !== 0o600) fs.fchmodSync(fd, 0o600);
    } catch (e) {
      if (fd !== undefined) closeQuietly(fd);
      releaseLock(lockFd);
      if (e instanceof AgentError) throw e;
      throw ioError('creating the journal', jpath, e);
    }
    const journal = new Journal({ runId, jpath, dir: this.dir, fd, lockFd, folder: new Folder(jpath), size: 0, isNew: true });
    try {
      journal.append('meta', meta);
    } catch (e) {
      try { fs.unlinkSync(jpath); fsyncDir(this.dir); } catch { /* best effort */ }
      journal.close();
      throw e;
    }
    return journal;
  }

  // Open run `runId` for appending: lock FIRST, then read and fold under the lock,
  // then cut a torn final line (ftruncate to the last complete line, fsync).
  open(runId) {
    validateRunId(runId);
    if (!this.checkDir()) throw new RunNotFound(`no run ${runId}: the store directory does not exist`, { path: this.dir });
    const jpath = this.journalPath(runId);
    if (!lexists(jpath)) throw new RunNotFound(`no run ${runId} in the store`, { path: jpath });
    const early = bug('fold-before-lock') ? loadJournal(jpath, runId) : null;
    const lockFd = acquireLock(this.lockPath(runId), runId);
    let fd = null;
    try {
      fd = openRegular(jpath, C.O_RDWR | C.O_APPEND, runId);
      const st = fs.fstatSync(fd);
      if ((typeof process.geteuid === 'function' && st.uid !== process.geteuid()) || (st.mode & 0o022)) {
        throw new StoreIOError(`the journal of run ${runId} is not ours or is writable by others; refusing it`, { path: jpath });
      }
      const { folder, reader } = early ?? foldFd(fd, jpath);
      const metaId = folder.meta.run_id;
      if (metaId !== runId) {
        throw new ConsistencyError(`the journal's meta names run ${JSON.stringify(metaId)}, not ${JSON.stringify(runId)}`,
          { path: jpath, line: 1, offset: 0 });
      }
      let cutTail = null;
      const wholeLine = reader.tornTail && bug('complete-torn-line-kept') && (() => {
        const last = Buffer.alloc(1);
        fs.readSync(fd, last, 0, 1, reader.tornTail.offset + reader.tornTail.length - 1);
        return last[0] === 0x0a;
      })();
      if (reader.tornTail && !bug('torn-tail-not-cut') && !wholeLine) {
        let cutAt = reader.goodSize;
        if (bug('torn-tail-overcut')) { // the repair cuts back to the start of the last complete line too
          const good = Buffer.alloc(reader.goodSize);
          fs.readSync(fd, good, 0, reader.goodSize, 0);
          cutAt = good.subarray(0, Math.max(0, reader.goodSize - 1)).lastIndexOf(0x0a) + 1;
        }
        try {
          fs.ftruncateSync(fd, cutAt);
          fs.fsyncSync(fd);
        } catch (e) {
          throw ioError('cutting the torn tail of the journal', jpath, e);
        }
        cutTail = reader.tornTail;
      }
      return new Journal({ runId, jpath, dir: this.dir, fd, lockFd, folder, size: reader.goodSize, isNew: false, cutTail });
    } catch (e) {
      if (fd !== null) closeQuietly(fd);
      releaseLock(lockFd);
      if (e instanceof AgentError) throw e;
      throw ioError('opening the journal', jpath, e);
    }
  }
}
