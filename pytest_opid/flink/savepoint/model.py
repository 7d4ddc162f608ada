"""What a ``_metadata`` file holds, as the reader returns it: the operator states (Flink's
``OperatorState``), the savepoint, and the files its state handles refer to."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OperatorState", "Savepoint", "StateFile"]


@dataclass(frozen=True, slots=True)
class OperatorState:
    """One operator state of a ``_metadata`` file (Flink's ``OperatorState``).

    ``has_state`` is ``OperatorSubtaskState.hasState()`` of any subtask: some state handle is
    stored, however small. ``state_size`` is the sum of the sizes the stored handles record, as
    Flink's ``getStateSize()`` reports them (inline bytes count their length, files the size
    written next to their path, the coordinator state its bytes; an unknown size counts 0).
    ``subtask_states`` counts the subtask entries as the loader keeps them (one per subtask
    index, finished and empty ones included). ``state_kinds`` is sorted.
    """

    operator_id: str
    name: str | None
    uid: str | None
    parallelism: int
    max_parallelism: int
    coordinator_state: bool
    has_state: bool
    state_size: int
    fully_finished: bool
    subtask_states: int
    state_kinds: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """The operator state as ``opid savepoint --json`` prints it."""
        return {
            "operator_id": self.operator_id,
            "name": self.name,
            "uid": self.uid,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "coordinator_state": self.coordinator_state,
            "has_state": self.has_state,
            "state_size": self.state_size,
        }


@dataclass(frozen=True, slots=True)
class Savepoint:
    """A ``_metadata`` file: its format version, checkpoint id and operator states in file order
    (the order in which Flink checks them on restore)."""

    version: int
    checkpoint_id: int
    operators: tuple[OperatorState, ...]

    def to_dict(self) -> dict[str, object]:
        """The JSON that ``opid savepoint --json`` prints."""
        return {
            "version": self.version,
            "checkpoint_id": self.checkpoint_id,
            "operators": [op.to_dict() for op in self.operators],
        }


@dataclass(frozen=True, slots=True)
class StateFile:
    """A file that a state handle of ``_metadata`` refers to.

    ``kind`` is ``"file"`` (an absolute path or URI, as in checkpoints), ``"relative"`` (a path
    relative to the savepoint directory) or ``"segment"`` (``size`` bytes of a file shared with
    other handles by file merging). ``size`` is the size the handle records.
    """

    operator_id: str
    path: str
    size: int
    kind: str
