"""When a TaskManager's slots reached a job, from the TaskManager's own log. Pure.

REST lists a TaskManager once it has registered with the ResourceManager and reported its
slots (`/taskmanagers`); the adaptive scheduler learns of the slots later, when the
TaskManager offers them to the job's JobMaster and the JobMaster's slot pool takes them
(`DeclarativeSlotPoolBridge`, which tells the scheduler: `onNewResourcesAvailable`). On a
busy machine that can be seconds after the listing. The TaskManager logs both ends of the
offer at INFO, and Flink serves that log over REST (`/taskmanagers/:id/log`):

    ... TaskExecutor [] - Receive slot request <allocation> for job <jid> from resource manager ...
    ... TaskExecutor [] - Offer reserved slots to the leader of job <jid>.
    ... TaskSlotTableImpl [] - Activate slot <allocation>.

`TaskExecutor` logs the offer before it sends it, and activates an accepted slot when the
JobMaster's answer comes back (`handleAcceptedSlotOffers`): the slot pool took the slots
in between. So the offer's window is (the offer line, the first activation of a slot
requested for the job after it], to the log's millisecond.

A log's timestamps are the TaskManager's local time in its log4j pattern (Flink's default
`%d{yyyy-MM-dd HH:mm:ss,SSS}`, no zone). They are placed on the epoch by an instant REST
gives (`clock_shift`): the listing that first showed the TaskManager, which its
registration line lies within seconds before, else the job's start, which its first slot
request for the job lies within seconds after; a zone is a whole quarter hour, so the
quarter hours between the two are the zone's offset. A log without those lines, in
another pattern, or further from its anchor than `MAX_LAG_MS` is not used: the
listing's window (or the job's start) stays.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from typing import Final

from services.contracts.events import Window

QUARTER_HOUR_MS: Final = 15 * 60_000
MAX_LAG_MS: Final = 120_000
"""How far a TaskManager's registration line may lie from the listing that first showed it
(after the zone's quarter hours are taken out) for its log to be trusted."""

_STAMP: Final = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)[,.](\d{3})\b")
_REGISTERED: Final = re.compile(r"Successful registration at resource manager ")
_REQUEST: Final = re.compile(r"Receive slot request (\w+) for job (\w+)")
_OFFER: Final = re.compile(r"Offer reserved slots to the leader of job (\w+)")
_ACTIVATE: Final = re.compile(r"Activate slot (\w+)")


@dataclass(frozen=True)
class Offered:
    """What a TaskManager's log says of one job, in the log's own clock (ms as if UTC):
    its last registration with the ResourceManager, and the first offer of the job's
    slots after it that the JobMaster accepted (None: none yet)."""

    registered: int
    offered: int | None = None
    accepted: int | None = None
    requested: int | None = None  # the job's first slot request after the registration


def read(text: str, job_id: str) -> Offered | None:
    """The log's last registration and the job's first accepted offer after it; None when
    the log shows no registration in a pattern this reads."""
    registered: int | None = None
    requested: set[str] = set()
    first_request: int | None = None
    offered: int | None = None
    found: tuple[int, int] | None = None
    for line in text.splitlines():
        stamp = _STAMP.match(line)
        if stamp is None:
            continue
        at = _instant(stamp)
        if _REGISTERED.search(line):
            registered, requested, first_request, offered, found = at, set(), None, None, None
        elif found is not None:
            continue
        elif (request := _REQUEST.search(line)) and request.group(2) == job_id:
            requested.add(request.group(1))
            first_request = at if first_request is None else first_request
        elif (offer := _OFFER.search(line)) and offer.group(1) == job_id:
            offered = at
        elif (active := _ACTIVATE.search(line)) and active.group(1) in requested:
            found = None if offered is None else (offered, at)
    if registered is None:
        return None
    offered, accepted = (None, None) if found is None else found
    return Offered(registered, offered, accepted, first_request)


def on_the_epoch(offered: Offered, shift: int) -> Window | None:
    """The accepted offer's window on the epoch (`shift`: `clock_shift`); None if none yet."""
    if offered.offered is None or offered.accepted is None:
        return None
    return Window(offered.offered + shift - 1, offered.accepted + shift)


def clock_shift(offered: Offered, listed: Window | None, job_start: int | None) -> int | None:
    """What to add to the log's instants to place them on the epoch: the whole quarter
    hours between its registration line and the listing that first showed the
    TaskManager, else between the job's start and its first slot request for the job;
    None without an anchor, or when what is left over exceeds `MAX_LAG_MS` (not this
    TaskManager's log, or a clock far off)."""
    if listed is not None:
        local, anchor = offered.registered, listed.by
    elif job_start is not None and offered.requested is not None:
        local, anchor = offered.requested, job_start
    else:
        return None
    shift = round((anchor - local) / QUARTER_HOUR_MS) * QUARTER_HOUR_MS
    return shift if abs(anchor - local - shift) <= MAX_LAG_MS else None


def _instant(stamp: re.Match[str]) -> int:
    year, month, day, hour, minute, second, ms = map(int, stamp.groups())
    return calendar.timegm((year, month, day, hour, minute, second)) * 1000 + ms
