"""Spark's renamings between its lines (3.5, 4.0, 4.1, 4.2, 4.3), in one place.

The same unchanged query planned by two Spark lines can name one thing two ways: an expression
class renamed in the catalyst, a stateful operator that gained its own ``shortName``. Neither
changes what the state holds or means. A fingerprint keeps what its line said; every
comparison reads both sides in one set of words first (:func:`current`): a renamed class or
operator by the newest line's name, an expression a newer line calls through its evaluator
object by the expression's own. Each renaming below names the Spark change or class it comes
from; ``tools/line_corpus.py`` and ``tests/core/test_line_corpus.py`` find them (the same
queries fingerprinted on every line).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from pytest_opid.result import Fingerprint, StateOperator

#: Expression classes an older line names otherwise: older name -> newest name.
EXPRESSION_CLASSES: Mapping[str, str] = {
    # SPARK-52595 (Spark 4.1.0): TimeAdd renamed TimestampAddInterval (a timestamp plus an
    # interval: a time window's and a session window's end, ``ts + INTERVAL ...``).
    "TimeAdd": "TimestampAddInterval",
}

#: Stateful operators' ``shortName`` where an older line answers another: (physical operator,
#: older shortName) -> newest shortName.
SHORT_NAMES: Mapping[tuple[str, str], str] = {
    # Spark 3.5's SessionWindowStateStoreSaveExec keeps StateStoreWriter's default
    # ``shortName`` ("defaultName"); from 4.0 on it names itself (the name its operator
    # metadata files the state under).
    ("SessionWindowStateStoreSaveExec", "defaultName"): "sessionWindowStateStoreSaveExec",
}

#: Physical operators an older line names otherwise (a stateful operator's name in a
#: fingerprint is its node's, ``TransformWithStateInPandas(long)``): older -> newest.
OPERATOR_NAMES: Mapping[str, str] = {
    # Spark 4.1 plans transformWithStateInPandas as TransformWithStateInPySparkExec (one
    # operator for the pandas and the Row API), 4.0 as TransformWithStateInPandasExec; the
    # shortName its state is filed under (transformWithStateInPandasExec) is the same.
    "TransformWithStateInPandas": "TransformWithStateInPySpark",
}

#: An older ``shortName`` by itself (a saved fingerprint keeps the name, not the class).
_OLD_SHORT_NAMES = {old: new for (_, old), new in SHORT_NAMES.items()}

#: An older expression class as meaning facts write it (``timeAdd(ts, ...)``, by
#: :meth:`~pytest_opid.spark.query.expressions.MeaningPlan.function_name`).
_OLD_FUNCTIONS = {
    old[0].lower() + old[1:]: new[0].lower() + new[1:] for old, new in EXPRESSION_CLASSES.items()
}
_OLD_FUNCTION = re.compile(r"\b(" + "|".join(map(re.escape, _OLD_FUNCTIONS)) + r")\(")


#: ``invoke(StructsToJsonEvaluator(...), args)``: an expression Spark plans as a call of its
#: evaluator object (``RuntimeReplaceable`` with ``Invoke``, Spark 4.0's ``StructsToJson``),
#: which older lines plan as the expression itself (``structsToJson(args)``).
_INVOKED = re.compile(r"\binvoke\((\w+)Evaluator\(")


def expression_class(cls: str) -> str:
    """An expression node's class (without its package) by the newest line's name."""
    return EXPRESSION_CLASSES.get(cls, cls)


def short_name(exec_class: str, name: str) -> str:
    """A stateful operator's ``shortName`` as the newest line answers it."""
    return SHORT_NAMES.get((exec_class, name), name)


def fact_value(value: str) -> str:
    """A meaning fact's value in the words every line shares."""
    if "(" not in value:
        return value
    value = _OLD_FUNCTION.sub(lambda m: _OLD_FUNCTIONS[m.group(1)] + "(", value)
    return _invoked(value) if "Evaluator(" in value else value


def _invoked(value: str) -> str:
    """``invoke(NameEvaluator(state...), args)`` as ``name(args)``: the evaluator's own
    arguments (options, schema, time zone) are what the older plan's expression kept out of
    its text too. A scan, without recursion; unbalanced text is left as it is."""
    out = []
    at = 0
    for found in _INVOKED.finditer(value):
        if found.start() < at:
            continue  # inside an evaluator's arguments already dropped
        depth, end = 1, found.end()
        while end < len(value) and depth:
            depth += {"(": 1, ")": -1}.get(value[end], 0)
            end += 1
        if depth or value[end : end + 2] != ", ":
            continue
        name = found.group(1)
        out.append(value[at : found.start()] + name[0].lower() + name[1:] + "(")
        at = end + 2
    return "".join(out) + value[at:]


def current(fp: Fingerprint) -> Fingerprint:
    """``fp`` with its stateful operators' names and meaning facts in the words every line
    shares; ``fp`` itself where nothing in it is line-specific (the usual case)."""
    if not fp.state_operators:
        return fp
    states = tuple(_current_state(s) for s in fp.state_operators)
    if all(a is b for a, b in zip(states, fp.state_operators, strict=True)):
        return fp
    return dataclasses.replace(fp, state_operators=states)


def _current_state(state: StateOperator) -> StateOperator:
    kind = _OLD_SHORT_NAMES.get(state.kind, state.kind)
    node, paren, rest = state.name.partition("(")
    name = OPERATOR_NAMES.get(node, node) + paren + rest
    meaning = tuple((fact, fact_value(value)) for fact, value in state.meaning)
    if kind == state.kind and name == state.name and meaning == state.meaning:
        return state
    return dataclasses.replace(state, kind=kind, name=name, meaning=meaning)
