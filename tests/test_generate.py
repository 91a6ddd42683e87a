"""Generated workloads (harness/scenario/generate.py): a scenario that stands for N drawn workloads."""

import pytest

from harness.report.reproduce import reproduce_command
from harness.cli.arguments import _Usage
from harness.cli.resolve import resolve_scenarios
from harness.scenario.generate import expand, split_draw
from harness.report.results_dir import results_name
from harness.scenario.parse import parse_scenario

TEXT = """
name = "gen"
purpose = "generated"
[workload]
generate = 5
[faults]
family = "kill"
[trials]
count = 12
seed = 3
"""


def test_a_generated_scenario_expands_into_its_draws_deterministically_with_their_share_of_the_trials():
    scenario = parse_scenario(TEXT)
    draws = expand(scenario)
    assert [d.name for d in draws] == [f"gen.w{k}" for k in range(5)] and [d.draw for d in draws] == list(range(5))
    assert all(d.trials.count == 3 and d.workload.generate == 0 for d in draws)     # ceil(12 / 5)
    assert expand(scenario) == draws                                                 # a function of the seed
    assert len({d.workload for d in draws}) == 5                                     # five different workloads
    other = expand(parse_scenario(TEXT.replace("seed = 3", "seed = 4")))
    assert [d.workload for d in other] != [d.workload for d in draws]
    assert expand(draws[2]) == [draws[2]] and expand(parse_scenario(TEXT.replace("generate = 5", ""))) != draws


def test_a_draw_is_named_on_the_command_line_as_reports_write_it_or_with_at_w():
    assert split_draw("gen@w3") == ("gen", 3) and split_draw("gen.w3") == ("gen", 3)
    assert split_draw("kill-random") == ("kill-random", None)
    assert results_name(["generated-workloads.w1", "generated-workloads.w4"]) == "generated-workloads"
    (one,) = resolve_scenarios(["generated-workloads@w3"])
    (same,) = resolve_scenarios(["generated-workloads.w3"])
    assert one == same and one.name == "generated-workloads.w3" and one.draw == 3
    assert "generated-workloads@w3" in reproduce_command(one, 1, [{"kind": "kill", "event": 2}], None)
    with pytest.raises(_Usage, match="no draw 99 .its draws: @w0 .. @w7"):
        resolve_scenarios(["generated-workloads@w99"])
    with pytest.raises(_Usage, match="generates no workloads"):
        resolve_scenarios(["kill-random@w1"])
