"""Format 4's ``[settings]`` and ``[plan]`` sections, and the saved form's ``plan`` and
``settings`` keys: written readably, read back exactly, bad input refused naming the line."""

from __future__ import annotations

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.result import Fingerprint

PLAN = (
    "TakeOrderedAndProject limit 10 order [sum(ss_net_paid) DESC]",
    "  HashAggregate keys [i_item_id] functions [sum(ss_net_paid)]",
    "    Exchange hashpartitioning [i_item_id]",
    "      Filter [i_category]",
    "        Subquery #1",
    "          Scan spark_catalog.default.item [i_category]",
    "        Scan spark_catalog.default.item [i_item_id, i_category]",
)
SETTINGS = (("spark.sql.shuffle.partitions", "4"),)


def _fp(plan: tuple[str, ...] | None = PLAN, settings=SETTINGS) -> Fingerprint:
    return Fingerprint((), (), None, "spark", "batch", None, None, plan, settings)


def test_the_plan_is_written_as_an_indented_tree_and_read_back():
    text = dumps(_fp())
    assert "\n[plan]\n" in text and "\n[settings]\n" in text
    body = text.split("\n[plan]\n", 1)[1].splitlines()
    # after the section's comment line: the lines as they are, then format 5's end line
    assert body[1:] == [*PLAN, "", "[end]"]
    assert '"spark.sql.shuffle.partitions"  "4"' in text
    back = loads(text)
    assert back == _fp() and back.plan == PLAN and back.settings == SETTINGS


def test_a_fingerprint_without_plan_or_settings_writes_neither():
    text = dumps(_fp(None, ()))
    assert "[plan]" not in text and "[settings]" not in text
    assert loads(text) == _fp(None, ())


@pytest.mark.parametrize(
    "content",
    [
        'Filter [a\\b, "q"]',  # a backslash and quotes
        "Scan t\x01\x1f",  # control characters
        "Project [x\u2028y\u202e]",  # line separator, bidi override
        "Scan spark_catalog.default.\u00e9t\u00e9 [\U0001f600]",
        "Project ['\\\\u0041']",  # a literal backslash-u: not an escape to decode
    ],
)
def test_plan_lines_stay_one_line_and_read_back_exactly(content):
    fp = _fp(("Root", "  " + content))
    text = dumps(fp)
    plan_part = text.split("\n[plan]\n", 1)[1].split("\n\n[end]\n")[0]
    assert len(plan_part.rstrip("\n").split("\n")) == 3  # comment, root, the line
    assert loads(text).plan == fp.plan


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["Root", "   Odd"], "indented by 3 spaces"),
        (["Root", "    TooDeep"], "indented by 4 spaces; expected an even number, at most 2"),
        (["  Root"], "indented by 2 spaces; expected an even number, at most 0"),
        (["Root", "  \tTab"], "tab or other white space"),
        (["Root", "  Bad \\x escape"], "malformed escape"),
        (["Root", "  Lone \\ud800"], "malformed escape"),
    ],
)
def test_a_malformed_plan_line_is_refused_naming_its_line(lines, message):
    head = dumps(_fp(("Root",))).split("\n[plan]\n", 1)[0]
    text = head + "\n[plan]\n" + "\n".join(lines) + "\n"
    with pytest.raises(DocumentError, match=message) as info:
        loads(text, origin="s.opid")
    assert str(info.value).startswith("s.opid, line ")


def test_format_4_sections_in_a_format_3_file_are_refused():
    text = dumps(_fp()).replace("format 5", "format 3", 1).replace("\n[end]\n", "\n")
    with pytest.raises(DocumentError, match=r"section \[settings\] does not exist in format 3"):
        loads(text)


def test_a_repeated_setting_or_plan_section_is_refused():
    text = dumps(_fp())
    twice = text.replace(
        '"spark.sql.shuffle.partitions"  "4"',
        '"spark.sql.shuffle.partitions"  "4"\n"spark.sql.shuffle.partitions"  "8"',
    )
    with pytest.raises(DocumentError, match="appears twice"):
        loads(twice)
    with pytest.raises(DocumentError, match=r"a second \[plan\] section"):
        loads(text.replace("\n[end]\n", "\n[plan]\nRoot\n\n[end]\n"))


def test_a_format_3_snapshot_still_reads_without_plan_or_settings():
    text = dumps(_fp(None, ())).replace("format 5", "format 3", 1).replace("\n[end]\n", "\n")
    back = loads(text)
    assert back.plan is None and back.settings == ()


def test_the_saved_form_keeps_plan_and_settings_on_both_readers():
    fp = _fp()
    text = fp.to_json()
    fast = Fingerprint.decode_fast(text)
    assert fast == fp and fast is not None and fast.plan == PLAN
    assert Fingerprint.from_dict(fp.to_dict()) == fp
    assert Fingerprint.decode_fast(_fp(None, ()).to_json()) == _fp(None, ())
    assert '"plan"' not in _fp(None, ()).to_json()  # written only where there is one


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"plan": ["ok", 3]}, r"plan\[1\]: expected a string"),
        ({"settings": [["a"]]}, r"settings\[0\]: expected \[name, value\]"),
        ({"settings": [["a", 1]]}, r"settings\[0\]: expected \[name, value\]"),
    ],
)
def test_the_saved_form_refuses_a_malformed_plan_or_setting(patch, message):
    data = _fp().to_dict()
    data.update(patch)
    with pytest.raises(DocumentError, match=message):
        Fingerprint.from_dict(data)


def test_plan_and_settings_take_part_in_equality():
    assert _fp() != _fp(PLAN[:-1])
    assert _fp() != _fp(settings=(("spark.sql.shuffle.partitions", "200"),))
