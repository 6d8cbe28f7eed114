"""Pydantic wire models of SPEC §3.1. Cloud responses allow extra fields (the cloud evolves).

Every field the device stores from the cloud is bounded here, where it enters (docs/design.md,
*Fields from the cloud*): names — ids, keys, routes, categories, the sync cursor and version —
longer than their bound make the body fail validation (a cut name would be another name);
free texts the device keeps for the snapshot are cut to `TEXT_MAX` characters (the snapshot
cuts them further to its budget). Categories are lower-cased here (SPEC §5.5).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictInt,
    StringConstraints,
    ValidationInfo,
)

from a2a_common.clock import iso
from a2a_common.jsonx import canonical
from a2a_common.people import PERSON_ID_MAX, PERSON_ID_PATTERN
from a2a_common.text import normal_value

log = logging.getLogger(__name__)

TEXT_MAX = 4096  # characters of a stored text (a summary, a reply): the default budget's size
VALUE_MAX_BYTES = 1024  # a profile value's canonical JSON
IDS_MAX = 1000  # entries of a provenance list
_PRINTABLE = r"^[^\x00-\x1f\x7f]*$"  # no control characters in a name


def _cut_text(value: Any, info: ValidationInfo) -> Any:
    value = normal_value(value)  # SPEC 2.4: NFC, no format characters, before the cut
    if isinstance(value, str) and len(value) > TEXT_MAX:
        log.warning(
            "cloud field %s cut from %d to %d characters", info.field_name, len(value), TEXT_MAX
        )
        return value[:TEXT_MAX]
    return value


def _small_value(value: Any) -> Any:
    size = len(canonical(value))
    if size > VALUE_MAX_BYTES:
        raise ValueError(f"value is {size} bytes of JSON (at most {VALUE_MAX_BYTES})")
    return value


Text = Annotated[str, BeforeValidator(_cut_text)]
CloudId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=_PRINTABLE)]
# a key and a value are taken as SPEC 2.4 says (NFC, no format characters) before their rules
ProfileKey = Annotated[CloudId, BeforeValidator(normal_value)]
Route = Annotated[str, StringConstraints(max_length=32, pattern=_PRINTABLE)]  # "" = none
WorkflowRef = Annotated[str, StringConstraints(max_length=96, pattern=_PRINTABLE)]  # "" = none
Category = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, to_lower=True, min_length=1, max_length=64, pattern=_PRINTABLE
    ),
]
# "" is no category, as absent is
OptCategory = Annotated[Category | None, BeforeValidator(lambda v: None if v == "" else v)]
ProfileValue = Annotated[Any, BeforeValidator(normal_value), AfterValidator(_small_value)]
Instant = Annotated[AwareDatetime, PlainSerializer(iso, return_type=str)]
IdList = Annotated[list[CloudId], Field(max_length=IDS_MAX)]
PersonRef = Annotated[
    str,
    BeforeValidator(normal_value),
    StringConstraints(max_length=PERSON_ID_MAX, pattern=PERSON_ID_PATTERN),
]


# defer_build: a model's validator and serializer (~20-40 kB each, most of it in pydantic-core's
# heap) are built at its first own validation, not at import. A model only ever met nested in
# another is inlined in that one's schema and never builds its own (issue 36, steady RSS).
class _Response(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)


class SyncWire(_Response):
    cursor: Annotated[str, StringConstraints(max_length=128, pattern=_PRINTABLE)]
    version: Annotated[str, StringConstraints(max_length=32, pattern=_PRINTABLE)]


class ShortTermPairWire(_Response):
    user_text: str = ""  # the device keeps its own copy of the user's words; this one is unused
    assistant_text: Text = ""
    route_family: Route = ""
    workflow_id: WorkflowRef = ""
    category: OptCategory = None  # SPEC 5.5: the cloud's category of the pair


class ProfileCandidateWire(_Response):
    key: ProfileKey
    value: ProfileValue
    category: OptCategory = None
    confidence: float | None = Field(None, ge=0, le=1)
    evidence_kind: Literal["mention", "suggestion_accepted"] = "mention"


class WriteCandidatesWire(_Response):
    short_term_pair: ShortTermPairWire | None = None
    profile_candidates: list[ProfileCandidateWire] = []


class DeviceCacheUpdateWire(_Response):
    active_workflow_id: WorkflowRef = ""
    last_route: Route = ""
    session_summary: Text = ""
    session_summary_category: OptCategory = None  # SPEC 5.5: the summary's category


class MemoryUpdateWire(_Response):
    contract_version: str = "a2a-memory-context-v1"
    source: str = ""
    sync: SyncWire | None = None
    write_candidates: WriteCandidatesWire = WriteCandidatesWire()
    device_cache_update: DeviceCacheUpdateWire = DeviceCacheUpdateWire()


class BatchAnswer(_Response):
    """The answer to a batch of terminal reports (SPEC §3.3): how many the cloud took."""

    accepted: StrictInt = Field(ge=0)


class TurnResponse(_Response):
    request_id: str
    route_family: str = Field(min_length=1, max_length=32)
    assistant_text: str = Field(max_length=8000)
    device_task_requests: list[dict[str, Any]] = []
    device_workflow_requests: list[dict[str, Any]] = []
    memory_update: MemoryUpdateWire | None = None


class VoiceContext(BaseModel):
    recognized_text: str
    session_id: str
    last_route: str
    active_workflow_id: str
    memory_snapshot: dict[str, Any]
    speaker_id: str = "household"  # SPEC 5.7: whom the turn serves (a person or the household)


class TurnRequest(BaseModel):
    request_id: str
    device_id: str
    recognized_text: str
    voice_context: VoiceContext
    device_context: dict[str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class SnapshotPair(_Strict):
    user: str
    assistant: str
    route_family: str | None = None


class SnapshotShortTerm(_Strict):
    recent_pairs: list[SnapshotPair]
    session_summary: str


class SnapshotDaily(_Strict):
    day: str
    summary: str


class SnapshotMidTerm(_Strict):
    daily_summaries: list[SnapshotDaily]
    weekly_digest: str


class SnapshotProfileItem(_Strict):
    key: str
    value: Any
    category: str | None = None
    confidence: float | None = None


class SnapshotLongTerm(_Strict):
    profile_items: list[SnapshotProfileItem]


class MemorySnapshot(_Strict):
    """The exact shape of SPEC §5.2 (`a2a-memory-context-v1`), nothing more."""

    source: Literal["ondevice_cache"]
    short_term: SnapshotShortTerm
    mid_term: SnapshotMidTerm
    long_term: SnapshotLongTerm
    sync: SyncWire


class DailySummaryWire(_Response):
    day: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    summary: Text
    summary_id: CloudId | None = None
    source_session_ids: IdList = []
    expire_at: Instant | None = None
    category: OptCategory = None
    person_id: PersonRef | None = None  # SPEC 5.7: whose (absent: the household's)


class WeeklyDigestWire(_Response):
    week: str = Field(pattern=r"^\d{4}-W\d{2}$")
    digest: Text
    digest_id: CloudId | None = None
    source_summary_ids: IdList = []
    expire_at: Instant | None = None
    category: OptCategory = None
    person_id: PersonRef | None = None  # SPEC 5.7: whose (absent: the household's)


class ProfileItemWire(_Response):
    key: ProfileKey
    value: ProfileValue
    category: OptCategory = None
    confidence: float | None = Field(None, ge=0, le=1)
    relevance_score: float | None = Field(None, ge=0, le=1)
    status: Literal["confirmed"] = "confirmed"
    expire_at: Instant | None = None
    source_candidate_ids: IdList = []
    source_summary_ids: IdList = []
    source_session_ids: IdList = []
    source_pair_ids: IdList = []
    person_id: PersonRef | None = None  # SPEC 5.7: whose (absent: the household's)


class SyncUpdates(_Response):
    """`updates` of a memory sync answer (SPEC §3.2); `person_id` (SPEC 5.7): whose its
    entries are when they do not say (absent: the household's), and whose deleted keys."""

    person_id: PersonRef | None = None

    daily_summaries: Annotated[list[DailySummaryWire], Field(max_length=64)] = []
    weekly_digest: WeeklyDigestWire | None = None
    profile_items: Annotated[list[ProfileItemWire], Field(max_length=IDS_MAX)] = []
    deleted_profile_keys: Annotated[list[ProfileKey], Field(max_length=IDS_MAX)] = []
