import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiskj.errors import ConsistencyError, UnsupportedVersion
from fiskj.fold import Folder, fold

from builders import A, M, R, T, U, numbered


def folded(*records):
    return fold(numbered(*records))


def test_messages_start_with_the_prompt_as_one_user_text_block():
    state = folded(M(prompt="hello"))
    assert state.messages == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert state.status == "open" and state.next_iteration == 0 and state.pending is None


@pytest.mark.parametrize("prompt", [None, ""])
def test_an_absent_or_empty_prompt_starts_with_one_user_message_holding_one_empty_text_block(prompt):
    # As fisk-ai folds it: the first message is always the user's, never the assistant's.
    state = folded(M(prompt=prompt), A(text="hi"))
    assert state.messages[0] == {"role": "user", "content": [{"type": "text", "text": ""}]}
    assert [m["role"] for m in state.messages] == ["user", "assistant"]


def test_a_chat_follow_up_after_an_empty_prompt_merges_into_the_first_user_message():
    state = folded(M(prompt=None, interactive=True), U("first question"), A(text="answer"))
    assert state.messages == [
        {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "first question"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]}]


def test_an_assistant_record_commits_the_previous_turn_with_its_results_in_journal_order():
    state = folded(M(), A("a", "b"), R("b"), R("a"), A(text="done", iteration=1))
    roles = [m["role"] for m in state.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert [b["tool_use_id"] for b in state.messages[2]["content"]] == ["b", "a"]
    assert state.next_iteration == 2 and state.last_stop_reason == "end_turn"


def test_field_case_f10_dangling_tool_use_becomes_the_pending_turn():
    state = folded(M(), A("a", "b"), R("a"))
    assert state.pending is not None
    assert state.pending.unanswered == ["b"] and state.pending.answered == ["a"]
    assert state.pending.tool_use_ids == ["a", "b"]
    assert [m["role"] for m in state.messages] == ["user"]
    assert state.next_iteration == 1


def test_field_case_f16_in_flight_work_is_the_only_unanswered_id():
    state = folded(M(), A("a", "b", "c"), R("a"), R("b"))
    assert state.pending.unanswered == ["c"]


def test_field_case_f11_an_orphan_tool_result_is_an_error_naming_line_4():
    with pytest.raises(ConsistencyError) as info:
        folded(M(), A("a"), R("a"), R("z"))
    assert info.value.line == 4 and "orphan" in info.value.message


def test_field_case_f12_a_duplicate_tool_result_is_an_error():
    with pytest.raises(ConsistencyError) as info:
        folded(M(), A("a"), R("a"), R("a"))
    assert info.value.line == 4 and "duplicate" in info.value.message


def test_a_tool_result_before_any_assistant_is_an_error():
    with pytest.raises(ConsistencyError, match="no open assistant"):
        folded(M(), R("a"))


@pytest.mark.parametrize("records, line, match", [
    ([], 1, "empty"),
    ([A("a")], 1, "expected meta"),
    ([M(), M()], 2, "duplicate meta"),
])
def test_structural_errors_name_the_line(records, line, match):
    with pytest.raises(ConsistencyError, match=match) as info:
        fold(numbered(*records))
    assert info.value.line == line


def test_a_seq_that_repeats_or_skips_is_an_error():
    recs = numbered(M(), A("a"), R("a"))
    with pytest.raises(ConsistencyError, match="repeated"):
        fold([recs[0], recs[1], recs[1]])
    with pytest.raises(ConsistencyError, match="skips"):
        fold([recs[0], recs[2]])


def test_a_user_record_merges_into_a_trailing_user_message():
    state = folded(M(), A("a"), R("a"), U("more"))
    assert [m["role"] for m in state.messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in state.messages[2]["content"]] == ["tool_result", "text"]


def test_a_user_record_after_an_answer_starts_a_new_user_message():
    state = folded(M(), A(text="hi"), U("again"))
    assert [m["role"] for m in state.messages] == ["user", "assistant", "user"]


def test_a_new_turn_while_tools_are_unanswered_is_an_error():
    with pytest.raises(ConsistencyError, match="unanswered"):
        folded(M(), A("a", "b"), R("a"), A(text="x", iteration=1))
    with pytest.raises(ConsistencyError, match="unanswered"):
        folded(M(), A("a"), U())


def test_counters_are_summed_from_the_records():
    state = folded(M(), A("a", in_tokens=3, out_tokens=4, cache_read_tokens=5, cache_create_tokens=6),
                   R("a", remote=True), A(text="x", iteration=1, in_tokens=1, out_tokens=1))
    c = state.counters
    assert (c.llm_calls, c.tool_calls, c.remote_tool_calls) == (2, 1, 1)
    assert (c.in_tokens, c.out_tokens, c.cache_read_tokens, c.cache_create_tokens) == (4, 5, 5, 6)
    assert c.total_tokens == 20


def test_status_is_the_last_records_terminal_reason_else_open():
    assert folded(M(), A(text="x"), T("completed")).status == "completed"
    assert folded(M(), T("suspended")).status == "suspended"
    # Defect 5 of fisk-ai: a resumed run that then crashed is open, not suspended.
    state = folded(M(), A("a"), T("suspended"), R("a"))
    assert state.status == "open" and state.terminal.reason == "suspended"


def test_records_after_a_completed_terminal_are_an_error():
    with pytest.raises(ConsistencyError, match="after a 'completed' terminal record .*never continued") as info:
        folded(M(), A(text="x"), T("completed"), A(text="y", iteration=1))
    assert info.value.line == 4
    with pytest.raises(ConsistencyError, match="after a 'completed'"):
        folded(M(), A(text="x"), T("suspended"), T("completed"), T("completed"))


@pytest.mark.parametrize("reason", ["suspended", "error", "budget", "max_iterations", "a_future_reason"])
def test_every_terminal_but_completed_ends_one_leg_and_the_next_leg_appends_after_it(reason):
    # fisk-ai resumes every run that is not completed, and each leg writes its own terminal record.
    ended = folded(M(), A("a", "b"), R("a"), T(reason))
    assert (ended.status, ended.resumable) == (reason, True)
    assert ended.pending.unanswered == ["b"]  # the pending turn survives the terminal record
    resumed = folded(M(), A("a", "b"), R("a"), T(reason), R("b"), A(text="done", iteration=1), T("completed"))
    assert (resumed.status, resumed.resumable, resumed.records) == ("completed", False, 7)
    assert [m["role"] for m in resumed.messages] == ["user", "assistant", "user", "assistant"]
    assert resumed.final_answer() == "done" and resumed.counters.tool_calls == 2
    # Between the legs: open, with the earlier terminal still remembered.
    between = folded(M(), A("a", "b"), R("a"), T(reason), R("b"))
    assert (between.status, between.terminal.reason) == ("open", reason)


def test_a_run_may_end_several_legs_the_same_way():
    state = folded(M(), A("a"), T("max_iterations"), T("max_iterations"), T("budget"), R("a"), T("error"))
    assert (state.status, state.terminal.seq, state.records) == ("error", 7, 7)


def test_a_pending_turn_survives_a_suspend_terminal():
    state = folded(M(), A("a", "b"), R("a"), T("suspended"))
    assert state.pending.unanswered == ["b"] and state.status == "suspended"
    assert state.resumable


def test_a_newer_meta_version_built_in_code_is_refused():
    with pytest.raises(UnsupportedVersion):
        folded(M(version=3))


def test_a_state_handed_out_is_not_changed_by_later_records():
    f = Folder()
    records = numbered(M(), A("a"), R("a"), U("more"), A(text="x", iteration=1), T("completed"))
    states = []
    for r in records:
        f.add(r)
        states.append((f.state(), copy.deepcopy(f.state())))
    for state, snapshot in states:
        assert state == snapshot


_BAD_STREAMS = [
    (R("a"),),  # first record not meta
    (M(), A("a"), R("a"), R("z")),  # orphan
    (M(), A("a"), R("a"), R("a")),  # duplicate
    (M(), R("a")),  # no open assistant turn
    (M(), A("a", "a")),  # a repeated tool_use id
    (M(), A("a", "b"), R("a"), A(text="x", iteration=1)),  # an assistant record over an unanswered id
    (M(), A("a"), U("hi")),  # a user record over an unanswered id
    (M(), M()),  # duplicate meta
    (M(), T("completed"), U("more")),  # after a final terminal
    (M(version=3),),  # newer version
]


@pytest.mark.parametrize("stream", _BAD_STREAMS)
def test_check_raises_what_add_raises_and_changes_nothing(stream):
    records = numbered(*stream)
    *good, bad = records
    f, g = Folder(), Folder()
    for r in good:
        f.check(r)
        f.add(r)
        g.add(r)
    before = copy.deepcopy(f.__dict__)
    with pytest.raises(Exception) as checked:
        f.check(bad)
    assert f.__dict__ == before
    with pytest.raises(Exception) as added:
        g.add(bad)
    assert type(checked.value) is type(added.value)
    assert (checked.value.message, checked.value.line, checked.value.field) == \
        (added.value.message, added.value.line, added.value.field)


def test_check_refuses_a_wrong_seq_like_add():
    f = Folder()
    for r in numbered(M(), A("a")):
        f.add(r)
    for seq in (2, 4):
        bad = numbered(R("a"), start=seq)[0]
        with pytest.raises(ConsistencyError) as info:
            f.check(bad)
        assert info.value.field == "seq" and info.value.line == 3
    f.check(numbered(R("a"), start=3)[0])
    assert f.state().pending is not None  # check added nothing


def test_the_final_answer_is_the_last_assistant_text():
    assert folded(M(), A("a"), R("a"), A(text="forty-two", iteration=1)).final_answer() == "forty-two"


# --- properties ------------------------------------------------------------------

@st.composite
def valid_streams(draw):
    """A valid record stream: turns of 0-3 tools, results in any order, optional user/suspend."""
    records = [M()]
    n_turns = draw(st.integers(0, 5))
    for it in range(n_turns):
        k = draw(st.integers(0, 3))
        ids = [f"t{it}_{j}" for j in range(k)]
        records.append(A(*ids, iteration=it, in_tokens=draw(st.integers(0, 50))))
        for tid in draw(st.permutations(ids)):
            records.append(R(tid, remote=draw(st.booleans())))
            if draw(st.integers(0, 9)) == 0:  # a leg ends mid-batch; the next one appends after it
                records.append(T(draw(st.sampled_from(["suspended", "error", "budget", "max_iterations"]))))
        if not ids and it < n_turns - 1:  # a text answer ends a turn: only a follow-up continues
            records.append(U(f"follow-up {it}"))
    if draw(st.booleans()):
        records.append(T(draw(st.sampled_from(["completed", "suspended", "error"]))))
    return numbered(*records)


@settings(max_examples=150, deadline=None)
@given(valid_streams())
def test_the_fold_of_every_prefix_succeeds_and_agrees_with_the_whole(stream):
    whole = fold(stream)
    folder = Folder()
    for i, rec in enumerate(stream):
        folder.check(rec)
        folder.add(rec)
        prefix = folder.state()
        assert prefix == fold(stream[: i + 1])
        assert prefix.last_seq == rec.seq and prefix.records == i + 1
        # Counters only grow; messages of the prefix are a prefix of the whole's messages.
        for name in ("llm_calls", "tool_calls", "in_tokens"):
            assert getattr(prefix.counters, name) <= getattr(whole.counters, name)
        assert whole.messages[: len(prefix.messages)] == prefix.messages


@settings(max_examples=100, deadline=None)
@given(valid_streams())
def test_the_conversation_is_well_formed_after_any_valid_stream(stream):
    state = fold(stream)
    msgs = state.messages
    for a, b in zip(msgs, msgs[1:]):
        assert a["role"] != b["role"]
    for i, m in enumerate(msgs):
        if m["role"] == "assistant":
            ids = [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
            if ids:
                answered = [b["tool_use_id"] for b in msgs[i + 1]["content"] if b.get("type") == "tool_result"]
                assert sorted(answered) == sorted(ids)
