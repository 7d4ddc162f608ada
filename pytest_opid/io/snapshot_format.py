"""The ``.opid`` snapshot's words, shared by its writer (:mod:`pytest_opid.io.snapshot`) and its
reader (:mod:`pytest_opid.io.snapshot_read`): the first line of each format, the section names,
which format brought or dropped which section, and the cell that means "none"."""

from __future__ import annotations

import re

__all__ = [
    "DETAILS",
    "END",
    "HEADER",
    "HEADERS",
    "HEADER_IDS_ONCE",
    "IDS",
    "JOB",
    "MEANING",
    "NONE",
    "OPERATORS",
    "PLAN",
    "PREFIX",
    "SECTIONS",
    "SETTINGS",
    "SINCE",
    "SOURCES",
    "STAGES",
    "STATES",
    "STORES",
    "SURROGATE",
    "UNTIL",
    "VERTICES",
]

#: The start of every snapshot's first line, whatever its format.
PREFIX = "# pytest-opid topology snapshot"

#: First line of the snapshots whose operator IDs find state (Flink's): one ID per operator.
HEADER = f"{PREFIX}, format 5"

#: First line of the snapshots whose engine finds state by position (Spark's): IDs once.
HEADER_IDS_ONCE = f"{PREFIX}, format 6"

HEADERS = {f"{PREFIX}, format {n}": n for n in (1, 2, 3, 4, 5, 6)}

JOB = "[job]"

OPERATORS = "[operators]"

DETAILS = "[operator details]"

VERTICES = "[job vertices]"

STATES = "[state operators]"

STORES = "[state stores]"

MEANING = "[state meaning]"

SOURCES = "[sources]"

#: What a job reads and writes as a restart acts on it: one row per fact, so that a changed
#: sink path is one changed line.
ENDPOINTS = "[sinks and sources]"

SETTINGS = "[settings]"

PLAN = "[plan]"

STAGES = "[stages]"

IDS = "[ids]"

#: Format 5's last line: a snapshot without it was cut short.
END = "[end]"

SECTIONS = (
    JOB,
    SETTINGS,
    OPERATORS,
    DETAILS,
    VERTICES,
    STATES,
    STORES,
    MEANING,
    SOURCES,
    ENDPOINTS,
    PLAN,
    STAGES,
    IDS,
)

#: Sections a format introduced (older formats do not have them).
SINCE = {SETTINGS: 4, PLAN: 4, ENDPOINTS: 5, STAGES: 6, IDS: 6}

#: Sections format 6 no longer has (its [stages] and [ids] say it).
UNTIL = {VERTICES: 5}

SURROGATE = re.compile("[\ud800-\udfff]")

NONE = "-"
