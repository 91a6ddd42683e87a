"""The JetStream store (fiskj/jetstream.py; docs/store.md "The JetStream store"; issue 28) on a real nats-server:
the wire contract, the fence, lost-ack adoption, concurrent creators, construction refusals, migration
between backends, and a 3-node cluster losing a follower."""

from __future__ import annotations

import asyncio
import json
import signal
import threading

import pytest

from builders import A, M, R, T
from fiskj.cli import main
from fiskj.codec import encode_record
from fiskj.errors import CorruptJournal, JournalPoisoned, RunExists, RunLocked, RunNotFound, StoreIOError, StreamRefused, UsageError
from fiskj.jetstream import JetStreamStore, NatsClient, parse_url
from fiskj.store import FileStore
from harness.subject.nats_server import add_stream, meta_leader, start_cluster, stream_leader
from nats_helpers import Stream, nats_server, stream  # noqa: F401 - fixtures

RUN = [A("t1", iteration=0, stop="tool_use"), R("t1", "out <1> & done"), T("suspended", "by request"),
       A("t2", iteration=1, stop="tool_use"), R("t2", "more"), A(text="answer", iteration=2), T("error", "budget")]


def _messages(stream, run_id):
    """Every message of the run on the server: (stream seq, subject, headers, body), in stream order."""
    client = NatsClient([stream.server.url])
    try:
        info = client.run(client.js.stream_info(stream.name, subjects_filter=f"{stream.prefix}.{run_id}.>"))
        out = []
        for subject in info.state.subjects or {}:
            m = client.run(client.js.get_last_msg(stream.name, subject))
            out.append((m.seq, m.subject, m.headers or {}, m.data))
        return sorted(out)
    finally:
        client.close()


def _write(store, run_id, records):
    journal = store.create(run_id, M(run_id))
    for record in records:
        journal.append(record)
    return journal


def test_wire_contract_subjects_headers_and_bodies_are_the_file_lines(stream, tmp_path):
    journal = _write(stream.store(), "w1", RUN)
    _write(FileStore(tmp_path), "w1", RUN).close()
    lines = (tmp_path / "w1.json").read_bytes().splitlines(keepends=True)
    msgs = _messages(stream, "w1")
    assert [m[1] for m in msgs] == [f"{stream.prefix}.w1._meta"] + [f"{stream.prefix}.w1.{s}" for s in range(2, 9)]
    assert [m[2]["Nats-Msg-Id"] for m in msgs] == [f"{journal.nonce}-{s}" for s in range(1, 9)]
    assert [m[3] + b"\n" for m in msgs] == lines  # fisk-ai's body: the line without its terminator
    assert msgs[2][3] == encode_record(RUN[1], 3)[:-1] and b"\\u003c1\\u003e" in msgs[2][3]
    assert journal.tail == msgs[-1][0] and journal.last_seq == 8
    state = stream.store().load("w1")
    assert state.to_json() == FileStore(tmp_path).load("w1").to_json()


def test_the_prefix_is_the_streams_single_wildcard_subject(nats_server):
    add_stream([nats_server.url], "DEEP", prefix="a.b", subjects=["a.b.>", "literal.x"])
    with JetStreamStore(f"{nats_server.url}/DEEP", allow_single_replica=True) as store:
        assert store.prefix == "a.b"
        store.create("r", M("r")).append(T())
        assert store.load("r").status == "completed" and [i.id for i in store.list()] == ["r"]


def test_the_fence_refuses_a_stale_writer_and_nothing_interleaves(stream):
    first = _write(stream.store(), "f1", RUN[:2])
    stale = stream.store().open("f1")                 # both hold the run as of seq 3
    first.append(A(text="mine", iteration=1))         # seq 4 by the first writer
    with pytest.raises(RunLocked, match="another writer"):
        stale.append(A(text="theirs", iteration=1))
    with pytest.raises(JournalPoisoned):
        stale.append(T())
    first.append(T())
    msgs = _messages(stream, "f1")
    assert [m[2]["Nats-Msg-Id"].split("-")[0] for m in msgs] == [first.nonce] * 5
    state = stream.store().load("f1")
    assert state.records == 5 and state.status == "completed" and state.messages[-1]["content"][0]["text"] == "mine"


def test_the_fence_refuses_a_writer_whose_run_was_deleted_under_it_and_nothing_lands(stream, monkeypatch):
    store = stream.store()
    stale = _write(store, "g1", RUN[:2])              # holds the run as of seq 3
    stream.store().delete("g1")                       # fiskj session rm, from another process
    with pytest.raises(RunLocked, match="another writer"):
        stale.append(A(text="late", iteration=1))     # seq 4: its subject is empty, the fence is not
    assert _messages(stream, "g1") == [] and store.raw_records("g1") == []
    ghost = _write(store, "g2", RUN[:2])
    stream.store().delete("g2")
    monkeypatch.setattr(type(ghost), "headers", lambda self, msg_id: {"Nats-Msg-Id": msg_id})  # no fence
    assert ghost.append(A(text="late", iteration=1)) == 4  # one message per subject does not stop it: it lands
    assert [seq for seq, _ in store.raw_records("g2")] == [4]  # in a deleted run, with no meta record
    with pytest.raises(RunNotFound):
        store.load("g2")
    monkeypatch.undo()
    with pytest.raises(RunExists):                    # and the id cannot be used again, even by a fenced writer
        store.create("g2", M("g2"))


def test_without_the_fence_a_stale_writer_of_a_live_run_is_still_refused_by_one_message_per_subject(stream,
                                                                                                    monkeypatch):
    first = _write(stream.store(), "h1", RUN[:2])
    stale = stream.store().open("h1")
    first.append(A(text="mine", iteration=1))
    monkeypatch.setattr(type(stale), "headers", lambda self, msg_id: {"Nats-Msg-Id": msg_id})  # no fence
    js, calls = stale.store.client.js, []
    real = js.publish

    async def publish(subject, payload=b"", **kw):
        calls.append(subject)
        return await real(subject, payload, **kw)

    monkeypatch.setattr(js, "publish", publish)
    with pytest.raises(StoreIOError, match="maximum messages per subject"):  # err 10077: not RunLocked, no retry
        stale.append(A(text="theirs", iteration=1))
    monkeypatch.undo()
    assert len(calls) == 1  # refused for good: not published again
    assert [m[2]["Nats-Msg-Id"].split("-")[0] for m in _messages(stream, "h1")] == [first.nonce] * 4


def test_raw_records_are_the_bodies_on_the_runs_subjects_in_seq_order(stream):
    store = stream.store()
    _write(store, "r1", RUN[:3])
    raw = store.raw_records("r1")
    assert [seq for seq, _ in raw] == [1, 2, 3, 4]
    assert [body for _, body in raw] == [m[3] for m in _messages(stream, "r1")]
    assert store.raw_records("none") == []


def _lose_first_ack(monkeypatch, journal, after_landing=lambda: None):
    """The journal's next publish lands on the server, but its ack is lost (a TimeoutError instead)."""
    js = journal.store.client.js
    real = js.publish
    calls = []

    async def publish(subject, payload=b"", **kw):
        calls.append(subject)
        ack = await real(subject, payload, **kw)
        if len(calls) == 1:
            await after_landing(subject, payload, kw["headers"])
            raise TimeoutError("ack lost")
        return ack

    monkeypatch.setattr(js, "publish", publish)
    return calls


def test_a_retry_after_a_lost_ack_is_answered_as_its_own_duplicate(stream, monkeypatch):
    journal = _write(stream.store(), "l1", RUN[:1])

    async def nothing(*_):
        pass

    calls = _lose_first_ack(monkeypatch, journal, nothing)
    assert journal.append(R("t1", "ok")) == 3
    journal.append(A(text="answer", iteration=1))
    assert calls[:2] == [f"{stream.prefix}.l1.3"] * 2       # published twice ...
    msgs = _messages(stream, "l1")
    assert len(msgs) == 4 and journal.tail == msgs[-1][0]    # ... stored once, and the next append is fenced on it
    assert stream.store().load("l1").records == 4


def test_a_publish_whose_connection_drops_is_asked_again_once_reconnected_not_after_its_timeout(stream, monkeypatch):
    journal = _write(stream.store(timeout=20.0), "l3", RUN[:1])
    client = journal.store.client
    real, calls, ended = client.js.publish, [], []

    async def publish(subject, payload=b"", **kw):
        calls.append(subject)
        if len(calls) > 1:
            return await real(subject, payload, **kw)
        await real(subject, payload, **kw)  # it lands; then the connection drops before the ack is read (what a
        client.nc._transport.close()        # killed server leaves; nats-py's transport, closed under the client)
        try:
            await asyncio.sleep(20)  # the ack never comes: nats-py would time the request out
        except asyncio.CancelledError:
            ended.append("cancelled")  # NatsClient.answer: the client connected again, the answer cannot come
            raise
        ended.append("timed out")
        raise TimeoutError("ack lost")

    monkeypatch.setattr(client.js, "publish", publish)
    assert journal.append(R("t1", "ok")) == 3
    assert ended == ["cancelled"] and calls == [f"{stream.prefix}.l3.3"] * 2  # asked again, adopted as its own
    assert client.nc.stats["reconnects"] == 1 and stream.store().load("l3").records == 3


def test_a_retry_after_a_lost_ack_past_the_duplicate_window_reads_back_and_adopts_its_record(nats_server,
                                                                                             monkeypatch):
    s = Stream(nats_server, duplicate_window=0.1)
    try:
        journal = _write(s.store(), "l2", RUN[:1])
        probe = NatsClient([nats_server.url])
        from nats.js.errors import APIError

        async def until_forgotten(subject, payload, headers):
            # The record landed; wait until the server no longer knows its Nats-Msg-Id (observed: the same
            # publish, unfenced, is refused by the one-message-per-subject limit instead of deduplicated).
            # The probe's publish runs on the probe's own loop (awaited here, on the journal's, its answer
            # would wake this loop only on the journal connection's next event: seconds, not the window).
            while True:
                try:
                    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
                        probe.js.publish(subject, payload, headers={"Nats-Msg-Id": headers["Nats-Msg-Id"]}),
                        probe.loop))
                except APIError as exc:
                    assert exc.err_code == 10077  # maximum messages per subject exceeded
                    return

        calls = _lose_first_ack(monkeypatch, journal, until_forgotten)
        assert journal.append(R("t1", "ok")) == 3           # the retry is fenced out, reads back its own id, adopts
        journal.append(T())
        assert len(calls) == 3 and len(_messages(s, "l2")) == 4
        assert s.store().load("l2").status == "completed"
        probe.close()
    finally:
        for store in s.stores:
            store.close()


def test_concurrent_creators_one_wins_the_other_gets_exists(stream):
    stores = [stream.store(), stream.store()]
    barrier, outcome = threading.Barrier(2), [None, None]

    def create(i):
        barrier.wait()
        try:
            outcome[i] = stores[i].create("c1", M("c1"))
        except RunExists as exc:
            outcome[i] = exc

    threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcome if not isinstance(o, Exception)]
    assert len(winners) == 1 and sum(isinstance(o, RunExists) for o in outcome) == 1
    msgs = _messages(stream, "c1")
    assert len(msgs) == 1 and msgs[0][2]["Nats-Msg-Id"] == f"{winners[0].nonce}-1"
    with pytest.raises(RunExists):
        stores[0].create("c1", M("c1"))
    assert len(_messages(stream, "c1")) == 1


def test_load_names_the_subject_of_a_damaged_record_and_delete_purges(stream):
    store = stream.store()
    _write(store, "d1", RUN[:1])
    client = NatsClient([stream.server.url])
    client.run(client.js.publish(f"{stream.prefix}.d1.3", b'{"seq":3,"protocol":"nope"}'))
    client.close()
    with pytest.raises(CorruptJournal) as info:
        store.open("d1")
    assert info.value.path == f"{stream.prefix}.d1.3" and info.value.line == 3
    assert [i.status for i in store.list()] == ["unreadable"]
    store.delete("d1")
    assert store.list() == [] and _messages(stream, "d1") == []
    for call in (store.load, store.open, store.delete):
        with pytest.raises(RunNotFound):
            call("d1")


UNSAFE = [  # (stream overrides, the refused field, the fix the message names)
    ({"max_msgs_per_subject": 5}, "max_msgs_per_subject", "--max-msgs-per-subject=1"),
    ({"discard_new_per_subject": False}, "discard", "--discard=new --discard-per-subject"),
    ({"max_age": 3600.0}, "max_age", "--max-age=-1"),
    ({"max_msg_size": 1024}, "max_msg_size", "--max-msg-size=-1"),
    ({"storage": "memory"}, "storage", "--storage=file"),
    ({"subjects": ["x.*.y"]}, "subjects", "--subjects 'PREFIX.>'"),
    ({"subjects": ["two1.>", "two2.>"]}, "subjects", "--subjects 'PREFIX.>'"),
]


@pytest.mark.parametrize("overrides,field,fix", UNSAFE, ids=[u[1] + str(i) for i, u in enumerate(UNSAFE)])
def test_construction_refuses_a_stream_that_can_lose_or_mutate_a_record(nats_server, overrides, field, fix):
    s = Stream(nats_server, **overrides)
    with pytest.raises(StreamRefused, match=f"nats stream (edit|add) .*{fix.replace('.', '[.]')}") as info:
        s.store()
    assert info.value.field == field


def test_construction_refuses_a_single_replica_unless_allowed_and_a_missing_stream(stream):
    with pytest.raises(StreamRefused, match="--replicas=3") as info:
        JetStreamStore(stream.server.url, stream.name)
    assert info.value.field == "num_replicas"
    JetStreamStore(stream.server.url, stream.name, allow_single_replica=True).close()
    with pytest.raises(StreamRefused, match="nats stream add NOPE .*--discard-per-subject") as info:
        JetStreamStore(f"{stream.server.url}/NOPE")
    assert info.value.field == "stream"
    port = stream.server.port
    stream.server.port = 1  # nothing listens there: a clear error at once, no endless reconnecting
    try:
        with pytest.raises(StoreIOError, match="cannot connect to NATS at nats://127.0.0.1:1"):
            JetStreamStore(f"{stream.server.url}/{stream.name}")
    finally:
        stream.server.port = port


def test_store_urls():
    assert parse_url("nats://u:p%40ss@h1:1,h2:2/S?allow_single_replica=1&context=c") == {
        "stream": "S", "allow_single_replica": True, "context": "c", "servers": ["nats://h1:1", "nats://h2:2"],
        "user": "u", "password": "p@ss"}
    assert parse_url("nats:///S?context=prod") == {"stream": "S", "allow_single_replica": False, "context": "prod"}
    assert parse_url("nats://h:1/S?timeout=1.5")["timeout"] == 1.5
    for bad in ("nats://h:1", "nats://h:1/S?replicas=1", "http://h/S", "nats://h/a/b", "nats://h:1/S?timeout=0",
                "nats://h:1/S?timeout=soon"):
        with pytest.raises(Exception, match="not a JetStream store URL"):
            parse_url(bad)


def test_a_store_url_s_timeout_bounds_its_requests(nats_server):
    add_stream([nats_server.url], "WAIT", subjects=["wait.>"])
    with JetStreamStore(f"{nats_server.url}/WAIT?allow_single_replica=1&timeout=1.5") as store:
        assert store.client.timeout == 1.5
    with JetStreamStore(f"{nats_server.url}/WAIT?allow_single_replica=1") as store:
        assert store.client.timeout == 5.0


def test_migrate_file_to_jetstream_and_back_folds_identically_byte_for_byte(stream, tmp_path, capsys):
    src, back = tmp_path / "src", tmp_path / "back"
    _write(FileStore(src), "m1", RUN).close()
    _write(FileStore(src), "m2", RUN[:2]).close()
    assert main(["session", "migrate", "--from", str(src), "--to", stream.url]) == 0
    assert main(["session", "migrate", "--from", stream.url, "--to", str(back), "m1", "m2"]) == 0
    assert "migrated run m2: 3 records" in capsys.readouterr().out
    for run_id in ("m1", "m2"):
        lines = (src / f"{run_id}.json").read_bytes()
        assert (back / f"{run_id}.json").read_bytes() == lines
        assert [m[3] + b"\n" for m in _messages(stream, run_id)] == lines.splitlines(keepends=True)
        assert FileStore(back).load(run_id).to_json() == FileStore(src).load(run_id).to_json()
    assert main(["session", "migrate", "--from", str(src), "--to", stream.url, "m1"]) == 1
    assert "RunExists" in capsys.readouterr().err
    assert main(["session", "show", "m1", "--store", stream.url, "--json"]) == 0
    assert '"status": "error"' in capsys.readouterr().out


def test_a_memory_stream_is_refused_for_use_but_migrate_reads_its_runs_away_to_a_safe_store(nats_server, tmp_path,
                                                                                             capsys):
    memory = Stream(nats_server, storage="memory")
    with pytest.raises(StreamRefused, match="migrate --from .* --to .*reads a memory stream") as info:
        memory.store()
    assert info.value.field == "storage" and "--subjects 'PREFIX.>'" in str(info.value)
    _write(memory.store(reading=True), "r1", RUN).close()  # runs left on such a stream (written before the check)
    assert main(["session", "migrate", "--from", memory.url, "--to", str(tmp_path / "safe")]) == 0
    assert "migrated run r1" in capsys.readouterr().out
    assert FileStore(tmp_path / "safe").load("r1").records == len(RUN) + 1  # the meta record and RUN


def test_a_three_node_cluster_keeps_appending_when_a_follower_is_killed(tmp_path):
    cluster = start_cluster(str(tmp_path), sync_interval="always")
    try:
        add_stream(cluster.urls, "R3", replicas=3)
        with JetStreamStore(f"{cluster.url}/R3", timeout=2.0) as store:  # a publish to the killed node: retried in 2 s
            journal = _write(store, "k1", RUN[:2])
            leader, meta = stream_leader(cluster.urls, "R3"), meta_leader(cluster.servers)
            # a stream follower that does not lead the meta group (if it did, its restart would wait out a
            # meta leader election, 4-9 s; the stream's own group is what the appends need)
            follower = next(s for s in cluster.servers if s.name != leader and (s.name != meta or leader == meta))
            assert follower.stop(signal.SIGKILL) == -signal.SIGKILL
            journal.append(A(text="answer", iteration=1))
            journal.append(T())
            follower.start()
            assert store.load("k1").status == "completed" and store.load("k1").records == 5
    finally:
        cluster.stop(signal.SIGKILL)


def test_fiskj_run_checkpoints_and_resumes_a_run_on_jetstream(stream, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the scripted model's tools write there
    argv = ["run", "-q", "--checkpoint", "--name", "j1", "--store", stream.url, "--model", "scripted:0"]
    assert main([*argv, "--max-iterations", "1", "go"]) == 1
    assert stream.store().load("j1").terminal.reason == "max_iterations"
    assert main(["run", "-q", "--resume", "j1", "--store", stream.url, "--max-iterations", "9", "--force"]) == 0
    state = stream.store().load("j1")
    assert state.status == "completed" and state.records == len(_messages(stream, "j1"))
    before = _messages(stream, "j1")
    assert main(["run", "-q", "--resume", "j1", "--store", stream.url]) == 2  # completed: refused, nothing appended
    assert _messages(stream, "j1") == before


def test_a_nats_context_supplies_the_servers_and_a_setting_fiskj_cannot_honour_is_refused(stream, tmp_path,
                                                                                          monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "nats" / "context").mkdir(parents=True)
    (tmp_path / "nats" / "context" / "here.json").write_text(json.dumps({"url": stream.server.url, "token": ""}))
    (tmp_path / "nats" / "context" / "tls.json").write_text(json.dumps({"url": stream.server.url, "cert": "c.pem"}))
    with JetStreamStore(f"nats:///{stream.name}?context=here&allow_single_replica=1") as store:
        assert store.servers == [stream.server.url]
        store.create("x1", M("x1"))
    with pytest.raises(UsageError, match="sets cert"):
        JetStreamStore(f"nats:///{stream.name}?context=tls")
    with pytest.raises(UsageError, match="cannot read nats context 'absent'"):
        JetStreamStore(f"nats:///{stream.name}", context="absent")
