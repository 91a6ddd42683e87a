// Broken variants of this agent, for proving the harness: FISKJ_FOREIGN_BUG=<name>
// switches exactly one small, realistic mistake on.  Each call site reads
// `bug('name')`; the list here is the only place the names live.

export const BUGS = {
  'no-fsync': 'never fsync the journal after a write',
  'no-dir-fsync': 'never fsync the store directory after creating the journal',
  'torn-tail-not-cut': 'resume appends after a torn final line without cutting it (fisk-ai defect 1)',
  'fold-before-lock': 'resume reads and folds the journal, then takes the lock (fisk-ai defect 2)',
  'create-without-excl': 'create checks that the journal does not exist, then opens it without O_EXCL (fisk-ai defect 3)',
  'store-dir-not-durable': 'new store directories are never fsynced into their parents (fisk-ai defect 4)',
  'fsync-error-swallowed': 'a failing journal fsync is ignored and the record treated as acknowledged',
  'status-stays-suspended': 'the fold keeps status "suspended" after later records (fisk-ai defect 5)',
  'resume-reruns-answered': 'resume runs every tool of the pending batch again, also the answered ones',
  'stale-lock-file': 'the run lock is a marker file created with O_EXCL: a killed holder leaves it behind for good',
  'reader-locks': 'the status command takes the run lock: reading a run that is being written fails',
  'reader-tolerates-corruption': 'the reader skips an unparsable line before the end instead of refusing the journal',
  'resume-skips-completed': 'a resumed run that completes exits 0 without journaling its completed terminal record',
  'pending-turn-not-counted': 'a resume numbers iterations without counting the pending assistant turn',
  'recall-after-final-answer': 'a resume asks the model again when the journal already holds the final answer',
  'complete-torn-line-kept': 'open cuts a torn final line only when it lacks its newline: appends follow a whole bad line',
  'blocking-lock': 'the run lock is taken with a blocking flock (no -n): a second writer waits instead of being refused',
  'unlock-before-close': 'the run lock is released before the journal descriptor is closed',
  'completed-never-written': 'no run ever journals its completed terminal record (the plain run itself ends wrong)',
  'newline-first': 'records are framed newline-first: the last record never ends in its newline and reads as torn',
  'fingerprint-ignores-system': 'the resume guard does not compare the system prompt hash',
  'fingerprint-ignores-thinking': 'the resume guard does not compare the thinking mode',
  'torn-tail-overcut': 'the torn-tail repair cuts back one complete (acknowledged) line too many',
  'answer-not-printed-on-resume': 'a resume that settles a journaled final answer completes the run without printing it',
  'thinking-stripped-on-resume': 'a resume sends every inherited turn without its thinking blocks, the tool loop in flight included',
  'ended-leg-not-resumable': 'a run whose last leg ended with error, budget or max_iterations is refused, not resumed (and records after such a terminal read as corrupt)',
  'cut-off-turn-run-on-resume': 'a resume settles a turn cut off by max_tokens (or refused) as a tool turn: its tools run',
  'cut-off-turn-run': 'the tool calls of a reply cut off by max_tokens run, and the run goes on to complete (what fisk-ai does)',
  'drops-cache-usage': 'the cache token counts of a reply\'s usage are ignored: not journaled, not counted toward the budget',
  'nul-block-ends-journal': 'the reader takes a line of NUL bytes inside the journal for its end (and open cuts there)',
  'completed-new-turn': 'a resume of a completed run continues it with a new turn ("continue"), as Claude Code does',
  'sigterm-aborts': 'SIGTERM aborts the step in flight and exits 143 at once, as Claude Code does (no suspend)',
};

export const BUG_ENV = 'FISKJ_FOREIGN_BUG';

let active = null;

// Read the variable once.  Returns an error message for an unknown name, else null.
export function configureBugs(env = process.env) {
  const name = env[BUG_ENV] || '';
  if (!name) { active = null; return null; }
  if (!Object.hasOwn(BUGS, name)) {
    return `unknown ${BUG_ENV} ${JSON.stringify(name)}; known: ${Object.keys(BUGS).join(', ')}`;
  }
  active = name;
  return null;
}

export function bug(name) {
  if (!Object.hasOwn(BUGS, name)) throw new Error(`internal: no bug variant named ${name}`);
  return active === name;
}
