"""junit.xml: one test case a run, for CI systems that read JUnit reports."""

from __future__ import annotations

from typing import Any

from llmtt.evaluation.outcome import as_expected


def junit(rows: list[dict[str, Any]]) -> str:
    """One test case per run: a failure carries the outcome reason; an error, why it could not
    be carried out."""
    from xml.etree import ElementTree as ET

    failures = sum(1 for r in rows if r["outcome"] in ("pass", "fail") and not as_expected(r))
    errors = sum(1 for r in rows if r["outcome"] not in ("pass", "fail"))
    suite = ET.Element(
        "testsuite", name="llmtt", tests=str(len(rows)), failures=str(failures), errors=str(errors)
    )
    for row in rows:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=row["scenario"],
            name=row["run_id"],
            time=str(row.get("duration_secs") or 0),
        )
        if row["outcome"] in ("pass", "fail") and row.get("expect", "pass") == "fail":
            # A negative control: its failure is the test passing, its pass the test failing.
            said = row["outcome_reason"]
            if as_expected(row):
                ET.SubElement(case, "system-out").text = f"failed as expected: {said}"
            else:
                message = f"passed unexpectedly: the scenario expects fail (expect: fail); {said}"
                ET.SubElement(case, "failure", message=message).text = message
        elif row["outcome"] == "fail":
            ET.SubElement(case, "failure", message=row["outcome_reason"]).text = row[
                "outcome_reason"
            ]
        elif row["outcome"] != "pass":
            ET.SubElement(case, "error", message=row["outcome_reason"]).text = row["outcome_reason"]
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
