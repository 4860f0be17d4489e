"""Errors of :mod:`mlbridge.corpus`."""

from __future__ import annotations

from mlbridge.errors import MLBridgeError

__all__ = ["ChecksumError", "CorpusError"]


class CorpusError(MLBridgeError):
    """The corpus cannot be fetched, built or read; the message says why and what to do."""


class ChecksumError(CorpusError):
    """A source archive's sha256 differs from the one pinned in the recipe."""
