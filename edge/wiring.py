"""The only place that builds the object graph from settings: `build_app` for the service and
for the CLI when no service runs (one admin path, not two), `build_runtime` around it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from a2a_common.backup import PreMigrationBackups
from a2a_common.clock import Clock, SystemClock
from a2a_common.db import Database
from a2a_common.sqlite import StorageError, open_state_db
from cache import Memory
from cloud_client import CloudClient
from edge import __version__
from edge.app.consent_ops import ConsentOps
from edge.app.device import DeviceApp
from edge.app.memory_ops import MemoryOps
from edge.app.publisher import TaskPublisher
from edge.app.sync_sink import MemorySyncSink
from edge.app.turn_inputs import TurnInputs
from edge.channel.mqtt import MqttChannel
from edge.channel.topics import Topics
from edge.config.catalogs import load_catalogs
from edge.config.policies import memory_policy
from edge.config.settings import Secrets, Settings
from edge.host.checkpointer import Checkpointer, restart_at
from edge.host.copies import Copies
from edge.host.metrics import Metrics
from edge.host.notify import Notifier
from edge.host.reserve import Reserve, open_on_full_disk
from edge.host.statefiles import StateFiles
from edge.runtime.executor import Runtime
from edge.store.commits import Commits
from edge.store.consent import ConsentRegister
from edge.store.door import Door
from edge.store.inbox import InboxDeadLetters, InboxDedupe
from edge.store.outbound import DurableOutbox
from edge.store.reports import Reports
from edge.store.reports_owed import OwedReports
from edge.store.schema import MIGRATIONS
from edge.store.work import Work
from sync import Replayer, SyncOutbox
from taskmanager import TaskManager

if TYPE_CHECKING:
    import httpx


def open_db(settings: Settings, clock: Clock | None = None) -> Database:
    """The state DB for writing (the service, or a CLI command when no service runs), checked,
    and backed up into `<state_dir>/backups` before a migration. The caller holds the state
    dir's lock (`edge.host.statelock`)."""
    path = settings.state_db_path
    return open_state_db(
        path,
        MIGRATIONS,
        synchronous=settings.storage.synchronous,
        busy_timeout_ms=settings.storage.busy_timeout_ms,
        max_size_kb=settings.storage.max_size_kb,
        before_migration=PreMigrationBackups(path.parent / "backups", clock or SystemClock()),
    )


def cloud_client(
    settings: Settings, secrets: Secrets, transport: httpx.AsyncBaseTransport | None = None
) -> CloudClient:
    return CloudClient(
        base_url=settings.cloud.base_url,
        token=secrets.cloud_token,
        connect_timeout_s=settings.cloud.connect_timeout_s,
        read_timeout_s=settings.cloud.read_timeout_s,
        verify_tls=settings.cloud.verify_tls,
        max_response_bytes=settings.cloud.max_response_bytes,
        user_agent=f"a2a-edge/{__version__}",
        transport=transport,
    )


def checkpointer(settings: Settings, *, live: bool) -> Checkpointer:
    """The WAL's checkpoints and bound; a service's also watches that its state files are
    still the ones it writes (SPEC §6)."""
    storage = settings.storage
    return Checkpointer(
        settings.state_db_path,
        busy_timeout_ms=storage.busy_timeout_ms,
        max_wal_bytes=storage.max_wal_mb * 2**20,
        synchronous=storage.synchronous,
        files=StateFiles(settings.state_db_path) if live else None,
    )


def build_app(
    settings: Settings,
    secrets: Secrets,
    *,
    db: Database,
    clock: Clock,
    live: bool,
    max_backoff_s: float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> DeviceApp:
    """The app over an open state DB. `live`: a service runs it (report worker, turn tasks);
    otherwise it is the CLI's while no service runs. `max_backoff_s` caps the replay's backoff
    (a CLI replay backs off less); `transport` replaces the cloud's (tests)."""
    outbox = DurableOutbox(db=db, clock=clock)
    wal = checkpointer(settings, live=live)  # its gate and its files' check hold each commit
    commits = Commits(db, on_commit=outbox.flush, gate=wal.gate.writing, guard=wal.intact)
    topics = Topics(settings.mqtt.topic_prefix, settings.device_id)
    register = _consent_register(settings, db, clock)
    memory = Memory(
        db=db, clock=clock, policy=memory_policy(settings), consents=register.categories
    )
    cloud = cloud_client(settings, secrets, transport)
    sync_outbox = SyncOutbox(db=db, clock=clock)
    reports = _reports(settings, cloud, clock, OwedReports(db=db, sync_outbox=sync_outbox), live)
    publisher = TaskPublisher(
        topics=topics, outbox=outbox, reports=reports, after_commit=commits.after_commit
    )
    tm = _task_manager(settings, db, clock, publisher, register, memory)
    work = Work(
        commits=commits, tm=tm, memory=memory, sync_outbox=sync_outbox, scrub_wal=wal.truncate
    )
    backoff_s = settings.sync.max_backoff_s if max_backoff_s is None else max_backoff_s
    replayer = _replayer(settings, db, clock, commits, memory, sync_outbox, cloud, backoff_s)
    dedupe = InboxDedupe(db=db, clock=clock)
    metrics = Metrics()
    door = Door(unit=work.open)
    turns = TurnInputs(
        door=door,
        settings=settings,
        clock=clock,
        work=work,
        memory=memory,
        topics=topics,
        outbox=outbox,
        sync_outbox=sync_outbox,
        dedupe=dedupe,
        cloud=cloud,
        replayer=replayer,
        metrics=metrics,
    )
    return DeviceApp(
        work=work,
        turns=turns,
        publisher=publisher,
        dead_letters=InboxDeadLetters(
            db=db,
            clock=clock,
            keep=settings.mqtt.dead_letters_keep,
            max_bytes=settings.mqtt.max_payload_bytes,
            max_total=settings.mqtt.dead_letters_max_kb * 1024,
        ),
        memory_ops=MemoryOps(
            memory=memory,
            sync_outbox=sync_outbox,
            clock=clock,
            after_commit=commits.after_commit,
            copies=Copies(settings.state_db_path.parent, clock, settings.storage.backup_keep_days),
        ),
        checkpointer=wal,
        reports=reports,
        consent=ConsentOps(
            register=register, sync_outbox=sync_outbox, tm=tm, after_commit=commits.after_commit
        ),
        door=door,
    )


def _consent_register(settings: Settings, db: Database, clock: Clock) -> ConsentRegister:
    return ConsentRegister(
        db=db,
        clock=clock,
        categories=settings.privacy.consented_categories,
        capabilities=settings.privacy.consented_capabilities,
    )


def _reports(
    settings: Settings, cloud: CloudClient, clock: Clock, owed: OwedReports, live: bool
) -> Reports:
    return Reports(
        cloud=cloud,
        clock=clock,
        sync_outbox=owed.sync,
        owed=owed,
        device_id=settings.device_id,
        deadline_s=settings.taskmanager.events_deadline_s,
        live=live,
        linger_s=settings.taskmanager.events_linger_s,
    )


def _task_manager(
    settings: Settings,
    db: Database,
    clock: Clock,
    publisher: TaskPublisher,
    register: ConsentRegister,
    memory: Memory,
) -> TaskManager:
    """The TaskManager with both catalogs (each checked; a bad one raises CatalogError, exit 2),
    the consent register's held capabilities, the Experience mode and the memory's classifier
    (the policy in force at each call: a reload's lexicon too) for trace redaction."""
    catalog, effects = load_catalogs(settings)  # docs/catalog.md
    return TaskManager(
        db=db,
        clock=clock,
        catalog=catalog,
        publisher=publisher,
        ask_timeout_s=settings.taskmanager.ask_timeout_s,
        cancel_confirm_s=settings.taskmanager.cancel_confirm_s,
        unsent_cancels=publisher.owed_cancels,
        never_sent=publisher.never_sent,
        held_capabilities=register.capabilities,
        effects=effects,
        mode=settings.experience.mode,
        classify=lambda text: memory.policy.privacy.categorize(text),
    )


def _replayer(
    settings: Settings,
    db: Database,
    clock: Clock,
    commits: Commits,
    memory: Memory,
    sync_outbox: SyncOutbox,
    cloud: CloudClient,
    max_backoff_s: float,
) -> Replayer:
    return Replayer(
        db=db,
        atomic=commits.atomic,
        clock=clock,
        outbox=sync_outbox,
        poster=cloud,
        sink=MemorySyncSink(memory),
        device_id=settings.device_id,
        batch_size=settings.sync.batch_size,
        deadline_s=settings.sync.deadline_s,
        max_backoff_s=max_backoff_s,
        linger_s=settings.sync.linger_s,
    )


def build_runtime(
    settings: Settings,
    secrets: Secrets,
    *,
    clock: Clock | None = None,
    notifier: Notifier | None = None,
    config_path: Path | None = None,
) -> Runtime:
    """Open the state DB (migrating it) and wire the service; raises StorageError."""
    clock = clock or SystemClock()
    reserve = Reserve(settings.state_db_path.parent, settings.storage.reserve_mb)
    full_at_start = reserve.full()
    if full_at_start:
        reserve.at_start()  # on a full disk: given back before the DB opens (SPEC 2.4)
    try:
        db = open_db(settings, clock)
    except StorageError as exc:
        if not reserve.full():
            raise
        # SPEC 2.4: up on a full disk all the same: read as it is, turns answered `error`,
        # the PUI acting from memory; restarted (exit 1) once space is back
        db = open_on_full_disk(settings.state_db_path, len(MIGRATIONS))
        reserve.read_only = str(exc)
    if not full_at_start:
        # made only once the state DB passed its checks: a refused start (a symlink, a
        # directory, a read-only dir) makes and logs nothing but its one line (SPEC §6)
        reserve.at_start()
    # the service's connection never checkpoints inside a COMMIT: its checkpointer does, and
    # the first commit after it restarted the log trims the file (SPEC §6: the WAL's bound)
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute(f"PRAGMA journal_size_limit={restart_at(settings.storage.max_wal_mb * 2**20)}")
    app = build_app(settings, secrets, db=db, clock=clock, live=True)
    channel = MqttChannel(
        settings=settings.mqtt,
        client_id=f"a2a-edge-{settings.device_id}",
        password=secrets.mqtt_password,
    )
    return Runtime(
        app=app,
        door=app.door,
        channel=channel,
        notifier=notifier or Notifier(),
        settings=settings,
        config_path=config_path,
        reserve=reserve,
    )
