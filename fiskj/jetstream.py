"""The JetStream store: runs as records on a NATS JetStream stream, wire-compatible with fisk-ai's.

Tracker issue 28; docs/store.md "The JetStream store" states the contract and its guarantees.  In short:

* the store binds to a stream the operator made (never creates one) and refuses, with
  :class:`StreamRefused` naming the ``nats stream`` flags that fix it, a stream that can lose or
  mutate a record: ``max_msgs_per_subject`` != 1, discard not ``new`` per subject, a ``max_age``,
  ``max_msg_size`` under 4096, memory storage, and (unless ``allow_single_replica``) one replica;
* run ``R``'s record ``seq`` is the one message on ``<prefix>.R.<seq>`` (seq 1 on ``<prefix>.R._meta``),
  ``<prefix>`` taken from the stream's single wildcard subject ``<prefix>.>``; its body is the file
  journal's line without its ``\\n`` terminator (fisk-ai's ``json.Marshal`` of the record);
* an append publishes with ``Nats-Msg-Id: <nonce>-<seq>`` (one random nonce per open) and asserts the
  stream sequence of the run's last record over ``<prefix>.R.>`` (the fence).  No ack (a timeout, a lost
  connection, no leader): the same publish again, so a record that did land is answered as a duplicate of
  our own id (after a lost connection as soon as the client has connected again: :meth:`NatsClient.answer`;
  a subject that already holds its one message, err_code 10077, is refused for good, not asked again).  A
  fence rejection reads the subject back: our own id there is a lost ack, adopted; anything else is another
  writer (:class:`RunLocked`), or on the meta subject a concurrent creator
  (:class:`RunExists`).  No ack after every attempt: :class:`StoreIOError`, the journal poisoned
  (docs/spec.md section 9, rule 5);
* ``open`` and ``load`` read the run with an ordered consumer and sort by seq; ``delete`` purges the run.

nats-py is asyncio-only: each store runs one event loop on a daemon thread that owns the connection (so
its pings, reconnects and flow control go on between the engine's synchronous calls), and every call is
submitted to it with :func:`asyncio.run_coroutine_threadsafe`.  :class:`NatsClient` is that bridge; the
harness reuses it to manage streams.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import secrets
import threading
import time
import urllib.parse
from typing import Any, Awaitable, TypeVar

from . import ioseam
from .codec import decode_record
from .errors import (ConsistencyError, FiskjError, JournalError, RunExists, RunLocked, RunNotFound,
                     StoreIOError, StreamRefused, UsageError)
from .fold import Folder, RunState
from .journal import Journal
from .paths import is_valid_run_id, validate_run_id
from .records import MetaRecord, Record
from .store import RunInfo, _check_run_id, check_create

__all__ = ["JetStreamStore", "JetStreamJournal", "NatsClient", "AnswerLost", "parse_url", "META_TOKEN",
           "RECORD_FLOOR_BYTES"]

META_TOKEN = "_meta"          #: the last subject token of a run's meta record (seq 1)
RECORD_FLOOR_BYTES = 4096     #: the smallest max message size a stream may have
WRONG_LAST_SEQUENCE = 10071   #: JetStream's error code for a failed expected-last-sequence check
SUBJECT_FULL = 10077          #: JetStream's "maximum messages per subject exceeded" (a 503 no retry changes)
T = TypeVar("T")


class AnswerLost(Exception):
    """A request's connection dropped while it waited for the answer and the client is connected again: an answer
    due on the dropped connection never comes (:meth:`NatsClient.answer`)."""


class NatsClient:
    """A NATS connection on its own event loop thread, called synchronously.

    ``servers``: a list of ``nats://host:port`` URLs; ``options``: :func:`nats.connect` keywords (``user``,
    ``password``, ``token``, ``user_credentials``).  ``timeout`` (seconds) bounds each request.
    ``run(coro)`` runs a coroutine on the loop and returns its result; ``js`` is the JetStream context.
    Raises :class:`StoreIOError` when no server answers, :class:`UsageError` without nats-py.  Close with
    :meth:`close`.
    """

    def __init__(self, servers: list[str], *, timeout: float = 5.0, **options: Any) -> None:
        try:
            import nats
        except ImportError:
            raise UsageError("a JetStream store needs nats-py: pip install 'fiskj[jetstream]'") from None

        self.servers, self.timeout = servers, timeout
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fiskj-nats", daemon=True)
        self._thread.start()

        async def quiet(exc: Exception) -> None:  # nats-py logs every reconnect attempt otherwise
            pass

        self._waiting: set[asyncio.Future[None]] = set()  # answer()'s waits, each ended by a reconnect

        async def reconnected() -> None:
            for lost in list(self._waiting):
                if not lost.done():
                    lost.set_result(None)

        try:
            self.nc = self.run(nats.connect(servers=servers, connect_timeout=timeout, reconnect_time_wait=0.1,
                                            max_reconnect_attempts=1, error_cb=quiet, reconnected_cb=reconnected,
                                            **options))
        except Exception as exc:
            self._stop()
            raise StoreIOError(f"cannot connect to NATS at {','.join(servers)}: {type(exc).__name__}: {exc}",
                               path=",".join(servers), errno=errno.ECONNREFUSED) from None
        self.nc.options["max_reconnect_attempts"] = -1  # connected once: from now on reconnect for good
        self.js = self.nc.jetstream(timeout=timeout)

    def run(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the client's loop; return its result or raise its exception."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    async def answer(self, request: Awaitable[T]) -> T:
        """The result of ``request`` (a coroutine that sends one request and waits for its answer, at most
        ``timeout``), or :class:`AnswerLost` as soon as the client has connected again after its connection
        dropped while ``request`` waited: an answer due on the dropped connection never comes, so waiting out
        the timeout would learn nothing more.  (A request buffered while the connection was down and flushed on
        the reconnect may still be answered: the caller asks again, as after a timeout.)"""
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.add(lost)
        task = asyncio.ensure_future(request)
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            raise
        finally:
            self._waiting.discard(lost)
        if not task.done():
            task.cancel()
            raise AnswerLost("the connection to NATS dropped while the request waited for its answer")
        return task.result()

    def close(self) -> None:
        """Close the connection and stop the loop thread (idempotent)."""
        if self.loop.is_closed():
            return
        try:
            self.run(self.nc.close())
        except Exception:  # noqa: BLE001 - closing a dead connection: nothing left to release
            pass
        self._stop()

    def _stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def _context(name: str) -> dict[str, Any]:
    """The ``nats context`` ``name`` (``$XDG_CONFIG_HOME/nats/context/NAME.json``) as connection settings."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    path = os.path.join(base, "nats", "context", f"{name}.json")
    try:
        with open(path, encoding="utf-8") as f:
            ctx = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read nats context {name!r}: {exc}", path=path) from None
    unsupported = [k for k in ("nkey", "cert", "key", "ca", "jetstream_domain", "jetstream_api_prefix") if ctx.get(k)]
    if unsupported:
        raise UsageError(f"nats context {name!r} sets {', '.join(unsupported)}, which fiskj does not support",
                         path=path)
    out = {"servers": (ctx.get("url") or "nats://127.0.0.1:4222").split(",")}
    for key, option in (("user", "user"), ("password", "password"), ("token", "token"), ("creds", "user_credentials")):
        if ctx.get(key):
            out[option] = ctx[key]
    return out


def parse_url(url: str) -> dict[str, Any]:
    """The keywords of :class:`JetStreamStore` in a store URL.

    ``nats://[USER:PASS@]HOST:PORT[,HOST:PORT...]/STREAM[?context=NAME&allow_single_replica=1&timeout=S]``
    (``nats:///STREAM?context=NAME`` takes the servers and credentials from the nats context; ``timeout``:
    seconds each request waits for its answer, e.g. a publish for its ack, default 5).
    Raises :class:`UsageError` naming what is wrong.
    """
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    stream = parts.path.strip("/")
    unknown = set(query) - {"context", "allow_single_replica", "timeout"}
    if parts.scheme not in ("nats", "tls") or not stream or "/" in stream or unknown:
        raise UsageError(f"not a JetStream store URL: {url!r} (expected nats://HOST:PORT/STREAM"
                         f"[?context=NAME&allow_single_replica=1&timeout=S]{'; unknown ' + ', '.join(sorted(unknown)) if unknown else ''})")
    out: dict[str, Any] = {"stream": stream, "allow_single_replica": query.get("allow_single_replica") in ("1", "true")}
    if "context" in query:
        out["context"] = query["context"]
    if "timeout" in query:
        try:
            out["timeout"] = float(query["timeout"])
        except ValueError:
            out["timeout"] = 0.0
        if not 0 < out["timeout"] <= 3600:
            raise UsageError(f"not a JetStream store URL: {url!r} (timeout={query['timeout']!r}: "
                             "expected seconds, more than 0 and at most 3600)")
    auth, _, hosts = parts.netloc.rpartition("@")
    if hosts:
        out["servers"] = [f"{parts.scheme}://{h}" for h in hosts.split(",")]
    if auth:
        user, _, password = auth.partition(":")
        out.update(user=urllib.parse.unquote(user), password=urllib.parse.unquote(password))
    return out


def _refuse(stream: str, field: str, why: str, fix: str) -> StreamRefused:
    return StreamRefused(f"stream {stream!r} {why}; fix: {fix}", field=field, path=stream)


def _prefix(stream: str, subjects: list[str]) -> str:
    """The run prefix: ``P`` of the stream's single wildcard subject ``P.>``."""
    wild = [s for s in subjects if "*" in s.split(".") or ">" in s.split(".")]
    fix = f"nats stream edit {stream} --subjects 'PREFIX.>'"
    if len(wild) != 1:
        raise _refuse(stream, "subjects", f"binds {len(wild)} wildcard subjects ({', '.join(wild) or 'none'}); "
                      f"it must bind exactly one, PREFIX.>", fix)
    tokens = wild[0].split(".")
    if len(tokens) < 2 or tokens[-1] != ">" or any(t in ("", "*", ">") for t in tokens[:-1]):
        raise _refuse(stream, "subjects", f"binds {wild[0]!r}, not a clean PREFIX.>", fix)
    return ".".join(tokens[:-1])


def _add_command(stream: str, replicas: int = 3) -> str:
    """The ``nats stream add`` command that makes a stream the store accepts (docs/store.md)."""
    return (f"nats stream add {stream} --subjects 'PREFIX.>' --storage=file --replicas={replicas} "
            f"--max-msgs-per-subject=1 --discard=new --discard-per-subject --max-age=-1 --max-msg-size=-1")


def _check_config(stream: str, cfg: Any, allow_single_replica: bool, reading: bool = False) -> None:
    """Refuse a stream that can lose or mutate a record (docs/store.md "Refusals"); ``reading``: the source of a
    ``fiskj session migrate``, whose storage and replicas are what the runs are being moved away from."""
    edit = f"nats stream edit {stream}"
    if cfg.max_msgs_per_subject != 1:
        raise _refuse(stream, "max_msgs_per_subject", f"keeps {cfg.max_msgs_per_subject} messages per subject, "
                      f"not 1: a record subject would not be write-once", f"{edit} --max-msgs-per-subject=1")
    if getattr(cfg.discard, "value", cfg.discard) != "new" or not cfg.discard_new_per_subject:
        raise _refuse(stream, "discard", "does not discard new messages per subject: a second publish to a "
                      "record subject would drop the record", f"{edit} --discard=new --discard-per-subject")
    if cfg.max_age:
        raise _refuse(stream, "max_age", f"has a max age of {cfg.max_age} s: its runs would expire",
                      f"{edit} --max-age=-1")
    if cfg.max_msg_size is not None and 0 < cfg.max_msg_size < RECORD_FLOOR_BYTES:
        raise _refuse(stream, "max_msg_size", f"caps messages at {cfg.max_msg_size} bytes, under the "
                      f"{RECORD_FLOOR_BYTES}-byte record floor", f"{edit} --max-msg-size=-1")
    if reading:
        return
    if getattr(cfg.storage, "value", cfg.storage) == "memory":
        raise _refuse(stream, "storage", "keeps its messages in memory: every run is lost when the server "
                      "restarts", f"{_add_command('NEW')} (the storage cannot be edited), then "
                      f"fiskj session migrate --from nats://.../{stream} --to nats://.../NEW (migrate reads a memory stream)")
    if (cfg.num_replicas or 1) < 2 and not allow_single_replica:
        raise _refuse(stream, "num_replicas", "has one replica: one server's disk holds every run", f"{edit} "
                      f"--replicas=3 (a 3-node cluster), or allow it: allow_single_replica=True "
                      f"(URL ?allow_single_replica=1)")


class JetStreamStore:
    """The runs of one JetStream stream (docs/store.md "The JetStream store").

    ``url``: ``nats://HOST:PORT[,...]/STREAM[?...]`` (:func:`parse_url`) or ``nats://HOST:PORT`` with
    ``stream``; ``context``: a ``nats context`` name supplying servers and credentials;
    ``allow_single_replica``: accept an R1 stream; ``timeout`` (s) per request; ``attempts``: publishes of
    one record before the journal is poisoned.  The same methods as :class:`fiskj.store.FileStore`
    (``create``, ``open``, ``load``, ``list``, ``delete``) plus ``close``.  ``reading``: the source of a
    ``fiskj session migrate`` (its storage and replica count are not refused: they are what its runs move away
    from).  Construction raises
    :class:`StreamRefused` (a missing or unsafe stream), :class:`StoreIOError` (no server), :class:`UsageError`.
    """

    def __init__(self, url: str | None = None, stream: str | None = None, *, context: str | None = None,
                 allow_single_replica: bool = False, timeout: float = 5.0, attempts: int = 5,
                 reading: bool = False) -> None:
        opts: dict[str, Any] = parse_url(url) if url and urllib.parse.urlsplit(url).path.strip("/") else {}
        if url and not opts:
            opts["servers"] = url.split(",")
        context = context or opts.pop("context", None)
        conn = _context(context) if context else {}
        conn.update({k: v for k, v in opts.items() if k in ("servers", "user", "password")})
        self.stream = stream or opts.get("stream")
        if not self.stream:
            raise UsageError("a JetStream store needs a stream name (nats://HOST:PORT/STREAM)")
        self.allow_single_replica = allow_single_replica or opts.get("allow_single_replica", False)
        self.attempts = attempts
        conn.setdefault("servers", ["nats://127.0.0.1:4222"])
        self.client = NatsClient(timeout=opts.get("timeout", timeout), **conn)
        self.servers = self.client.servers
        try:
            info = self._call(self.client.js.stream_info(self.stream), "binding the stream")
            self.prefix = _prefix(self.stream, info.config.subjects or [])
            _check_config(self.stream, info.config, self.allow_single_replica, reading)
        except BaseException:
            self.client.close()
            raise

    def __repr__(self) -> str:
        return f"JetStreamStore({self.location()!r})"

    def __enter__(self) -> "JetStreamStore":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent); journals of this store cannot append afterwards."""
        self.client.close()

    # -- names -----------------------------------------------------------------------------------

    def location(self, run_id: str | None = None) -> str:
        """``nats://SERVERS/STREAM``, or the run's subjects ``... PREFIX.ID.>`` (for messages)."""
        where = f"{','.join(self.servers)}/{self.stream}"
        return where if run_id is None else f"{where} {self.run_subjects(run_id)}"

    def subject(self, run_id: str, seq: int) -> str:
        """The subject of record ``seq`` of run ``run_id``: ``PREFIX.ID._meta`` for seq 1, else ``PREFIX.ID.SEQ``."""
        return f"{self.prefix}.{run_id}.{META_TOKEN if seq == 1 else seq}"

    def run_subjects(self, run_id: str) -> str:
        """The wildcard of every record of the run, ``PREFIX.ID.>`` (the fence's, the reader's, the purge's)."""
        return f"{self.prefix}.{run_id}.>"

    # -- plumbing --------------------------------------------------------------------------------

    def _call(self, coro: Awaitable[T], what: str, run_id: str | None = None) -> T:
        """Run ``coro``; a missing stream is :class:`StreamRefused`, any other failure :class:`StoreIOError`."""
        from nats.js.errors import NotFoundError

        try:
            return self.client.run(coro)
        except FiskjError:
            raise
        except NotFoundError:
            raise _refuse(self.stream, "stream", f"does not exist on {','.join(self.servers)}",
                          f"{_add_command(self.stream)} (one server: --replicas=1, and allow_single_replica)") from None
        except Exception as exc:
            raise StoreIOError(f"{what} failed: {type(exc).__name__}: {exc}", path=self.location(run_id),
                               run_id=run_id, errno=errno.EIO) from None

    def _subjects(self, pattern: str, run_id: str | None = None) -> dict[str, int]:
        info = self._call(self.client.js.stream_info(self.stream, subjects_filter=pattern), "stream info", run_id)
        return info.state.subjects or {}

    async def _read(self, run_id: str, count: int) -> list[tuple[int, str, bytes]]:
        """The first ``count`` messages of the run, by an ordered consumer: (stream seq, subject, body)."""
        sub = await self.client.js.subscribe(self.run_subjects(run_id), stream=self.stream, ordered_consumer=True)
        try:
            out = []
            while len(out) < count:
                msg = await sub.next_msg(timeout=self.client.timeout)
                out.append((msg.metadata.sequence.stream, msg.subject, msg.data))
            return out
        finally:
            await sub.unsubscribe()

    def _messages(self, run_id: str, from_leader: bool = False) -> list[tuple[int, int, str, bytes]]:
        """Every message on the run's subjects, sorted by record seq: (seq, stream seq, subject, body); the seq is
        the subject's last token (``_meta``: 1; a token that is not a number: 0).  Read by an ordered consumer, or
        ``from_leader``: one get per subject, answered by the stream's leader.  Raises :class:`StoreIOError`."""
        subjects = self._subjects(self.run_subjects(run_id), run_id)
        if from_leader:
            msgs = self._call(self._get_each(list(subjects)), "reading the run", run_id)
        else:
            msgs = self._call(self._read(run_id, sum(subjects.values())), "reading the run", run_id) if subjects else []
        keyed = []
        for sseq, subject, body in msgs:
            token = subject.rsplit(".", 1)[-1]
            keyed.append((1 if token == META_TOKEN else int(token) if token.isdigit() else 0, sseq, subject, body))
        return sorted(keyed)

    async def _get_each(self, subjects: list[str]) -> list[tuple[int, str, bytes]]:
        """The last message of each of ``subjects``, one get each (``$JS.API.STREAM.MSG.GET``, which the stream's
        leader answers): (stream seq, subject, body); a subject the leader holds no message of (err_code 10037)
        is left out."""
        from nats.js.errors import NotFoundError

        out = []
        for subject in subjects:
            try:
                msg = await self.client.js.get_msg(self.stream, subject=subject)
            except NotFoundError:
                continue
            out.append((msg.seq, subject, msg.data or b""))
        return out

    def raw_records(self, run_id: str, *, from_leader: bool = False) -> list[tuple[int, bytes]]:
        """The run's records as the stream holds them, neither decoded nor folded: ``(seq, body)`` in seq order
        (``body`` the file journal's line without its ``\\n``; seq from the subject).  Empty when no message is
        on the run's subjects; records with no meta record (seq 1) are returned as they are.  ``from_leader``:
        each subject's message as the stream's leader serves it, one get each, instead of an ordered consumer
        (which the server may place on any replica, so two reads of a stream with a damaged replica can differ:
        an oracle reads this way, docs/jetstream.md).  Raises :class:`InvalidRunID`, :class:`StoreIOError`."""
        validate_run_id(run_id)
        return [(seq, body) for seq, _, _, body in self._messages(run_id, from_leader)]

    def _fold(self, run_id: str) -> tuple[Folder, int, int, list[Record]]:
        """Read and fold run ``run_id``: (folder, file-equivalent size in bytes, stream seq of its last record,
        the records)."""
        keyed = self._messages(run_id)
        if not any(seq == 1 for seq, *_ in keyed):
            raise RunNotFound(f"no run {run_id} on stream {self.stream}", path=self.location(run_id), run_id=run_id)
        folder, size, records = Folder(), 0, []
        for seq, _, subject, body in keyed:
            try:
                record = decode_record(body)
                if record.seq != seq:
                    raise ConsistencyError(f"the record on {subject} has seq {record.seq}", field="seq")
                folder.add(record)
                records.append(record)
            except JournalError as exc:
                raise type(exc)(exc.message, **{**exc.context, "path": subject, "line": seq, "run_id": run_id}) \
                    from None
            size += len(body) + 1
        _check_run_id(folder, run_id, self.location(run_id))
        return folder, size, max((k[1] for k in keyed), default=0), records

    # -- the store's operations --------------------------------------------------------------------

    def create(self, run_id: str, meta: MetaRecord) -> "JetStreamJournal":
        """Create run ``run_id`` with ``meta`` as seq 1 (a fenced publish on an empty run); return its journal.

        Raises :class:`InvalidRunID`, :class:`InvalidRecord` (not a MetaRecord, or its ``run_id`` differs),
        :class:`RunExists` (the run has a record, or a concurrent creator won), :class:`StoreIOError`.
        """
        check_create(run_id, meta)
        journal = JetStreamJournal(self, run_id, None, 0, 0)
        journal.append(meta)
        return journal

    def open(self, run_id: str) -> "JetStreamJournal":
        """Read and fold run ``run_id``; return its journal, fenced on its last record.

        There is no lock: a second writer is refused by the fence at its first append (:class:`RunLocked`).
        Raises :class:`InvalidRunID`, :class:`RunNotFound`, :class:`CorruptJournal`,
        :class:`ConsistencyError`, :class:`UnsupportedVersion` (``path`` the subject, ``line`` the seq),
        :class:`StoreIOError`.
        """
        validate_run_id(run_id)
        folder, size, tail, _ = self._fold(run_id)
        return JetStreamJournal(self, run_id, folder, size, tail)

    def load(self, run_id: str) -> RunState:
        """Read and fold run ``run_id``; changes nothing.  Raises as :meth:`open`."""
        validate_run_id(run_id)
        folder, size, _, _ = self._fold(run_id)
        return folder.state(torn_tail=None, good_size=size)

    def records(self, run_id: str) -> list[Record]:
        """The records of run ``run_id`` in seq order (what ``fiskj session migrate`` copies).  Raises as :meth:`open`."""
        validate_run_id(run_id)
        return self._fold(run_id)[3]

    def list(self) -> list[RunInfo]:
        """A :class:`RunInfo` per run (a meta subject), sorted by id; a run that does not fold is ``unreadable``."""
        ids = sorted(s.split(".")[-2] for s in self._subjects(f"{self.prefix}.*.{META_TOKEN}"))
        out = []
        for run_id in filter(is_valid_run_id, ids):
            where = self.location(run_id)
            try:
                state = self.load(run_id)
            except RunNotFound:
                continue  # deleted since
            except FiskjError as exc:
                out.append(RunInfo(id=run_id, path=where, error=exc))
                continue
            out.append(RunInfo(id=run_id, path=where, created=state.meta.created, model=state.fingerprint.model,
                               prompt=state.prompt, status=state.status, records=state.records))
        return out

    def delete(self, run_id: str) -> None:
        """Purge every record of run ``run_id``.  No lock: a writer still appending is refused by its fence
        only if it appends after the purge onto a non-empty run.  Raises :class:`RunNotFound`, :class:`StoreIOError`."""
        validate_run_id(run_id)
        if not self._subjects(self.subject(run_id, 1), run_id):
            raise RunNotFound(f"no run {run_id} on stream {self.stream}", path=self.location(run_id), run_id=run_id)
        self._call(self.client.js.purge_stream(self.stream, subject=self.run_subjects(run_id)), "purging the run",
                   run_id)


class JetStreamJournal(Journal):
    """The writer of one run on a :class:`JetStreamStore`: :class:`fiskj.journal.Journal`'s checks and fold,
    each record one fenced publish (module docstring).  ``nonce``: this open's ``Nats-Msg-Id`` prefix;
    ``tail``: the stream sequence of the run's last record."""

    STORE = "JetStreamStore"

    def __init__(self, store: JetStreamStore, run_id: str, folder: Folder | None, size: int, tail: int) -> None:
        super().__init__(run_id=run_id, path=store.location(run_id), directory=store.location(), fd=None,
                         lock=None, folder=folder, size=size, new=False)
        self.store, self.tail, self.nonce = store, tail, secrets.token_hex(16)

    def _write_line(self, line: bytes, seq: int) -> None:
        from nats.errors import Error as NatsError
        from nats.js.errors import APIError, ServiceUnavailableError

        store, subject, msg_id = self.store, self.store.subject(self.run_id, seq), f"{self.nonce}-{seq}"
        headers = self.headers(msg_id)
        failure: Exception | None = None
        tries = 0
        for attempt in range(store.attempts):
            tries = attempt + 1
            if attempt:
                time.sleep(min(0.05 * 2 ** attempt, 1.0))
            try:
                ack = store.client.run(store.client.answer(store.client.js.publish(subject, line[:-1],
                                                                                   headers=dict(headers))))
            except ServiceUnavailableError as exc:  # no leader for now: try again
                failure = exc
                if exc.err_code == SUBJECT_FULL:  # the subject holds its one message already: no retry changes that
                    break
            except APIError as exc:
                if exc.err_code != WRONG_LAST_SEQUENCE:
                    failure = exc
                    break
                self._fenced(subject, msg_id, seq)
                return
            except (NatsError, TimeoutError, asyncio.TimeoutError, AnswerLost) as exc:  # the ack may be lost: same publish again
                failure = exc
            else:
                self.tail = ack.seq  # ack.duplicate: our own earlier publish had landed (same Nats-Msg-Id)
                ioseam.published(self.path, line)
                return
        raise self._fail("write", seq, OSError(errno.EIO, f"publish to {subject} not acknowledged after "
                                                          f"{tries} attempt(s): {type(failure).__name__}: {failure}"))

    def headers(self, msg_id: str) -> dict[str, str]:
        """The headers of a publish: its ``Nats-Msg-Id`` and the fence (the stream sequence of the run's last
        record, over the run's subjects)."""
        return {"Nats-Msg-Id": msg_id, "Nats-Expected-Last-Subject-Sequence": str(self.tail),
                "Nats-Expected-Last-Subject-Sequence-Subject": self.store.run_subjects(self.run_id)}

    def _fenced(self, subject: str, msg_id: str, seq: int) -> None:
        """The fence refused record ``seq``: adopt it when its subject holds our own publish (a lost ack),
        else poison and raise :class:`RunLocked` (:class:`RunExists` for the meta record)."""
        from nats.js.errors import NotFoundError

        try:
            msg = self.store.client.run(self.store.client.js.get_last_msg(self.store.stream, subject))
        except NotFoundError:
            msg = None
        except Exception as exc:  # noqa: BLE001 - cannot tell: the record may be ours
            raise self._fail("write", seq, OSError(errno.EIO, f"fenced publish of {subject}, then reading it "
                                                              f"back failed: {type(exc).__name__}: {exc}")) from None
        if msg is not None and (msg.headers or {}).get("Nats-Msg-Id") == msg_id:
            self.tail = msg.seq
            ioseam.published(self.path, msg.data + b"\n")
            return
        if seq == 1:
            self._poison = "a concurrent creator made the run"
            raise RunExists(f"run {self.run_id} already exists on stream {self.store.stream}; pick another id, "
                            f"or open it to resume", path=self.path, run_id=self.run_id)
        how = "another writer advanced it" if msg is not None else "another writer advanced it or it was deleted"
        self._poison = f"{how} before seq {seq}"
        raise RunLocked(f"run {self.run_id}: {how}, so record {seq} was refused by the fence and nothing was "
                        f"written; another process holds this run", path=self.path, run_id=self.run_id)

    def _release(self) -> None:
        """Nothing to release: the fence, not a lock, keeps other writers out; the store owns the connection."""
