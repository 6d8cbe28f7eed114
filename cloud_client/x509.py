"""Just enough DER to name a certificate: its subject and issuer (the runtime carries no
X.509 library, and `ssl` names nothing of the certificate it refused)."""

from __future__ import annotations

_ATTRIBUTES = {
    b"\x55\x04\x03": "CN",
    b"\x55\x04\x0a": "O",
    b"\x55\x04\x0b": "OU",
}
_VERSION_TAG = 0xA0


def _tlv(der: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of value, end of value) of the element at `at`."""
    tag, length = der[at], der[at + 1]
    at += 2
    if length & 0x80:
        size = length & 0x7F
        length = int.from_bytes(der[at : at + size], "big")
        at += size
    if at + length > len(der):
        raise ValueError("truncated DER")
    return tag, at, at + length


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    found = []
    while start < end:
        element = _tlv(der, start)
        found.append(element)
        start = element[2]
    return found


def _text(der: bytes, tag: int, start: int, end: int) -> str:
    raw = der[start:end]
    if tag == 0x1E:  # BMPString
        return raw.decode("utf-16-be", "replace")
    return raw.decode("utf-8" if tag == 0x0C else "latin-1", "replace")


def _name(der: bytes, start: int, end: int) -> str:
    parts = []
    for _, set_start, set_end in _children(der, start, end):
        for _, seq_start, seq_end in _children(der, set_start, set_end):
            (_, o_start, o_end), (tag, v_start, v_end) = _children(der, seq_start, seq_end)[:2]
            label = _ATTRIBUTES.get(der[o_start:o_end])
            if label:
                parts.append(f"{label}={_text(der, tag, v_start, v_end)}")
    return ", ".join(parts) or "(no name)"


def subject_and_issuer(der: bytes) -> tuple[str, str] | None:
    """The certificate's subject and issuer as `CN=…, O=…`; None if `der` is not one."""
    try:
        _, start, end = _tlv(der, 0)  # Certificate
        _, start, end = _tlv(der, start)  # TBSCertificate
        fields = _children(der, start, end)
        if fields and fields[0][0] == _VERSION_TAG:
            fields = fields[1:]
        # serialNumber, signature, issuer, validity, subject
        issuer, subject = fields[2], fields[4]
        return _name(der, *subject[1:]), _name(der, *issuer[1:])
    except (IndexError, ValueError):
        return None
