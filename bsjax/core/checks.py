"""Checks of command-line input shared by every `bsjax` command.

Every check raises `UsageError` with a one-line reason (reported as `bsjax: error: ...`, exit code
2) and writes nothing, so an entry point runs them all before its first write.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import tempfile
import tomllib
from pathlib import Path

from bsjax.core.errors import UsageError

# A root seed of a JAX key (--seed / --run-seed).
MAX_SEED = 2**32 - 1


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str):
        self.exit(2, f"bsjax: error: {message}\n")


# --- scalars ------------------------------------------------------------------------------------

def batch_size(text: str):
    """An argparse type: `auto` or an integer (its range is checked with the rest of a config)."""
    if text.strip() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or auto, got {text!r}") from None


def nonempty(value, flag: str):
    """`value` unless it is an empty or blank string (None passes: the flag was not given)."""
    if isinstance(value, str) and not value.strip():
        raise UsageError(f"{flag} is empty")
    return value


def int_in(value, flag: str, lo: int, hi: int | None = None) -> int:
    """An int (not a bool) in lo..hi."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{flag} must be an integer (got {value!r})")
    if value < lo:
        raise UsageError(f"{flag} must be at least {lo} (got {value})")
    if hi is not None and value > hi:
        raise UsageError(f"{flag} must be at most {hi} (got {value})")
    return value


def positive_float(value, flag: str, hi: float) -> float:
    """A finite number in (0, hi]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= hi:
        raise UsageError(f"{flag} must be in (0, {hi:g}] (got {value!r})")
    return value


def unique(names, flag: str) -> list:
    """`names` as a list; UsageError if one repeats."""
    names = list(names)
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise UsageError(f"{flag} names {repeated} twice")
    return names


# --- paths --------------------------------------------------------------------------------------

def writable_dir(path, flag: str) -> Path:
    """A directory that exists or can be made, and can be written to. Probes with a temporary
    directory that it removes again; raises UsageError otherwise."""
    nonempty(str(path), flag)
    target = Path(path)
    try:
        if target.exists() and not target.is_dir():
            raise UsageError(f"{flag} {path} is a file, not a directory")
        existing = target.absolute()
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise UsageError(f"{flag} {path}: {existing} is not a directory")
        os.rmdir(tempfile.mkdtemp(prefix=".bsjax-probe-", dir=existing))
    except UsageError:
        raise
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise UsageError(f"{flag} {path} cannot be written ({reason})") from None
    return target


def input_dir(path, flag: str) -> Path:
    """A directory read from and written to only where something is missing (a GILP work
    directory): an existing directory passes as it is (it may be read-only); one that does not
    exist yet must be one `writable_dir` could make."""
    nonempty(str(path), flag)
    target = Path(path)
    if target.is_dir():
        return target
    return writable_dir(target, flag)


def safe_dir_name(name, what: str) -> str:
    """A name that stays inside the directory it is joined to (a study row's run directory)."""
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{what} must be a non-empty string (got {name!r})")
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or any(p in ("", ".", "..") for p in parts) or "\0" in name:
        raise UsageError(f"{what} {name!r} cannot name a directory under the output directory")
    return name



# --- files ---------------------------------------------------------------------------------------

def read_toml(path, flag: str, what: str = "experiment file") -> dict:
    """A TOML file's tables; UsageError for an empty flag, a missing file, a directory, a file
    that is not UTF-8 or not TOML."""
    nonempty(path, flag)
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory, not a TOML file")
    if not path.is_file():
        raise UsageError(f"{what} not found: {path}")
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UsageError(f"{path}: not a valid TOML file ({str(err).splitlines()[0]})") from None


# --- network ------------------------------------------------------------------------------------

def check_listen(host: str, port, flag_host: str = "--host", flag_port: str = "--port") -> None:
    """A host and port a server can bind now (probed with a socket that is closed again)."""
    nonempty(host, flag_host)
    int_in(port, flag_port, 1, 65535)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        raise UsageError(f"{flag_host} {host!r}: {getattr(err, 'strerror', None) or err}") \
            from None
    family, kind, proto, _, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as err:
        raise UsageError(f"cannot listen on {host}:{port} ({err.strerror or err})") from None



__all__ = ["MAX_SEED", "ArgumentParser", "check_listen", "input_dir", "int_in", "nonempty",
           "positive_float", "read_toml", "safe_dir_name", "unique", "writable_dir"]
