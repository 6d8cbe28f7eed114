"""The only place that builds the object graph from settings."""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

from a2a_common.clock import Clock, SystemClock
from a2a_common.sqlite import open_state_db
from cache.memory import Memory
from cloud_client.client import CloudClient
from edge import __version__
from edge.checkpointer import Checkpointer
from edge.commits import Commits
from edge.config import Secrets, Settings
from edge.memory_ops import MemoryOps
from edge.notify import Notifier
from edge.outbound import DurableOutbox, InboxDedupe
from edge.policies import memory_policy
from edge.runtime import Runtime
from edge.schema import MIGRATIONS
from edge.sync_sink import MemorySyncSink
from edge.topics import Topics
from edge.turns import TurnHandler
from edge.workflows import WorkflowDriver
from sync.outbox import SyncOutbox
from sync.replay import Replayer
from taskmanager.catalog import load_catalog
from taskmanager.service import TaskManager


def open_db(settings: Settings) -> sqlite_utils.Database:
    """The state DB for writing (the service, or a CLI command when no service runs)."""
    return open_state_db(
        settings.state_db_path,
        MIGRATIONS,
        synchronous=settings.storage.synchronous,
        busy_timeout_ms=settings.storage.busy_timeout_ms,
        max_size_kb=settings.storage.max_size_kb,
    )


def cloud_client(settings: Settings, secrets: Secrets) -> CloudClient:
    return CloudClient(
        base_url=settings.cloud.base_url,
        token=secrets.cloud_token,
        connect_timeout_s=settings.cloud.connect_timeout_s,
        read_timeout_s=settings.cloud.read_timeout_s,
        verify_tls=settings.cloud.verify_tls,
        user_agent=f"a2a-edge/{__version__}",
    )


def replayer_for(
    settings: Settings,
    *,
    db: sqlite_utils.Database,
    clock: Clock,
    memory: Memory,
    outbox: SyncOutbox,
    cloud: CloudClient,
    max_backoff_s: float | None = None,
) -> Replayer:
    """The sync replayer of the service, or of a CLI replay (which backs off less)."""
    return Replayer(
        db=db,
        clock=clock,
        outbox=outbox,
        poster=cloud,
        sink=MemorySyncSink(memory),
        device_id=settings.device_id,
        batch_size=settings.sync.batch_size,
        deadline_s=settings.sync.deadline_s,
        max_backoff_s=settings.sync.max_backoff_s if max_backoff_s is None else max_backoff_s,
    )


def build_runtime(
    settings: Settings,
    secrets: Secrets,
    *,
    clock: Clock | None = None,
    notifier: Notifier | None = None,
    config_path: Path | None = None,
) -> Runtime:
    """Open the state DB (migrating it) and wire every component; raises StorageError."""
    clock = clock or SystemClock()
    db = open_db(settings)
    commits = Commits(db)
    # the service's connection never checkpoints inside a COMMIT: its checkpointer does
    db.execute("PRAGMA wal_autocheckpoint=0")
    checkpointer = Checkpointer(
        settings.state_db_path, busy_timeout_ms=settings.storage.busy_timeout_ms
    )
    topics = Topics(settings.mqtt.topic_prefix, settings.device_id)
    memory = Memory(db=db, clock=clock, policy=memory_policy(settings))
    outbox = DurableOutbox(db=db, clock=clock)
    cloud = cloud_client(settings, secrets)
    sync_outbox = SyncOutbox(db=db, clock=clock)
    tm = TaskManager(
        db=db,
        clock=clock,
        catalog=load_catalog(settings.taskmanager.catalog_file),
        outbound=outbox,
        topic_root=topics.root,
        ask_timeout_s=settings.taskmanager.ask_timeout_s,
    )
    workflows = WorkflowDriver(
        commits=commits,
        tm=tm,
        memory=memory,
        sync_outbox=sync_outbox,
        outbox=outbox,
        cloud=cloud,
        clock=clock,
        device_id=settings.device_id,
        events_deadline_s=settings.taskmanager.events_deadline_s,
    )
    replayer = replayer_for(
        settings, db=db, clock=clock, memory=memory, outbox=sync_outbox, cloud=cloud
    )
    dedupe = InboxDedupe(db=db, clock=clock)
    turns = TurnHandler(
        commits=commits,
        memory=memory,
        sync_outbox=sync_outbox,
        workflows=workflows,
        cloud_back=replayer.kick,
        cloud=cloud,
        outbox=outbox,
        dedupe=dedupe,
        topics=topics,
        settings=settings,
        clock=clock,
    )
    return Runtime(
        settings=settings,
        db=db,
        commits=commits,
        clock=clock,
        topics=topics,
        memory=memory,
        cloud=cloud,
        outbox=outbox,
        turns=turns,
        workflows=workflows,
        replayer=replayer,
        sync_outbox=sync_outbox,
        memory_ops=MemoryOps(
            db=db,
            memory=memory,
            sync_outbox=sync_outbox,
            clock=clock,
            checkpoint_lock=checkpointer.lock,
        ),
        checkpointer=checkpointer,
        dedupe=dedupe,
        notifier=notifier or Notifier(),
        password=secrets.mqtt_password,
        config_path=config_path,
    )
