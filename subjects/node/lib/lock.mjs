// The run lock: an exclusive, non-blocking flock(2) on <id>.lock, held for as
// long as the journal is open.
//
// Node has no flock binding.  We open the lock file ourselves and let
// util-linux `flock -xn 3` lock it, with OUR descriptor given to the child as
// its fd 3: a flock belongs to the open file description, which the child
// shares with us, so the lock stays held by our descriptor after the child
// exits, and the kernel drops it when our descriptor is closed or we die
// (also by SIGKILL).  Our descriptors are close-on-exec (libuv opens every
// file O_CLOEXEC), so tool processes never inherit the lock.

import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { RunLocked, StoreIOError } from './errors.mjs';
import { bug } from './bugs.mjs';

const { O_RDWR, O_CREAT, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
const CONFLICT = 75; // flock -E: exit status when the lock is busy
const FLOCK = 'flock'; // util-linux, from PATH

function closeQuietly(fd) {
  try { fs.closeSync(fd); } catch { /* nothing left to release */ }
}

// Take the lock of run `runId`; returns the locked descriptor (release: fs.closeSync).
// Throws RunLocked when another process holds it, StoreIOError for anything else.
export function acquireLock(path, runId) {
  if (bug('stale-lock-file')) return markerLock(path, runId);
  for (let attempt = 0; attempt < 8; attempt += 1) {
    let fd;
    try {
      fd = fs.openSync(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600);
    } catch (e) {
      const why = e.code === 'ELOOP' ? 'it is a symlink' : e.code;
      throw new StoreIOError(`cannot open the lock file of run ${runId}: ${why}`, { path });
    }
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile()) throw new StoreIOError(`the lock file of run ${runId} is not a regular file`, { path });
      if ((st.mode & 0o777) !== 0o600) fs.fchmodSync(fd, 0o600);
      const how = bug('blocking-lock') ? ['-x'] : ['-x', '-n'];
      const r = spawnSync(FLOCK, [...how, '-E', String(CONFLICT), '3'], { stdio: ['ignore', 'ignore', 'pipe', fd] });
      if (r.error) {
        throw new StoreIOError(`cannot run flock(1) (util-linux) to lock run ${runId}: ${r.error.code || r.error.message}`, { path });
      }
      if (r.status === CONFLICT) throw new RunLocked(`run ${runId} is locked by another process`, { path });
      if (r.status !== 0) {
        const msg = String(r.stderr || '').trim().split('\n')[0] || (r.signal ? `killed by ${r.signal}` : `exit ${r.status}`);
        throw new StoreIOError(`locking run ${runId} with flock(1) failed: ${msg}`, { path });
      }
      // Still the file at the path?  (A deleter unlinks it while holding it.)
      let now = null;
      try { now = fs.statSync(path); } catch { /* gone: start over */ }
      if (now && now.ino === st.ino && now.dev === st.dev) return fd;
      closeQuietly(fd);
    } catch (e) {
      closeQuietly(fd);
      throw e;
    }
  }
  throw new StoreIOError(`the lock file of run ${runId} keeps being replaced`, { path });
}

// The bug 'stale-lock-file': the lock is the existence of a marker file, made with O_EXCL and removed
// when the journal is closed, so a holder killed by SIGKILL leaves it behind and blocks the run for good.
const markers = new Map();

function markerLock(path, runId) {
  const marker = `${path}.held`;
  try {
    fs.closeSync(fs.openSync(marker, 'wx', 0o600));
  } catch (e) {
    if (e.code === 'EEXIST') throw new RunLocked(`run ${runId} is locked by another process`, { path });
    throw new StoreIOError(`cannot create the lock marker of run ${runId}: ${e.code}`, { path });
  }
  const fd = fs.openSync(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600);
  markers.set(fd, marker);
  return fd;
}

// Release a lock taken by acquireLock (closing its descriptor; the marker file of the bug goes too).
export function releaseLock(fd) {
  const marker = markers.get(fd);
  markers.delete(fd);
  closeQuietly(fd);
  if (marker) { try { fs.unlinkSync(marker); } catch { /* already gone */ } }
}
