#!/bin/sh
# The durability report card of agents, docs/agents/README.md and its pages docs/agents/findings/: one campaign
# per agent, then `fiskj-harness card` over their reports.  The card is generated: rebuild it with this script,
# never edit it by hand (docs/results.md "The report card").
#
#   sh scripts/report-card.sh              # every bundled scenario per agent, --trials 2 (the lead's run)
#   sh scripts/report-card.sh quick        # one or two scenarios per fault family, --trials 1 (minutes)
#   CARD_TRIALS=3 CARD_SEED=7 sh scripts/report-card.sh      # more trials, another campaign seed
#   CARD_AGENTS="reference node" sh scripts/report-card.sh quick   # some agents only (the card shows only them)
#   sh scripts/report-card.sh card         # only rebuild the card from the reports already there
#
# Agents (CARD_AGENTS, default all): reference (python -m fiskj), node (subjects/node/profile.toml), claude-code
# (needs FISKJ_CLAUDE_CODE: export FISKJ_CLAUDE_CODE="$(scripts/install-claude-code.sh)"; unset, its row says
# why it did not run), langgraph (subjects/langgraph/profile.toml; its environment made by
# scripts/install-langgraph.sh when FISKJ_LANGGRAPH_PYTHON is unset), fisk-ai
# (subjects/fisk-ai/profile.toml: with no fisk-ai binary its campaign stops before its first trial and its row
# says "not run" with the reason).  Reports: $CARD_RESULTS (default fiskj-results/card/, git-ignored) AGENT.json;
# evidence of failing trials under $CARD_RESULTS/results/.  A campaign's exit 1 (violations) or 2 (setup
# errors, a scenario that cannot apply) is what the card shows; only a missing report stops this script.
set -eu
case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
cd "$here/.."
harness="${FISKJ_HARNESS:-.venv/bin/fiskj-harness}"
results="${CARD_RESULTS:-fiskj-results/card}"
out="${CARD_OUT:-docs/agents/README.md}"
mode="${1:-full}"
seed="${CARD_SEED:-1}"
agents="${CARD_AGENTS:-reference node claude-code langgraph fisk-ai}"
case "$mode" in
    full) trials="${CARD_TRIALS:-2}"; scenarios="" ;;   # every bundled scenario; those that cannot apply: NOT RUN
    quick) trials="${CARD_TRIALS:-1}"
           scenarios="noop-baseline kill-random suspend-clean tails-basic power-loss-basic race-two-resumers io-errors" ;;
    card) ;;
    *) echo "scripts/report-card.sh: unknown mode '$mode' (full, quick or card)" >&2; exit 2 ;;
esac
mkdir -p "$results"

subject_of() {  # the --subject of an agent, empty for the reference
    case "$1" in
        reference) echo "" ;;
        node) echo "subjects/node/profile.toml" ;;
        *) echo "subjects/$1/profile.toml" ;;
    esac
}

reports=""
for agent in $agents; do
    subject="$(subject_of "$agent")"
    if [ -n "$subject" ] && [ ! -f "$subject" ]; then
        echo "scripts/report-card.sh: $agent: no $subject in this checkout, left out of the card" >&2
        continue
    fi
    report="$results/$agent.json"
    if [ "$agent" = langgraph ] && [ -z "${FISKJ_LANGGRAPH_PYTHON:-}" ] && [ "$mode" != card ]; then
        FISKJ_LANGGRAPH_PYTHON="$(sh scripts/install-langgraph.sh)"   # its own environment (subjects/langgraph/)
        export FISKJ_LANGGRAPH_PYTHON
    fi
    if [ "$mode" != card ]; then
        echo "scripts/report-card.sh: $agent: campaign -> $report" >&2
        rm -f "$report"
        # shellcheck disable=SC2086  # the scenario list is words
        $harness run ${subject:+--subject "$subject"} --trials "$trials" --seed "$seed" -q \
            --results "$results/results" --report-json "$report" $scenarios || true
    fi
    [ -f "$report" ] || { echo "scripts/report-card.sh: $agent: no report at $report" >&2; exit 1; }
    reports="$reports $report"
done
# shellcheck disable=SC2086
$harness card $reports --out "$out"
