"""URI helpers over pyarrow.fs so local paths, file://, s3:// and gs:// roots all work."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pyarrow.fs as pafs


def normalize(uri: str) -> str:
    """Absolute local path for scheme-less URIs; other URIs unchanged (no trailing slash)."""
    if "://" in uri:
        return uri.rstrip("/")
    return os.path.abspath(os.path.expanduser(uri))


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *[p.strip("/") for p in parts]])


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    return pafs.FileSystem.from_uri(normalize(uri))


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def is_dir(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type == pafs.FileType.Directory


def stamp(uri: str) -> tuple[int, int]:
    """(size in bytes, modification time in ns) of a file (0 for what the store does not say)."""
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    return int(info.size or 0), int(info.mtime_ns or 0)


def makedirs(uri: str) -> None:
    fs, path = filesystem(uri)
    fs.create_dir(path, recursive=True)


def list_dir(uri: str) -> list[str]:
    """Base names of the entries directly under ``uri`` (empty if it does not exist)."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=False))
    return sorted(i.base_name for i in infos)


def write_bytes(uri: str, data: bytes) -> None:
    fs, path = filesystem(uri)
    parent = path.rsplit("/", 1)[0]
    if parent:
        fs.create_dir(parent, recursive=True)
    with fs.open_output_stream(path) as f:
        f.write(data)


def read_bytes(uri: str) -> bytes:
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as f:
        return f.read()


def write_json(uri: str, obj: Any) -> None:
    write_bytes(uri, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())


def write_json_atomic(uri: str, obj: Any) -> None:
    """Replace ``uri`` as a whole: readers see the old or the new document, never a partial one.

    Local files are written beside the target and renamed over it; object stores replace an
    object atomically on PUT.
    """
    fs, path = filesystem(uri)
    if not isinstance(fs, pafs.LocalFileSystem):
        write_json(uri, obj)
        return
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    write_json(tmp, obj)
    fs.move(tmp, path)


def read_json(uri: str) -> Any:
    return json.loads(read_bytes(uri))


def read_json_object(uri: str) -> dict[str, Any] | None:
    """The JSON object at ``uri``; None when there is none, or what is there cannot be read as one."""
    if not exists(uri):
        return None
    try:
        obj = read_json(uri)
    except (ValueError, OSError):
        return None
    return obj if isinstance(obj, dict) else None


def delete_dir(uri: str) -> None:
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def delete_file(uri: str) -> None:
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.File:
        fs.delete_file(path)
