// Expected failures, each with the exit status the subject contract gives it
// (docs/subject.md "Exit status"): 1 error, 2 usage or refused resume.
// agent.mjs prints `agent: <Kind>: <message>` for these, never a stack trace.

export class AgentError extends Error {
  constructor(message, { path = null, line = null, offset = null } = {}) {
    super(message);
    this.name = new.target.name;
    this.path = path;
    this.line = line;
    this.offset = offset;
  }
  get exitCode() { return 1; }
  // "path, line n, byte offset o: message" when the place is known.
  describe() {
    const where = [];
    if (this.path) where.push(this.path);
    if (this.line !== null) where.push(`line ${this.line}`);
    if (this.offset !== null) where.push(`byte offset ${this.offset}`);
    return where.length ? `${where.join(', ')}: ${this.message}` : this.message;
  }
}

// Exit 2.
export class UsageError extends AgentError { get exitCode() { return 2; } }
export class ResumeRefused extends UsageError {}
export class FingerprintMismatch extends ResumeRefused {}

// Exit 1: the journal cannot be read or folded.
export class JournalError extends AgentError {}
export class CorruptJournal extends JournalError {}
export class UnsupportedVersion extends JournalError {}
export class ConsistencyError extends JournalError {}

// Exit 1: the store.
export class StoreError extends AgentError {}
export class RunLocked extends StoreError {}
export class RunExists extends StoreError {}
export class RunNotFound extends StoreError {}
export class RunNeverCreated extends RunNotFound {}
export class StoreIOError extends StoreError {}

// Exit 1: a record the writer refuses before writing a byte (over a limit, breaking a fold rule).
export class InvalidRecord extends AgentError {}

// Raised by the model client; the loop turns it into an `error` terminal record.
export class ModelError extends AgentError {}
