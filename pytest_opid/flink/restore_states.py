"""What Flink's restore check reads: the old job's operator states (from a savepoint, or what a
savepoint of an old fingerprint would hold) and the new job's job vertices as the scheduler sees
them, with the max parallelism Flink gives a vertex whose program set none
(``KeyGroupRangeAssignment.computeDefaultMaxParallelism``).

Built by columns where a fingerprint may have 100,000 operators: a Python step per operator
would cost more than reading the fingerprint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from itertools import chain, compress, repeat
from operator import add, is_not, itemgetter, not_
from typing import NamedTuple, cast

from pytest_opid.flink.savepoint import Savepoint
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

__all__ = [
    "LOWER_BOUND_MAX_PARALLELISM",
    "OPERATOR_ID",
    "STATE_MAX",
    "UPPER_BOUND_MAX_PARALLELISM",
    "OldState",
    "OldStates",
    "ScheduledVertex",
    "default_max_parallelism",
    "fingerprint_states",
    "listed_states",
    "new_vertices",
    "savepoint_states",
]


#: ``KeyGroupRangeAssignment.DEFAULT_LOWER_BOUND_MAX_PARALLELISM`` and ``UPPER_BOUND_...``
LOWER_BOUND_MAX_PARALLELISM = 1 << 7
UPPER_BOUND_MAX_PARALLELISM = 1 << 15


@lru_cache(maxsize=1024)
def default_max_parallelism(parallelism: int) -> int:
    """The max parallelism Flink gives a job vertex whose program set none:
    ``KeyGroupRangeAssignment.computeDefaultMaxParallelism`` of the parallelism as the scheduler
    normalizes it (-1, "default", counts as 1): 1.5 times the parallelism rounded up to a power
    of two, at least 128 and at most 32768."""
    if parallelism == -1:
        parallelism = 1  # SchedulerBase.normalizeParallelism
    if not 0 < parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(
            f"parallelism must be between 1 and {UPPER_BOUND_MAX_PARALLELISM} (or -1), "
            f"got {parallelism}"
        )
    wanted = parallelism + parallelism // 2
    power = 1 << (wanted - 1).bit_length()  # MathUtils.roundUpToPowerOfTwo
    return min(max(power, LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


# -- what the check reads ----------------------------------------------------------------------


class OldState(NamedTuple):
    """One operator state the previous job left (or would leave) behind."""

    operator_id: str
    name: str | None
    uid: str | None
    max_parallelism: int
    #: Flink fails on it when unmapped: coordinator state or any subtask with state
    holds_state: bool
    #: the subtask entries Flink counts (``getNumberCollectedStates() > 0``)
    has_subtasks: bool
    #: what it holds, for messages ("keyed state", ...); empty where unknown
    kinds: tuple[str, ...]
    #: the old job's fingerprint does not say whether it keeps state
    unknown: bool = False


class ScheduledVertex(NamedTuple):
    """A job vertex of the new job as the scheduler sees it."""

    vertex: JobVertex
    parallelism: int  # normalized: -1 counts as 1
    max_parallelism: int  # the configured one, else Flink's default for the parallelism
    configured_max: bool


_KIND_WORDS = {
    "managed_keyed": "keyed state",
    "raw_keyed": "raw keyed state",
    "managed_operator": "operator state",
    "raw_operator": "raw operator state",
    "input_channel": "in-flight data",
    "result_subpartition": "in-flight data",
    "upstream_output_buffer": "in-flight data",
}


def savepoint_states(savepoint: Savepoint) -> list[OldState]:
    out = []
    for op in savepoint.operators:
        kinds = [_KIND_WORDS.get(k, k) for k in op.state_kinds]
        if op.coordinator_state:
            kinds.append("source coordinator state")
        out.append(
            OldState(
                operator_id=op.operator_id,
                name=op.name,
                uid=op.uid,
                max_parallelism=op.max_parallelism,
                holds_state=op.coordinator_state or op.has_state,
                has_subtasks=op.subtask_states > 0 and not op.fully_finished,
                kinds=tuple(dict.fromkeys(kinds)),
            )
        )
    return out


class OldStates:
    """The old job's operator states as the check reads them: their IDs and max parallelisms
    as columns, and each whole state (a :class:`OldState`) built only where a message or a
    rare case asks for it: a 100,000-operator fingerprint would otherwise cost as many objects
    as it has operators, for a verdict that reads two columns."""

    __slots__ = ("_make", "ids", "maxima")

    def __init__(self, ids: list[str], maxima: list[int], make: Callable[[int], OldState]):
        self.ids = ids
        self.maxima = maxima
        self._make = make

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, position: int) -> OldState:
        return self._make(position)

    def all(self) -> list[OldState]:
        return list(map(self._make, range(len(self.ids))))


def listed_states(states: Sequence[OldState]) -> OldStates:
    return OldStates(list(map(_STATE_ID, states)), list(map(STATE_MAX, states)), states.__getitem__)


def fingerprint_states(old: Fingerprint) -> OldStates:
    """What a savepoint of ``old`` would hold: every operator not known to be stateless, under
    its generated ID, with its job vertex's max parallelism (as configured, else Flink's
    default for the vertex's parallelism). Built by columns (``map``, ``compress`` in C): a
    Python step per operator would cost more than reading the fingerprint."""
    vertices = old.job_vertices
    vertex_max: dict[str | None, int] = dict(
        zip(
            map(_VERTEX_ID, vertices),
            map(_max_parallelism, map(_VERTEX_MAX, vertices), map(_VERTEX_PARALLELISM, vertices)),
            strict=True,
        )
    )
    if "" in vertex_max:
        vertex_max[None] = vertex_max[""]  # an operator without a vertex looks up ""
    operators = old.operators
    if False in map(_STATEFUL, operators):  # known stateless operators leave nothing behind
        operators = tuple(
            compress(operators, map(is_not, map(_STATEFUL, operators), repeat(False)))
        )
    found = list(map(vertex_max.get, map(_JOB_VERTEX, operators)))
    if None in found:  # no vertex lists it: its own setting
        maxima = [
            _max_parallelism(op.max_parallelism, op.parallelism) if m is None else m
            for op, m in zip(operators, found, strict=True)
        ]
    else:
        maxima = cast(list[int], found)
    ids = list(map(OPERATOR_ID, operators))
    return OldStates(ids, maxima, partial(_fingerprint_state, operators, maxima))


def _fingerprint_state(
    operators: Sequence[OperatorFingerprint], maxima: Sequence[int], position: int
) -> OldState:
    op = operators[position]
    return OldState(
        op.operator_id, op.name, op.uid, maxima[position], True, True, (), op.stateful is None
    )


OPERATOR_ID = itemgetter(OperatorFingerprint._fields.index("operator_id"))
_JOB_VERTEX = itemgetter(OperatorFingerprint._fields.index("job_vertex"))
_STATEFUL = itemgetter(OperatorFingerprint._fields.index("stateful"))
_STATE_ID = itemgetter(OldState._fields.index("operator_id"))
STATE_MAX = itemgetter(OldState._fields.index("max_parallelism"))
_OPERATORS = itemgetter(JobVertex._fields.index("operators"))
_VERTEX_ID = itemgetter(JobVertex._fields.index("id"))
_VERTEX_PARALLELISM = itemgetter(JobVertex._fields.index("parallelism"))
_VERTEX_MAX = itemgetter(JobVertex._fields.index("max_parallelism"))


@lru_cache(maxsize=4096)  # a job has few settings: map() over its vertices then runs in C
def _max_parallelism(configured: int, parallelism: int) -> int:
    if configured == -1:
        return default_max_parallelism(_normalized(parallelism))
    return configured


def _normalized(parallelism: int) -> int:
    return 1 if parallelism <= 0 else min(parallelism, UPPER_BOUND_MAX_PARALLELISM)


def new_vertices(
    new: Fingerprint,
) -> tuple[list[ScheduledVertex], list[ChainedOperator], list[str], list[int], dict[str, int]]:
    """The new job's vertices, their operators in order with their generated IDs, the index
    of the vertex each runs in, and the vertex of each generated ID (a later vertex listing it
    wins, as in Flink's HashMap). Operators that no vertex lists (a saved fingerprint without
    chains) run as vertices of their own."""
    vertices = list(new.job_vertices)
    members = list(chain.from_iterable(map(_OPERATORS, vertices)))
    generated = list(map(itemgetter(0), members))
    sizes = map(len, map(_OPERATORS, vertices))
    at = list(chain.from_iterable(map(repeat, range(len(vertices)), sizes)))
    vertex_of = dict(zip(generated, at, strict=True))
    ids = list(map(OPERATOR_ID, new.operators))
    if not all(map(vertex_of.__contains__, ids)):
        unlisted = list(compress(new.operators, map(not_, map(vertex_of.__contains__, ids))))
        for op in unlisted:
            member = ChainedOperator(op.operator_id, op.user_operator_id)
            vertices.append(
                JobVertex(
                    op.operator_id,
                    op.name,
                    op.parallelism,
                    (member,),
                    (op.node,),
                    op.max_parallelism,
                )
            )
            members.append(member)
            generated.append(op.operator_id)
            at.append(len(vertices) - 1)
            vertex_of[op.operator_id] = len(vertices) - 1
    settings = map(_scheduled, map(_VERTEX_PARALLELISM, vertices), map(_VERTEX_MAX, vertices))
    scheduled = list(map(tuple.__new__, repeat(ScheduledVertex), map(add, zip(vertices), settings)))
    return scheduled, members, generated, at, vertex_of


@lru_cache(maxsize=4096)  # a job has few settings: map() over its vertices then runs in C
def _scheduled(parallelism: int, max_parallelism: int) -> tuple[int, int, bool]:
    """A vertex's parallelism as the scheduler normalizes it, its max parallelism (the
    configured one, else Flink's default) and whether it was configured: a :class:`ScheduledVertex`
    but for the vertex itself."""
    normalized = _normalized(parallelism)
    configured = max_parallelism != -1
    return (
        normalized,
        max_parallelism if configured else default_max_parallelism(normalized),
        configured,
    )
