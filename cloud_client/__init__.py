"""The cloud planner's HTTP contract (SPEC §3): wire models, the httpx client, retry policy.
The face: what other packages may use is `__all__`, imported from here (`from cloud_client import
CloudClient`), never from a submodule; tests/test_faces.py holds it. The names load on first use
(PEP 562), so importing the package costs nothing and the CLI's lazy imports stay lazy.
No name here imports httpx eagerly: `cloud_client.client` loads it at the first request
(`edge/runtime/warmup.py` loads it early, off the service's cold path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a_common.faces import Face, lazy_face

if TYPE_CHECKING:
    from cloud_client.body import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
    from cloud_client.client import CloudClient as CloudClient
    from cloud_client.errors import CloudError as CloudError
    from cloud_client.errors import CloudUnavailable as CloudUnavailable
    from cloud_client.models import (
        SyncUpdates as SyncUpdates,
    )
    from cloud_client.models import (
        TurnRequest as TurnRequest,
    )
    from cloud_client.models import (
        TurnResponse as TurnResponse,
    )
    from cloud_client.models import (
        VoiceContext as VoiceContext,
    )
    from cloud_client.security import (
        TlsMode as TlsMode,
    )
    from cloud_client.security import (
        checked_url as checked_url,
    )
    from cloud_client.security import (
        clear_text_token as clear_text_token,
    )
    from cloud_client.security import (
        host_of as host_of,
    )
    from cloud_client.security import (
        tls_mode as tls_mode,
    )
    from cloud_client.security import (
        warnings as security_warnings,
    )

__all__ = [
    "DEFAULT_MAX_BYTES",
    "CloudClient",
    "CloudError",
    "CloudUnavailable",
    "SyncUpdates",
    "TlsMode",
    "TurnRequest",
    "TurnResponse",
    "VoiceContext",
    "checked_url",
    "clear_text_token",
    "host_of",
    "security_warnings",
    "tls_mode",
]

# name -> (submodule, attribute)
_FACE: Face = {
    "CloudClient": ("cloud_client.client", "CloudClient"),
    "CloudError": ("cloud_client.errors", "CloudError"),
    "CloudUnavailable": ("cloud_client.errors", "CloudUnavailable"),
    "DEFAULT_MAX_BYTES": ("cloud_client.body", "DEFAULT_MAX_BYTES"),
    "SyncUpdates": ("cloud_client.models", "SyncUpdates"),
    "TlsMode": ("cloud_client.security", "TlsMode"),
    "TurnRequest": ("cloud_client.models", "TurnRequest"),
    "TurnResponse": ("cloud_client.models", "TurnResponse"),
    "VoiceContext": ("cloud_client.models", "VoiceContext"),
    "checked_url": ("cloud_client.security", "checked_url"),
    "clear_text_token": ("cloud_client.security", "clear_text_token"),
    "host_of": ("cloud_client.security", "host_of"),
    "security_warnings": ("cloud_client.security", "warnings"),
    "tls_mode": ("cloud_client.security", "tls_mode"),
}

if not TYPE_CHECKING:  # a type checker sees the imports above and no catch-all
    __getattr__, __dir__ = lazy_face(globals(), _FACE)
