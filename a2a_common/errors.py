"""The root of every error a2a-edge raises on purpose, and the tree that grows from it.

Each package derives its own branch from `EdgeError` and raises nothing else on purpose;
third-party exceptions are translated where they enter (`raise ... from exc`): httpx into
`CloudUnavailable` / `CloudRejected`; `sqlite3.Error` into `StorageError` where the DB is
opened and into `StorageUnavailable` where a unit of work commits (`edge/store/commits.py`).
Catch a branch to handle one package's failures, `EdgeError` to handle any of ours.

The tree, each class with the module it lives in (tests/a2a_common/test_errors.py checks the
drawing against the code, so it cannot go stale):

* EdgeError               a2a_common.errors
  + StorageError          a2a_common.sqlite
  | - StorageUnavailable  a2a_common.sqlite
  | - StorageCorrupt      a2a_common.sqlite
  | - SchemaTooNew        a2a_common.sqlite
  | - StateDirLocked      edge.host.statelock
  + BackupError           a2a_common.backup
  + ConfigError           edge.config.errors
  + NothingMatched        edge.cli.kit
  + UsageError            edge.cli.kit
  + ServiceSilent         edge.config.errors
  + CloudError            cloud_client.errors
  | - CloudUnavailable    cloud_client.errors
  | | · CloudTransient    cloud_client.errors
  | - CloudRejected       cloud_client.errors
  | - CloudBadResponse    cloud_client.errors
  + CacheError            cache.errors
  | - LexiconError        cache.lexicon
  + TaskError             taskmanager.errors
  | - CatalogError        taskmanager.errors
  | | · EffectsError      taskmanager.errors
  + SyncError             sync.errors
    - ConflictLoop        sync.errors         (also a CloudUnavailable)
    - NoProgress          sync.errors         (also a CloudUnavailable)
"""

from __future__ import annotations


class EdgeError(Exception):
    """Base class; each package derives its own (CacheError, CloudError, ...)."""
