"""The chain key: what makes the hash chain unforgeable by someone who can only edit the file.

Chain version 1 (stores written before keys existed) hashes each event with plain SHA-256:
anyone who can write the file can recompute it. Chain version 2 (every new event) is an
HMAC-SHA-256 with a key kept *outside* the store, and also covers the event's global
position. The key comes from, in order:

* ``TA_ACTORS_CHAIN_KEY``: hex (even length, at least 32 hex digits) or any other text;
* the key file ``TA_ACTORS_CHAIN_KEY_FILE``, default ``<user config dir>/ta-actors/chain.key``,
  created on first use (32 random bytes, hex, permissions 0600, created atomically: it
  appears whole or not at all, and two processes racing to create it end up with one key).

Readers never create a key: a verify without any key says so. The same resolution runs in a
Ray worker (it sees the same environment and home directory).
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_ENV = "TA_ACTORS_CHAIN_KEY"
KEY_FILE_ENV = "TA_ACTORS_CHAIN_KEY_FILE"
#: HMAC of this constant identifies a key without revealing it (stored in the store's meta).
_KEY_ID_LABEL = b"ta-actors chain key id v1"


class ChainKeyError(RuntimeError):
    """No usable chain key; the message names where one was looked for."""


def default_key_file() -> Path:
    configured = os.environ.get(KEY_FILE_ENV)
    if configured:
        return Path(configured).expanduser()
    import platformdirs
    return Path(platformdirs.user_config_dir("ta-actors")) / "chain.key"


def parse_key(text: str) -> bytes:
    """Hex if it is hex (>= 128 bits), else the UTF-8 bytes of the text itself."""
    text = text.strip()
    if not text:
        raise ChainKeyError("the chain key is empty")
    if len(text) >= 32 and len(text) % 2 == 0:
        with contextlib.suppress(ValueError):  # not hex after all: the text is the key
            return bytes.fromhex(text)
    return text.encode()


def load_chain_key(create: bool = True) -> bytes:
    """The key new events are chained with (see the module docstring for where it comes from).
    ``create=False`` (readers) raises :class:`ChainKeyError` instead of creating a key file."""
    env = os.environ.get(KEY_ENV)
    if env:
        return parse_key(env)
    path = default_key_file()
    try:
        return parse_key(path.read_text())
    except FileNotFoundError:
        if not create:
            raise ChainKeyError(f"no chain key: set {KEY_ENV} or provide the key file {path} "
                                f"(or {KEY_FILE_ENV})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ChainKeyError(f"cannot read the chain key file {path}: {exc}") from None
    return _create_key_file(path)


def _create_key_file(path: Path) -> bytes:
    """Write a new random key to a private temporary file, then link it into place: the key
    file never exists half-written, and if another process won the race its key is used."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(tmp, path)  # fails if the file exists: never overwrite a key
    finally:
        tmp.unlink(missing_ok=True)
    return parse_key(path.read_text())


def key_id(key: bytes) -> str:
    """A short public fingerprint of a key: lets verify tell 'wrong key' from 'altered'."""
    return hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:32]


def sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def signature_ok(key: bytes, text: str, signature: str) -> bool:
    return hmac.compare_digest(sign(key, text), signature or "")
