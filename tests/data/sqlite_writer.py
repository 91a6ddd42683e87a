"""A tiny SQLite writer for tests/test_sqlite_persistence.py: N committed transactions, each acknowledged.

Usage: sqlite_writer.py ROOT JOURNAL_MODE SYNCHRONOUS N [FIRST].  Commits FIRST (default 1) to FIRST + N - 1.  The database is ROOT/db/t.db (ROOT/db exists); after commit k returns,
the program prints "committed k" and writes the line "k" to ROOT/acks with one write(2): the observer records
that write after every call of commit k (one thread, entry order), so its place in the trace is where the
commit was acknowledged.
"""

import os
import sqlite3
import sys

root, mode, sync, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
first = int(sys.argv[5]) if len(sys.argv) > 5 else 1
acks = os.open(os.path.join(root, "acks"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
db = sqlite3.connect(os.path.join(root, "db", "t.db"), isolation_level=None)
db.execute(f"PRAGMA journal_mode={mode}")
db.execute(f"PRAGMA synchronous={sync}")
db.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
for k in range(first, first + n):
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t VALUES (?, ?)", (k, str(k) * 300))
    db.execute("COMMIT")
    print(f"committed {k}", flush=True)
    os.write(acks, b"%d\n" % k)
db.close()
