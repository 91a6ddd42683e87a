"""The durability report card of agents (docs/results.md "The report card"): campaign reports in, Markdown
pages out: one card of agents by invariant and by fault family, and one generated page per agent with each
finding's sentence and the command that reproduces it.  Several reports of one agent merge into one row
(:func:`harness.report.report.merge_reports`).  Pure: no IO (``fiskj-harness card`` reads and writes).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from harness.checkers.verdict import CHECKERS
from harness.errors import ResultsError
from harness.families.registry import FAMILIES
from harness.report.groups import invariant_order
from harness.report.report import FORMAT, _clip, _md, merge_reports, reproducer_text

__all__ = ["check_card_report", "card_pages", "agent_slug"]

#: A report's fields the card reads, and their JSON types.
_FIELDS = (("trials", int), ("invariants", dict), ("scenarios", dict), ("campaign", dict))
_LEGEND = ("✅ N: held in the N trials that judged it (*vacuous*: each with nothing to judge) · ❌ finding: "
           "violated, linked to the finding and the command that reproduces it · ⚠️ unknown: a checker could not "
           "decide · n/a: not applicable to the agent · not run: none of its scenarios ran · unjudged: a scenario "
           "lists it, no trial reached it (more --trials may) · —: no scenario of it was in the campaigns.  "
           "Each reason is on the agent's page.")


def check_card_report(path: str, report: Any) -> dict[str, Any]:
    """``report`` (the JSON read from ``path``) when it is a campaign report (``format``
    ``fiskj-harness-report/1`` with ``trials``, ``invariants``, ``scenarios`` and a ``campaign`` block);
    raises :class:`harness.errors.ResultsError` naming ``path`` and the field otherwise."""
    if not isinstance(report, dict):
        raise ResultsError(f"not a campaign report: a JSON {type(report).__name__}, not an object", path=path)
    if report.get("format") != FORMAT:
        raise ResultsError(f"not a campaign report: format {report.get('format')!r}, expected {FORMAT!r}",
                           path=path, field="format")
    for field, kind in _FIELDS:
        if not isinstance(report.get(field), kind) or isinstance(report.get(field), bool):
            raise ResultsError(f"expected a JSON {'integer' if kind is int else 'object'}, found "
                               f"{report.get(field)!r:.60}" + (" (merge a shard set first)" if field == "campaign"
                                                               else ""), path=path, field=field)
    return report


def agent_slug(campaign: dict[str, Any]) -> str:
    """The file name (no ``.md``) of an agent's page: ``reference``, else its name, with its variables' values
    (``node-agent-no-fsync``)."""
    subject = campaign.get("subject")
    base = ("reference" if subject is None else str(campaign.get("subject_name") or "subject")
            if isinstance(subject, str) else str(subject[-1]))  # a command: its last word
    words = [base, *(str(v) for _, v in sorted((campaign.get("subject_env") or {}).items()))]
    return re.sub(r"[^a-z0-9]+", "-", " ".join(words).lower()).strip("-")[:80] or "subject"


def _agent_key(campaign: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    ref, subject = campaign.get("subject_ref"), campaign.get("subject")
    who = str(sorted(ref.items())) if isinstance(ref, dict) else str(subject)
    return who, tuple(sorted((campaign.get("subject_env") or {}).items()))


def _subject_arg(campaign: dict[str, Any]) -> tuple[str | None, str | None]:
    """The agent as ``--subject`` takes it, quoted, the way the card names it (a bundled profile as
    ``subjects/...``), and that profile's path alone; ``(None, None)`` for the plain reference."""
    ref, subject = campaign.get("subject_ref") or {}, campaign.get("subject")
    where = f"subjects/{ref['bundled']}" if "bundled" in ref else subject
    if where is None:
        return None, None
    where = where if isinstance(where, str) else shlex.join(where)
    env = [f"{k}={v}" for k, v in sorted((campaign.get("subject_env") or {}).items())]
    return shlex.quote(" ".join([*env, where])), where


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


class _Agent:
    """One row of the card: an agent's reports merged, and what its page says."""

    def __init__(self, slug: str, reports: list[tuple[str, dict[str, Any]]]) -> None:
        self.slug, self.sources = slug, reports
        self.camps = [r["campaign"] for _, r in reports]
        first = self.camps[0]
        self.name = str(first.get("subject_name") or "?") + ("".join(  # a command's name has its variables
            f" ({k}={v})" for k, v in sorted((first.get("subject_env") or {}).items()))
            if isinstance(first.get("subject"), str) else "")
        self.about = str(first.get("subject_about") or "")
        self.report = merge_reports([r for _, r in reports])
        self.families = {k: v for c in self.camps for k, v in (c.get("families") or {}).items()}
        self.not_applicable = {k: v for c in self.camps for k, v in (c.get("not_applicable") or {}).items()}
        self.not_run = {k: v for c in self.camps for k, v in (c.get("not_run") or {}).items()
                        if not (self.report["scenarios"].get(k) or {}).get("trials")}
        judged = {sc: set(v.get("invariants") or {}) for sc, v in self.report["scenarios"].items()}
        self.unjudged = {sc: [i for i in invs if i not in judged.get(sc, set())]
                         for c in self.camps for sc, invs in (c.get("unjudged") or {}).items()}
        self.unjudged = {sc: invs for sc, invs in self.unjudged.items() if invs}
        self.limits = [line for line in dict.fromkeys(x for c in self.camps for x in c.get("limits") or [])
                       if ": NOT RUN for this subject" not in line  # both said below, by scenario and invariant
                       and not any(line.startswith(f"{i} not applicable:") for i in self.not_applicable)]
        (self.subject, where), path = _subject_arg(first), first.get("subject")
        self.folder = (where or "").split("/")[1] if (where or "").startswith("subjects/") else slug
        self.findings: list[tuple[str, str, dict[str, Any], list[str]]] = []  # (status, heading, group, families)
        for status, key, tag in (("invalid", "groups", "F"), ("unknown", "unknown_groups", "U")):
            for n, group in enumerate(self.report.get(key) or [], 1):
                fams = sorted({self.families.get(sc) or str(group["example"].get("family") or "?")
                               for sc in group["scenarios"]})
                run = group["reproducer"].get("reproduce_run") or group["reproducer"].get("reproduce") or ""
                if isinstance(path, str) and where and path != where:
                    run = run.replace(path, where)  # this machine's path of a profile, as the card names it
                group = dict(group, command=run)
                self.findings.append((status, f"{tag}{n}. {group['title']}", group, fams))

    def page(self) -> str:
        return f"findings/{self.slug}.md"

    def link(self, text: str, heading: str) -> str:
        return f"[{text}]({self.page()}#{_anchor(heading)})"

    def _marks(self, labels: Any) -> str | None:
        """❌ (else ⚠️) and a link to the first finding (else unknown verdict) of each label that
        ``labels(group, families)`` gives; ``None`` when there is none."""
        for status, mark in (("invalid", "❌"), ("unknown", "⚠️")):
            links: dict[str, str] = {}
            for st, heading, group, fams in self.findings:
                for label in labels(group, fams) if st == status else ():
                    links.setdefault(label, self.link(label, heading))
            if links:
                return f"{mark} " + ", ".join(links[k] for k in _ordered(links))
        return None

    def invariant_cell(self, inv: str) -> str:
        counts = self.report["invariants"].get(inv) or {}
        marks = self._marks(lambda group, fams: fams if group["key"]["invariant"] == inv else ())
        if marks or inv in self.not_applicable:
            return marks or self.link("n/a", "Not applicable")
        if counts.get("checked"):
            return f"✅ {counts['checked']}" + (" *vacuous*" if counts.get("vacuous") == counts["checked"] else "")
        if not self.report["trials"]:
            return self.link("not run", "Not run")
        return self.link("unjudged", "Unjudged") if any(inv in v for v in self.unjudged.values()) else "—"

    def family_cell(self, fam: str) -> str:
        ran = [sc for sc, v in self.report["scenarios"].items() if v.get("trials") and self.families.get(sc) == fam]
        skipped = [sc for sc in self.not_run if self.families.get(sc) == fam]
        cell = (self._marks(lambda group, fams: (group["key"]["invariant"],) if fam in fams else ())
                or (f"✅ {len(ran)} scenario(s)" if ran else self.link("not run", "Not run") if skipped else "—"))
        return cell + (" · " + self.link(f"{len(skipped)} not run", "Not run") if ran and skipped else "")


def _ordered(names: Any) -> list[str]:
    """Fault families in the registry's order, invariants in theirs."""
    order = [f.name for f in FAMILIES]
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), invariant_order(n)))


def _source_rows(sources: list[tuple[str, dict[str, Any]]], agent: dict[str, str] | None = None) -> list[str]:
    """The table of the reports a card or page came from: file, start, command, harness, trials, verdict."""
    out = ["| report | " + ("agent | " if agent else "") + "started (UTC) | command | harness | trials | seeds | "
           "verdict |", "|---|" + ("---|" if agent else "") + "---|---|---|---:|---|---|"]
    for path, rep in sources:
        c = rep["campaign"]
        seeds = sorted({str(s) for s in (c.get("seeds") or {}).values()})
        harness = " ".join(str(x) for x in (c.get("version"), c.get("commit") and f"({c['commit']})") if x)
        command = shlex.join(c["command"]) if isinstance(c.get("command"), list) else ""
        out.append(f"| `{_md(path)}` | " + (f"{agent[path]} | " if agent else "")
                   + f"{c.get('started') or '?'} | " + (f"`{_md(command)}`" if command else "?")
                   + f" | {_md(harness) or '?'} | {rep['trials']} | {', '.join(seeds) or '-'} | "
                   f"{rep.get('verdict', '?')}" + (" (interrupted)" if rep.get("interrupted") else "") + " |")
    return out


def _agent_page(agent: _Agent, explained: str | None) -> str:
    out = [f"# {agent.name}: findings", "",
           "Generated by `fiskj-harness card` from the campaign reports below: rebuilt, never edited by hand "
           "([the report card](../README.md)" + (f"; what they mean, checked by hand: [{explained}](../{explained})"
                                                  if explained else "") + ").", ""]
    out += [agent.about, ""] if agent.about else []
    promises = next((c.get("promises") for c in agent.camps if c.get("promises")), None)
    out += [(f"Subject: `--subject {agent.subject}`" if agent.subject else "Subject: the reference, `python -m fiskj`")
            + (f" (promises: {promises})." if promises else "."), "", "## Campaigns", "", *_source_rows(agent.sources)]
    for status, title in (("invalid", "Findings"), ("unknown", "Unknown verdicts")):
        shown = [f for f in agent.findings if f[0] == status]
        if status == "invalid" or shown:
            out += ["", f"## {title}", ""] + ([] if shown else ["None in these campaigns."])
        for _, heading, group, fams in shown:
            rep = group["reproducer"]
            out += [f"### {heading}", "",
                    f"{group['key']['invariant']} ({group.get('name', '')}), family {', '.join(fams)}: "
                    f"{group['count']} trial(s) in {', '.join(group['scenarios'])}.", "",
                    _clip(str(group.get("sentence") or group["example"].get("summary") or ""), 600), "",
                    f"Smallest reproducer: {reproducer_text(rep)}.", "", "```sh", group["command"], "```", ""]
    for title, items in (("Not applicable", [f"**{i}**: {why}" for i, why in agent.not_applicable.items()]),
                         ("Not run", [f"`{sc}`" + (f" ({agent.families[sc]})" if sc in agent.families else "")
                                      + f": {why}" for sc, why in agent.not_run.items()]),
                         ("Unjudged", [f"`{sc}`: {', '.join(invs)} (its plan's trials did not reach them: more "
                                       "--trials may)" for sc, invs in agent.unjudged.items()]),
                         ("Limits", agent.limits)):
        if items:
            out += ["", f"## {title}", "", *(f"- {_md(item)}" for item in items)]
    return "\n".join(out).replace("\n\n\n", "\n\n").rstrip("\n") + "\n"


def card_pages(sources: list[tuple[str, dict[str, Any]]], explained: dict[str, str] | None = None) -> dict[str, str]:
    """The report card and its pages from campaign reports ``sources`` (``(file as named, report)``, each
    checked by :func:`check_card_report`): ``{"README.md": card, "findings/<slug>.md": page, ...}``, paths
    relative to the card's folder.  Agents are rows in the order they first appear; reports of one agent
    (same subject and variables) merge.  ``explained``: name -> a hand-written page beside the card, linked
    from the agent whose slug or bundled profile folder (``subjects/<folder>/...``) is that name.
    Deterministic: the same reports give the same bytes (no time but the reports' own)."""
    given = explained or {}
    grouped: dict[Any, list[tuple[str, dict[str, Any]]]] = {}
    for path, rep in sources:
        grouped.setdefault(_agent_key(rep["campaign"]), []).append((path, rep))
    agents: list[_Agent] = []
    for members in grouped.values():
        slug = agent_slug(members[0][1]["campaign"])
        while any(a.slug == slug for a in agents):  # two agents of one name: the second gets a suffix
            slug += "-2"
        agents.append(_Agent(slug, members))
    explained = {a.slug: page for a in agents for key in (a.folder, a.slug) if (page := given.get(key))}
    names = {inv: name for inv, (_, name) in CHECKERS.items()}  # every invariant a column, judged or not
    for a in agents:
        for inv, c in a.report["invariants"].items():
            names.setdefault(inv, c.get("name", ""))
        for inv in a.not_applicable:
            names.setdefault(inv, "")
    invs = sorted(names, key=invariant_order)
    fams = _ordered({f.name for f in FAMILIES} | {f for a in agents for f in a.families.values()})
    row = lambda a: f"| [{_md(a.name)}]({a.page()}) | "  # noqa: E731
    out = ["# Durability report card of agents", "",
           f"Generated by `fiskj-harness card` from {len(sources)} campaign report(s) (`scripts/report-card.sh` runs "
           "the campaigns and this command): rebuilt, never edited by hand.  Each agent's page gives every finding "
           "with the command that reproduces it, and the campaigns it came from.", "", _LEGEND, "",
           "## By invariant", "", "| agent | " + " | ".join(invs) + " |", "|---|" + "---|" * len(invs)]
    out += [row(a) + " | ".join(a.invariant_cell(i) for i in invs) + " |" for a in agents]
    out += ["", "; ".join(f"**{i}** {_md(names[i])}" for i in invs if names[i]) + ".", "",
            "## By fault family", "", "| agent | " + " | ".join(fams) + " |", "|---|" + "---|" * len(fams)]
    out += [row(a) + " | ".join(a.family_cell(f) for f in fams) + " |" for a in agents]
    out += ["", "## Agents", "", "| agent | what | trials | pages |", "|---|---|---:|---|"]
    for a in agents:
        status = (f"{a.report['trials']}" if a.report["trials"] else
                  "not run: " + _md(_clip(next(iter(a.not_run.values()), "no trial"), 200)))
        pages = f"[findings]({a.page()})" + (f", [explained]({explained[a.slug]})" if a.slug in explained else "")
        out.append(f"| {_md(a.name)} | {_md(a.about)} | {status} | {pages} |")
    agent_of = {path: _md(a.name) for a in agents for path, _ in a.sources}
    out += ["", "## Campaign reports", "", *_source_rows(list(sources), agent_of)]
    pages = {"README.md": "\n".join(out) + "\n"}
    pages.update({a.page(): _agent_page(a, explained.get(a.slug)) for a in agents})
    return pages
