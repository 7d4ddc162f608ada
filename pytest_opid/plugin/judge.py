"""One recorded topology judged against its stored snapshot text: the comparison, the verdict
and the message, computed once and shared by everyone who asks.

The marker's recorder (:meth:`pytest_opid.plugin.recorder.Recorder._verify`) and the syrupy
extension (:meth:`~pytest_opid.plugin.extension.TopologySnapshotExtension.matches` and
``diff_lines``, for a test that asserts with the extension directly) both call :func:`judge`;
it reads nothing and writes nothing, so a judgement can be handed on instead of made again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_opid.comparison import Comparison, compare
from pytest_opid.engine_rules import Check
from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import loads
from pytest_opid.render.explain import render
from pytest_opid.result import Fingerprint

__all__ = ["AGAIN", "Judgement", "judge"]

#: How a snapshot that cannot be judged is replaced.
AGAIN = "to replace it, run pytest --snapshot-update"
#: How a missing one is made.
CREATE = "create it with pytest --snapshot-update"


@dataclass(frozen=True)
class Judgement:
    """What :func:`judge` found. ``kind`` is one of:

    * ``same``: the stored text is the recorded one, byte for byte;
    * ``missing``: no snapshot yet;
    * ``unreadable``: the file is not UTF-8 text (or is over the input limit);
    * ``damaged``: the text is not a snapshot (a merge conflict, a file cut short);
    * ``incomparable``: both read, but they cannot be compared (another engine, say);
    * ``different``: the texts differ and only byte equality was asked for (``exact``);
    * ``broken``: the change breaks what the check holds stable;
    * ``harmless``: the texts differ, but the check passes.
    """

    kind: str
    #: whether the snapshot passes (syrupy's ``matches``)
    passes: bool
    #: why it does not, without the snapshot's name (``None`` where it passes)
    message: str | None = None
    #: the stored snapshot, read (``None`` where it could not be, or was the recorded text)
    old: Fingerprint | None = None
    #: the comparison, where one was made
    comparison: Comparison | None = None


def judge(
    stored: str | None,
    text: str,
    new: Fingerprint | None = None,
    *,
    check: Check | None = None,
    allow_reinterpreted_state: bool = False,
    exact: bool = False,
    unreadable: bool = False,
    origin: str = "the snapshot",
) -> Judgement:
    """Judge the recorded fingerprint against its snapshot: ``stored`` is the snapshot's text
    (``None``: there is none; ``unreadable``: ``stored`` says why it cannot be read), ``text``
    the recorded fingerprint's snapshot text and ``new`` the fingerprint itself (``None``: read
    from ``text``). ``check`` is what is held stable (``None``: the job's own default);
    ``exact`` asks for byte equality, and then nothing is compared; ``origin`` names the file
    in a reading error. One comparison at most."""
    if unreadable:
        return Judgement("unreadable", False, f"{stored}; {AGAIN}")
    if stored == text:
        return Judgement("same", True)
    if stored is None:
        return Judgement("missing", False, f"no snapshot yet; {CREATE}")
    try:
        old = loads(stored, origin=origin)
    except DocumentError as exc:
        return Judgement("damaged", False, f"{exc}; {AGAIN}")
    if exact:
        return Judgement("different", False, "the snapshot differs", old)
    try:
        if new is None:
            new = loads(text)
        comparison = compare(old, new, allow_reinterpreted_state=allow_reinterpreted_state)
        held = check or Check.default_for(new)
        broken = comparison.breaks(held)
        message = render(comparison, held) if broken else None
    except DocumentError as exc:
        return Judgement(
            "incomparable", False, f"{exc}; recreate it with pytest --snapshot-update", old
        )
    if broken:
        return Judgement("broken", False, message, old, comparison)
    return Judgement("harmless", True, None, old, comparison)
