"""One root error and a few narrow subclasses.

Errors are for unusable input (not a store, unreadable file, bad option) and for our own bugs.
Damaged bytes inside a readable store are *findings* (see :mod:`mqtool.findings`), never exceptions.
"""
from __future__ import annotations


class MqToolError(Exception):
    """Root of every error mqtool raises on purpose.

    ``file`` and ``offset`` (when known) are rendered into the one-line message the CLI prints.
    """

    exit_code = 2
    hint: str | None = None     # a next command to suggest (see mqtool.hints); printed on its own stderr line

    def __init__(self, message: str, file: str | None = None, offset: int | None = None,
                 hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.offset = offset
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:  # one line: "<file>@<offset>: message"
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.offset is not None:
                where += f"@{self.offset}"
            where += ": "
        return where + self.message.replace("\n", " ")


class UsageError(MqToolError):
    """The command line asks for something that cannot be done."""


class NotAStoreError(MqToolError):
    """The path is not a store (or store part) of any family we know."""


class InputError(MqToolError):
    """An input file cannot be opened or read (permissions, FIFO, vanished...)."""


class DecodeError(MqToolError):
    """Bytes that do not decode as their format says: a compressed payload (:class:`mqtool.codecs.CodecError`),
    a record, a construct schema's parse (:func:`wrap_decode`). Inside a scan these become findings; one only
    reaches the user where a single unit was asked for."""


def wrap_decode(e: Exception, file: str | None = None, offset: int | None = None) -> DecodeError:
    """A decoder's own exception (construct's ConstructError, struct.error...) as a :class:`DecodeError`
    naming file and offset; raise it ``from e``."""
    return DecodeError(f"cannot decode: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file, offset)


class CorruptRecordError(DecodeError):
    """A record cannot be decoded at a given position (used where a single record was asked for)."""

    exit_code = 1

    def __init__(self, message: str, file: str | None = None, offset: int | None = None,
                 expected=None, actual=None, hint: str | None = None):
        super().__init__(message, file, offset, hint)
        self.expected = expected
        self.actual = actual


class OutputError(MqToolError):
    """An output location is refused (inside the input tree, not empty without --force...)."""
