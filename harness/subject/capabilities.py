"""What a subject can do, decided once from its profile or command: the one answer families, campaign and
report read.

A :class:`Capabilities` is computed from a :class:`harness.subject.contract.Subject` by
:meth:`Capabilities.of` (the subject carries it: ``subject.caps``) and never re-derived elsewhere:

* ``fiskj_based``: the subject runs fiskj's own code (the reference ``python -m fiskj`` or the mutant
  subject ``python -m harness.selftest.subject``), so a forked reader can ask fiskj's reader in-process
  (tails, power loss) and its IO seam traces every call (docs/ioseam.md);
* ``forkable``: its legs may be forked from a pre-imported interpreter (fiskj's, or a Python agent's
  profile ``[fork_server]``: :mod:`harness.subject.forkserver`; the environment still decides:
  :func:`harness.subject.contract.fork_server_enabled`);
* ``reading``: it gives a reading command (``[reading]``, judged by I10);
* ``journal``: where its journal lies and in what format (:class:`JournalLocation`);
* ``chat``: it takes follow-ups on standard input; ``server_tools``: it takes server-tool replies;
* ``drift``: the fields of the run configuration its resume command (or its ``[files]``) passes, so a
  drifted resume differs from the run (docs/subject.md "Subject profiles");
* ``not_applicable``: invariant -> why it does not apply (the profile's, and I10 with no reading).

The subject's own rules for a scenario (:meth:`Capabilities.refuses`) live here; a family's rules
live on the family (:meth:`harness.families.base.Family.unsupported`, ``cannot``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Mapping

from harness.history.journal_location import JournalLocation
from harness.names import FISK_AI_V2, MUTANT_SUBJECT, OPAQUE

__all__ = ["Capabilities", "DRIFT_WORDS"]

#: Drift field -> the template words that pass it to a subject (any one of them will do).
DRIFT_WORDS: Mapping[str, tuple[str, ...]] = {
    "model": ("{model}",), "system": ("{system_args}", "{system_file}"), "tools": ("{tools_file}",),
    "thinking": ("{thinking_args}", "{thinking}"), "max_tokens": ("{max_tokens}",),
    "max_iterations": ("{max_iterations}",)}


@dataclass(frozen=True)
class Capabilities:
    """What one subject can do (see the module docstring); build it with :meth:`of`."""

    fiskj_based: bool
    forkable: bool
    reading: bool
    journal: JournalLocation
    chat: bool
    drift: frozenset[str]
    server_tools: bool = True
    not_applicable: tuple[tuple[str, str], ...] = ()
    drift_refused: bool = True

    @classmethod
    def of(cls, subject: Any) -> "Capabilities":
        """The capabilities of ``subject`` (a :class:`harness.subject.contract.Subject`), from its command
        prefix and profile fields alone (no IO, no environment)."""
        argv = tuple(subject.argv)
        fiskj_based = argv[1:] == ("-m", "fiskj") or argv[1:3] == ("-m", MUTANT_SUBJECT)
        resume = subject.resume_args if subject.resume_config else subject.resume_args[:4]
        text = " ".join((*resume, *(content for _, content in subject.files), *(path for path, _ in subject.files)))
        drift = frozenset(f for f, words in DRIFT_WORDS.items() if any(w in text for w in words))
        reading = subject.status_args is not None
        na = dict(subject.not_applicable)
        if not reading:
            na.setdefault("I10", "the subject gives no status command to read its journal with "
                                 "(a profile's [reading], docs/subject.md)")
        if subject.journal_format == OPAQUE:
            na.setdefault("I10", "its store is opaque: its reading is how the harness sees inside it, and there is no "
                                 "fold of fiskj's to compare it with")
        if subject.journal_format != FISK_AI_V2:
            na.setdefault("I11", "its journal's records are not decoded (journal format "
                                 f"{subject.journal_format}): what it journaled of each reply is not judged")
        forkable = fiskj_based and len(argv) == 3 and os.path.realpath(argv[0]) == os.path.realpath(sys.executable)
        return cls(fiskj_based=fiskj_based, forkable=forkable or getattr(subject, "fork_server", None) is not None,
                   reading=reading, journal=JournalLocation(subject.journal, subject.journal_format),
                   chat=subject.chat, drift=drift, server_tools=subject.server_tools, not_applicable=tuple(na.items()),
                   drift_refused=getattr(subject, "promises", None) is None or subject.promises.drifted_resume == "refuse")

    @property
    def decoded(self) -> bool:
        """True when the harness decodes the journal's records (fisk-ai v2): it can fold it (I1's suspend
        record, I6's fold, I9's resumable status, I10's reading, a chat's follow-up count)."""
        return self.journal.decoded

    def refuses(self, workload: Any) -> str | None:
        """Why a scenario with ``workload`` (a :class:`harness.scenario.model.Workload`) cannot run against
        this subject at all (named before the first trial, never a pass), or ``None``: a chat for a subject that
        cannot chat or whose journal the harness cannot count follow-ups in, server-tool replies for one without
        server tools, or a drift its resume cannot pass or promises not to refuse."""
        if workload.chat_followups and not self.chat:
            return "a chat scenario, and this subject cannot run a chat (its profile says chat = false)"
        if workload.chat_followups and not self.decoded:
            return (f"a chat scenario needs a {FISK_AI_V2} journal: the harness counts the follow-ups a journal "
                    f"holds to know which to send next, and this subject's journal format is {self.journal.format}")
        if not self.server_tools and (workload.pause_turn or any("web_search" in b for b in workload.reply_blocks)):
            return ("server-tool replies (web_search, pause_turn), and this subject never enabled server tools "
                    "(its profile says server_tools = false)")
        if workload.drift and not self.drift_refused:
            return ("a drift scenario, and this subject promises to continue a resume under a changed configuration "
                    "([promises] drifted_resume = \"continues\": it keeps no fingerprint): no refusal to judge")
        missing = [f for f in workload.drift if f not in self.drift]
        if missing:
            return (f"a drift of {', '.join(missing)}, and this subject's resume command (and files) pass no "
                    f"{' nor '.join(DRIFT_WORDS[f][0] for f in missing)}: a drifted resume would not differ from "
                    "the run (add the word to the profile's [commands] resume, or a [files] template)")
        return None

    def limits(self) -> list[str]:
        """What the checkers cannot judge for this subject, one line each (said before a campaign starts):
        the invariants that do not apply, and what a journal the harness does not decode leaves unjudged."""
        out = [f"{inv} not applicable: {why}"
               for inv, why in sorted(self.not_applicable, key=lambda kv: int(kv[0][1:]))]
        if self.journal.is_store:
            out.append(f"journal format {OPAQUE} (a store the harness does not decode; judged from outside and from "
                       "the agent's own reading, taken after every leg and on every crash state before its resume): "
                       "I4 what the agent acted on (a tool result it sent to the model, an answer it printed) is in "
                       "its reading after every crash its store promises to survive ([promises] durable); I5 after a "
                       "crash or damage it resumes, or refuses with a message and leaves the store's bytes as they "
                       "were; I1, I2, I3 by the ids its reading holds; I6 from outside; I8 two legs that coexisted "
                       "never both ran a tool or asked the model the same; not judged: the store's bytes (no line, "
                       "record or fold), I1's suspend record")
        elif not self.decoded:
            out.append(f"journal format {self.journal.format} (not decoded): I4 and I5 are judged line by line, I2 "
                       "and I3 by the lines each leg acknowledged after doing the work, I6 from outside (the "
                       "conversation states, the final reply, the tools run, the exit); not judged: whether a "
                       "suspended journal ends with its suspend (I1), the fold's messages and counters (I6), "
                       "whether a refused resume had a run it had to resume (I9 refused_resumable: the status a "
                       "journal folds to)")
        return out
