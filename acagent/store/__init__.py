"""The journal (a :class:`Journal` protocol; SQLite, WAL, its first backend) and the JSONL transcripts."""

from __future__ import annotations

from acagent.store._ops import (
    ACTIVE,
    CONTEXT_TYPES,
    RESTING,
    STATUSES,
    AddUsage,
    FinishStep,
    InsertStep,
    InsertToolCall,
    Op,
    ReleaseLease,
    SetApprovalRules,
    SetCancel,
    SetStatus,
    SetTitle,
    SetTurn,
    UpdateToolCall,
)
from acagent.store._protocol import ImportedSession, Journal
from acagent.store._rows import Lease, SessionRow, StepRow, ToolCallRow, new_session_id
from acagent.store._sqlite import SqliteJournal
from acagent.store._usage import RecordUsage, UsageTotals, local_day

__all__ = [
    "ACTIVE",
    "CONTEXT_TYPES",
    "RESTING",
    "STATUSES",
    "AddUsage",
    "FinishStep",
    "ImportedSession",
    "InsertStep",
    "InsertToolCall",
    "Journal",
    "Lease",
    "Op",
    "RecordUsage",
    "ReleaseLease",
    "SessionRow",
    "SetApprovalRules",
    "SetCancel",
    "SetStatus",
    "SetTitle",
    "SetTurn",
    "SqliteJournal",
    "StepRow",
    "ToolCallRow",
    "UpdateToolCall",
    "UsageTotals",
    "local_day",
    "new_session_id",
]
