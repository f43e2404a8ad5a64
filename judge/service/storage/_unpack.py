"""An upload copied block by block into a plain file and its gzip form, under caps.

A ``.gz`` upload is unpacked while it is copied, the unpacked size, each line and the ratio of
unpacked to packed bytes checked on every block, so a gzip bomb stops within its first MBs
(413); content that is gzip again is refused in its first bytes (422).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..._errors import ServiceError
from ..db import UploadCaps

_CHUNK = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"
_RATIO_AFTER = 1 << 20
"""The compression ratio is checked once this much is unpacked (small files may be dense)."""


def _quota_error(quota: int) -> ServiceError:
    return ServiceError(f"the project's files would take more than its quota of "
                        f"{_size(quota)} (delete files it no longer needs)", status=413)


def _size(count: int) -> str:
    if count >= 1024 ** 3:
        return f"{count / 1024 ** 3:g} GB"
    if count >= 1024 ** 2:
        return f"{count / 1024 ** 2:g} MB"
    return f"{count} bytes"


@dataclass
class Unpacked:
    sha256: str
    size: int
    packed: int


class _Writer:
    """Writes unpacked bytes to the plain file and its gzip copy (what the database keeps),
    hashing them and counting, against the unpacked and per-record caps."""

    def __init__(self, plain: IO[bytes], packed: IO[bytes] | None, caps: UploadCaps, *,
                 unpacking: bool = False) -> None:
        self.plain = plain
        self.unpacking = unpacking
        self.head = b""
        self.packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS) \
            if packed is not None else None
        self.packed = packed
        self.caps = caps
        self.digest = hashlib.sha256()
        self.size = 0
        self.line = 0  # bytes of the line not yet ended
        self.longest = 0

    def write(self, block: bytes) -> None:
        if not block:
            return
        if self.unpacking and len(self.head) < len(_GZIP_MAGIC):
            self.head += block[:len(_GZIP_MAGIC) - len(self.head)]
            if self.head == _GZIP_MAGIC:
                raise ServiceError("the upload is gzip inside gzip; the server unpacks one "
                                   "layer only: unpack it once and upload the result",
                                   status=422, field="file")
        self.size += len(block)
        if self.size > self.caps.unpacked:
            if self.caps.quota_bound:
                raise _quota_error(self.caps.quota or 0)
            raise ServiceError(f"the upload unpacks to more than the server's limit of "
                               f"{_size(self.caps.unpacked)}", status=413)
        first = block.find(b"\n")
        if first < 0:
            self.line += len(block)
        else:
            self.longest = max(self.longest, self.line + first)
            self.line = len(block) - block.rfind(b"\n") - 1
        if self.line > self.caps.record:
            raise _record_error(self.caps.record)
        self.digest.update(block)
        self.plain.write(block)
        if self.packer is not None and self.packed is not None:
            self.packed.write(self.packer.compress(block))

    def close(self) -> None:
        self.longest = max(self.longest, self.line)
        if self.packer is not None and self.packed is not None:
            self.packed.write(self.packer.flush())


def _record_error(limit: int) -> ServiceError:
    return ServiceError(f"a line (or a file that is one JSON document) is larger than the "
                        f"server's limit of {_size(limit)} per record", status=413)


def unpack_upload(stream: IO[bytes], plain: Path, packed: Path, caps: UploadCaps) -> Unpacked:
    """Copy an upload to ``plain`` (unpacked when it is gzip) and ``packed`` (its gzip form),
    block by block. 413 once the upload as sent, its unpacked size, one line, or the ratio of
    unpacked to packed bytes (after the first MB) passes its cap; 422 for a broken gzip, or a
    gzip whose content is gzip again (refused in its first bytes)."""
    head = stream.read(2)
    gzipped = head == _GZIP_MAGIC
    with plain.open("wb") as out, packed.open("wb") as copy:
        writer = _Writer(out, None if gzipped else copy, caps, unpacking=gzipped)
        if gzipped:
            sent = _gunzip_stream(stream, head, writer, copy, caps)
        else:
            sent = len(head)
            writer.write(head)
            while block := stream.read(_CHUNK):
                sent += len(block)
                if sent > caps.packed:
                    raise _sent_error(caps.packed)
                writer.write(block)
        writer.close()
    if writer.size > caps.record and not _is_json_lines(plain, caps.record):
        raise _record_error(caps.record)
    return Unpacked(writer.digest.hexdigest(), writer.size, sent)


def _sent_error(limit: int) -> ServiceError:
    return ServiceError(f"the upload is larger than the server's limit of {_size(limit)}",
                        status=413)


def _gunzip_stream(stream: IO[bytes], head: bytes, writer: _Writer, copy: IO[bytes],
                   caps: UploadCaps) -> int:
    """Unpack the gzip members of ``stream`` into ``writer`` (the bytes as sent go to
    ``copy``); returns how many were sent. The ratio is checked on every block out, so a bomb
    stops within its first MBs of output."""
    sent = len(head)
    copy.write(head)

    def read() -> bytes:
        nonlocal sent
        block = stream.read(_CHUNK)
        sent += len(block)
        if sent > caps.packed:
            raise _sent_error(caps.packed)
        copy.write(block)
        return block

    unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
    consumed = 0
    pending = head
    try:
        while pending or (pending := read()):
            if unpacker.eof:  # what follows a member: another member, or zero padding
                if not pending.strip(b"\0"):
                    pending = b""
                    continue
                unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
            before = len(pending)
            block = unpacker.decompress(pending, _CHUNK)
            pending = unpacker.unconsumed_tail or unpacker.unused_data
            consumed += before - len(pending)
            writer.write(block)
            if writer.size > _RATIO_AFTER and writer.size > caps.ratio * consumed:
                raise ServiceError(
                    f"the upload unpacks to more than {caps.ratio:g} times its packed size "
                    f"(the server's limit; a gzip bomb?)", status=413)
        while not unpacker.eof and (block := unpacker.decompress(b"", _CHUNK)):
            writer.write(block)  # output zlib still held when the input ran out
        if not unpacker.eof:
            raise EOFError("the gzip stream ends early")
    except (zlib.error, EOFError) as exc:
        raise ServiceError(f"not a valid gzip file: {exc}", status=422, field="file") from None
    return sent


def _is_json_lines(path: Path, limit: int) -> bool:
    """Whether the file's first line holds a whole JSON object (JSON Lines: each line is its
    own record); otherwise the whole file is one document."""
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                try:
                    return isinstance(json.loads(raw), dict) and len(raw) <= limit
                except (ValueError, RecursionError):
                    return False
    return True
