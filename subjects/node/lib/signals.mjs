// Imported FIRST by agent.mjs (importing only bugs.mjs, which runs nothing), so SIGINT/SIGTERM only
// ask for a suspend from the earliest moment the agent's own code runs.  A
// signal never interrupts an append: the handler only sets the flag, and
// wakes a blocked chat read (waiting for input is a loop boundary).

import { bug } from './bugs.mjs';

export class SuspendFlag {
  constructor() {
    this.requested = false;
    this.signal = null;
    this.wakers = new Set();
  }

  request(signal = null) {
    if (!this.requested) this.signal = signal;
    this.requested = true;
    for (const wake of this.wakers) wake();
    this.wakers.clear();
  }
}

export const suspendFlag = new SuspendFlag();

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => (sig === 'SIGTERM' && bug('sigterm-aborts') ? process.exit(143) : suspendFlag.request(sig)));
}
