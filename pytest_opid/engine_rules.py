"""The contract between the engine-neutral core and an engine: what a change means there.

:class:`Check` is what ``@pytest.mark.stable_topology`` holds stable; :class:`EngineRules` is what
an engine registers (:func:`pytest_opid.engines.register_engine`) to judge a comparison and
word its verdict. Both live apart from the comparison and the registry, which use them, so that
neither of those imports the other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pytest_opid.result import Fingerprint, RestoreCheck

__all__ = ["Check", "EngineRules", "EngineWords"]

#: The comparison an engine's rules judge (``pytest_opid.comparison.Comparison``).
_ComparisonT = TypeVar("_ComparisonT", contravariant=True)


class Check(enum.Enum):
    """What ``@pytest.mark.stable_topology`` holds stable."""

    IDS = "ids"  #: every old operator's state ID still exists (no state lost)
    CHAINS = "chains"  #: no operator chain (job vertex) split or merged
    BOTH = "both"

    @classmethod
    def default_for(cls, fp: Fingerprint) -> Check:
        """What a job holds stable when nobody says: a streaming job its state (chains on
        request), a batch job, which keeps no state between runs, its chains."""
        return cls.IDS if fp.mode == "streaming" else cls.CHAINS

    def broken_by(self, state_lost: bool, chains_changed: bool) -> bool:
        """Whether a change breaks what this check holds: ``state_lost`` whether it loses (or
        misplaces) state, ``chains_changed`` whether it splits or merges chains (Spark: its
        stages). One rule for every engine, so that a check means the same everywhere."""
        if self is Check.IDS:
            return state_lost
        if self is Check.CHAINS:
            return chains_changed
        return state_lost or chains_changed

    @classmethod
    def parse(cls, value: Any) -> Check:
        if isinstance(value, Check):
            return value
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(repr(c.value) for c in cls)
            raise ValueError(f"check must be one of {allowed}, got {value!r}") from None


@dataclass(frozen=True)
class EngineWords:
    """What the pictures and tables (:mod:`pytest_opid.render`) call things in one engine, and
    what they draw of it: render asks the engine's rules (:attr:`EngineRules.words`) instead of
    testing its name, so a new engine brings its own words and render stays as it is."""

    chain: str  #: one chain of operators run as one task (a job vertex, a stage)
    chains: str  #: the plural
    operator_id: str  #: the table's heading for an operator's ID
    parallelism: str  #: an operator's parallelism, ``{}`` the number
    parallelism_unset: str  #: an operator's parallelism when the engine decides at run time
    chain_parallelism: str  #: a chain's, on its box's label
    chain_parallelism_unset: str  #: the same when decided at run time ("": not drawn)
    shows_uids: bool  #: an operator's box and tooltip show its uid and user-defined ID
    state_rule: str  #: one clause: how the engine finds an operator's old state
    saved_state: str  #: what the old job's state is read from (a savepoint, a checkpoint)
    new_operator: str  #: a new operator's mark in a diff
    topology_legend: tuple[tuple[str, str], ...]  #: a topology picture's legend
    stateful_legend: tuple[str, str]  #: its item for stateful operators, where there are any
    diff_legend: tuple[tuple[str, str], ...]  #: a diff picture's legend, streaming jobs
    batch_diff_legend: tuple[tuple[str, str], ...]  #: the same for batch jobs

    def parallelism_text(self, value: int, *, chain: bool = False) -> str:
        """An operator's (or, with ``chain``, a chain's) parallelism in these words."""
        if chain:
            return (
                self.chain_parallelism.format(value) if value > 0 else self.chain_parallelism_unset
            )
        return self.parallelism.format(value) if value > 0 else self.parallelism_unset


class EngineRules(Protocol[_ComparisonT]):
    """What a change means for one engine, and how to say it in that engine's words.

    Generic in the comparison it judges (:class:`pytest_opid.comparison.Comparison`, which looks
    the rules up): naming that class here would make the two modules import each other.

    An engine whose state is not found by operator ID (Spark: by position) says so with
    ``ids_find_state = False``; its snapshots then write the IDs once
    (:func:`pytest_opid.io.snapshot.dumps`' ``ids_once``), else per operator, as the engine
    restores state by them.

    An engine that plans a restarted program differently from a fresh one (Spark: settings the
    old query's checkpoint pins) has an attribute ``plan_restarted(old, program)``, which
    :func:`pytest_opid.check_restore` calls with a previous fingerprint and a live program."""

    name: str
    #: whether the engine finds an operator's old state by its operator ID (Flink) or not
    #: (Spark: by position); snapshots write IDs once where not, and pictures draw a new ID as
    #: harmless
    ids_find_state: bool
    #: what pictures and tables call things in this engine
    words: EngineWords

    def claims_untagged(self, fp: Fingerprint) -> bool:
        """Whether a fingerprint without an engine tag (saved before the tag existed) is this
        engine's."""

    def neutral(self, fp: Fingerprint) -> Fingerprint:
        """``fp`` in the terms every version of the engine shares: what one version names
        otherwise than another (a renamed class) is not a change. Every comparison reads both
        fingerprints through it."""

    def snapshot_form(self, fp: Fingerprint) -> Fingerprint:
        """What a committed snapshot keeps of ``fp``: the fingerprint without what depends on
        the machine the test ran on (say, the absolute path of a test's input folder)."""

    def snapshot_preamble(self, fp: Fingerprint) -> tuple[str, ...]:
        """Comment lines a snapshot of ``fp`` opens with: how the engine finds state."""

    def loses_state(self, comparison: _ComparisonT) -> bool:
        """Whether the engine would lose (or refuse) the old job's state."""

    def breaks(self, comparison: _ComparisonT, check: Check) -> bool:
        """Whether the change violates what ``check`` holds stable."""

    def explain(self, comparison: _ComparisonT, check: Check, accept: str | None) -> str:
        """The message a failing check prints: verdict, details, fixes in the engine's API."""

    def added_warning(self, comparison: _ComparisonT) -> str | None:
        """A note for changes that pass but leave something unprotected, or ``None``."""

    def other_version(self, made_with: str, checked_with: str) -> str:
        """The end of one line, after "N snapshots were": that they were made with version
        ``made_with`` of the engine and passed against this run's ``checked_with``, and what
        the comparison could hold when the two versions record different facts."""

    def changes(self, comparison: _ComparisonT) -> dict[str, Any]:
        """The engine's own account of what changed beyond operators, as JSON-ready keys that
        :meth:`~pytest_opid.comparison.Comparison.to_dict` (``opid diff --json``) adds; ``{}``
        where operators and chains paired by operator IDs say it all. A key the engine-neutral
        form has too replaces it there: ``"chain_changes": []`` says that pairing chains by
        operator IDs does not describe this engine's chains (its splits and merges would be
        invented), and the diff picture then marks none. A ``"stage_changes"`` list (items
        ``{"kind": "added" | "removed" | "changed", "old": {"id", "name"} | None,
        "new": {"id", "name"} | None, ...}``) marks the picture's chains instead."""

    def derive(self, comparison: _ComparisonT) -> object:
        """What the rules derive from ``comparison`` once (their own pairing of stages, say),
        kept by it as :attr:`~pytest_opid.comparison.Comparison.derived` so that the verdict,
        the explanation and the JSON form, which each ask, share it; ``None``: nothing."""

    def check_restore(
        self,
        old: Fingerprint,
        new: Fingerprint,
        allow_non_restored_state: bool,
        comparison: _ComparisonT | None = None,
    ) -> RestoreCheck:
        """Whether ``new`` would start from the state of ``old`` (a snapshot or saved
        fingerprint), decided as the engine decides at restore; ``comparison`` of the two,
        where the caller has it, need not be computed again."""
