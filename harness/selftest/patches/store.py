"""Patches of the store's and the journal's writes: fsync, directories, framing, record limits, create
(docs/spec.md sections 3, 6, 9 and 11)."""

from __future__ import annotations

import os
from typing import Any

from fiskj import encode, ioseam
from fiskj import store as st
from fiskj.errors import RunExists, RunLocked
from fiskj.journal import Journal
from fiskj.records import AssistantRecord

from harness.selftest.patches import swapped, wrap

__all__ = ["unsynced_appends", "no_dir_fsync", "store_dir_not_durable", "retry_failed_fsync",
           "swallow_write_errors", "newline_first", "create_not_reclaimed", "create_without_excl",
           "resume_writer_no_record_limit", "drop_thinking_signatures",
           "jetstream_ignores_lost_ack", "jetstream_no_fence"]


def unsynced_appends(fsync_first: bool = False) -> None:
    """``Journal._write_line`` writes the line and returns with it unsynced; with ``fsync_first`` an fsync comes
    before the write (and syncs none of the line).  The store directory's fsync on a new journal's first
    append stays."""

    @wrap(Journal, "_write_line")
    def _write_line(original: Any, self: Any, line: bytes, seq: int) -> None:
        if fsync_first:
            try:
                ioseam.fsync(self._fd)
            except OSError as exc:
                raise self._fail("write", seq, exc) from None
        with swapped(ioseam, fsync=lambda fd: None):
            original(self, line, seq)


def no_dir_fsync() -> None:
    """A new ``Journal`` never fsyncs its store directory on its first append (section 9, rule 2)."""

    @wrap(Journal, "__init__")
    def __init__(original: Any, self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._sync_dir = False


def store_dir_not_durable() -> None:
    """``FileStore._ensure_dir`` makes missing store directories (``mkdir -p``) without fsyncing their parents
    (defect 4: section 9, rule 3)."""

    @wrap(st.FileStore, "_ensure_dir")
    def _ensure_dir(original: Any, self: Any, run_id: str) -> None:
        with swapped(ioseam, fsync_dir=lambda path: None):
            original(self, run_id)


def retry_failed_fsync() -> None:
    """``Journal._write_line`` retries a failed fsync up to three times and returns as if it had succeeded (on
    Linux a retried fsync after EIO can succeed with the dirty pages gone: section 9, rule 5)."""

    @wrap(Journal, "_write_line")
    def _write_line(original: Any, self: Any, line: bytes, seq: int) -> None:
        real = ioseam.fsync  # the seam's, traced or not, as configured when the leg writes

        def retried(fd: int) -> None:
            for _ in range(3):
                try:
                    return real(fd)
                except OSError:
                    continue

        with swapped(ioseam, fsync=retried):
            original(self, line, seq)


def swallow_write_errors() -> None:
    """``ioseam.write`` answers a failed write (ENOSPC, EIO) as if all of it was written (the journal calls it
    through the module, so the patch reaches it)."""

    @wrap(ioseam, "write")
    def write(original: Any, fd: int, data: bytes) -> int:
        try:
            return original(fd, data)
        except OSError:
            return len(data)


def newline_first() -> None:
    """``Journal._write_line`` frames each record after the first as ``"\\n" + record``: the last line never
    ends in its newline, so every reader takes the last record for a torn tail."""

    @wrap(Journal, "_write_line")
    def _write_line(original: Any, self: Any, line: bytes, seq: int) -> Any:
        return original(self, (b"\n" if self._size else b"") + line[:-1], seq)


def create_not_reclaimed() -> None:
    """``store._never_created`` is always false: a journal left empty by a crashed create is refused as an
    existing run instead of reclaimed under the run lock (``RunNeverCreated``)."""
    st._never_created = lambda jpath, run_id: False


def create_without_excl() -> None:
    """``FileStore.create`` checks that the journal does not exist, then opens it without ``O_EXCL`` (defect 3:
    section 11): two creators can both pass the check."""

    def create(self: Any, run_id: str, meta: Any) -> Journal:
        st.validate_run_id(run_id)
        jpath = st.journal_path(self.directory, run_id)
        if os.path.lexists(jpath):
            raise RunExists(f"run {run_id} already exists", path=jpath, run_id=run_id)
        self._ensure_dir(run_id)
        try:
            lock = st.acquire(st.lock_path(self.directory, run_id), run_id)
        except RunLocked:
            raise RunExists(f"run {run_id} already exists: another process holds it", path=jpath,
                            run_id=run_id) from None
        fd = ioseam.open(jpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        journal = Journal(run_id=run_id, path=jpath, directory=self.directory, fd=fd, lock=lock,
                          folder=None, size=0, new=True)
        journal.append(meta)
        return journal

    st.FileStore.create = create


def resume_writer_no_record_limit() -> None:
    """Once ``FileStore.open`` opened a run (a resume), ``encode.MAX_RECORD_BYTES`` is 2**62: the writer refuses
    no record and ``fit_tool_result`` cuts no tool output, so a record larger than any reader accepts is
    journaled.  (With no limit in a fresh leg too, the self-test's own uninterrupted run, which the runner
    must read, fails before any trial.)"""

    @wrap(st.FileStore, "open")
    def open_(original: Any, self: Any, run_id: str, *args: Any, **kwargs: Any) -> Any:
        journal = original(self, run_id, *args, **kwargs)
        encode.MAX_RECORD_BYTES = 1 << 62
        return journal


def drop_thinking_signatures() -> None:
    """``encode._payload`` writes an assistant record's thinking blocks without their ``signature`` (the live
    leg keeps the blocks it received; a resume sends them back unsigned, which the Messages API refuses)."""

    @wrap(encode, "_payload")
    def _payload(original: Any, record: Any) -> Any:
        out = original(record)
        content = out["message"].get("content") if isinstance(record, AssistantRecord) else None
        if isinstance(content, list):
            out["message"] = {**out["message"], "content": [
                {k: v for k, v in b.items() if k != "signature"} if isinstance(b, dict) and b.get("type") == "thinking"
                else b for b in content]}
        return out


def jetstream_ignores_lost_ack() -> None:
    """A JetStream journal whose publish was refused by the fence after a lost ack does not adopt its own record
    on that subject (its own ``Nats-Msg-Id``): it takes it for a failed publish and appends the line again, on
    the next subject, unfenced (issue 28)."""
    from fiskj.jetstream import JetStreamJournal

    @wrap(JetStreamJournal, "_fenced")
    def _fenced(original: Any, self: Any, subject: str, msg_id: str, seq: int) -> None:
        client = self.store.client
        try:
            msg = client.run(client.js.get_last_msg(self.store.stream, subject))
        except Exception:  # noqa: BLE001 - nothing there: the correct path decides
            return original(self, subject, msg_id, seq)
        if (msg.headers or {}).get("Nats-Msg-Id") != msg_id:
            return original(self, subject, msg_id, seq)
        self.tail = client.run(client.js.publish(self.store.subject(self.run_id, seq + 1), msg.data)).seq


def jetstream_no_fence() -> None:
    """A JetStream journal that publishes without the fence (no ``Nats-Expected-Last-Subject-Sequence`` over
    the run's subjects): only the stream's one message per subject stands between a stale writer and the run,
    so a writer whose run was deleted under it appends its next records into the deleted run (issue 28)."""
    from fiskj.jetstream import JetStreamJournal

    @wrap(JetStreamJournal, "headers")
    def headers(original: Any, self: Any, msg_id: str) -> dict[str, str]:
        return {"Nats-Msg-Id": msg_id}
