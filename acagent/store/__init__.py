"""The journal (SQLite, WAL) and the JSONL transcripts."""

from __future__ import annotations

from acagent.store._journal import Lease, SessionRow, SqliteJournal, StepRow, ToolCallRow, new_session_id
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
    SetApprovalRules,
    SetCancel,
    SetStatus,
    SetTurn,
    UpdateToolCall,
)
from acagent.store._usage import RecordUsage, UsageTotals, local_day

__all__ = [
    "ACTIVE",
    "CONTEXT_TYPES",
    "RESTING",
    "STATUSES",
    "AddUsage",
    "FinishStep",
    "InsertStep",
    "InsertToolCall",
    "Lease",
    "Op",
    "RecordUsage",
    "SessionRow",
    "SetApprovalRules",
    "SetCancel",
    "SetStatus",
    "SetTurn",
    "SqliteJournal",
    "StepRow",
    "ToolCallRow",
    "UpdateToolCall",
    "UsageTotals",
    "local_day",
    "new_session_id",
]
