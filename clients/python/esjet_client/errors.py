"""Errors: the API's (with the spec's code and status) and the receiver's."""

from __future__ import annotations

from typing import Any, Optional

RETRY_WITH_SAME_KEY = ("outcome_unknown", "stopping", "unavailable", "conflict")


class EsjetError(Exception):
    """An error the esjet API answered, or that the client refused before
    sending with the code the node would have answered. ``code`` is one of
    the spec's codes (spec/spec.json) or a domain's rejection code (422)."""

    def __init__(self, code: str, status: int, message: str, version: Optional[int] = None):
        super().__init__(message or code)
        self.code = code
        self.status = status
        self.message = message or code
        self.version = version  # the aggregate's actual version, on version_conflict

    @property
    def retry_with_same_key(self) -> bool:
        """True when the request may have been recorded: retry with the same key."""
        return self.code in RETRY_WITH_SAME_KEY


class ConflictError(Exception):
    """The idempotency key was first used with different parameters: terminal."""


class StaleError(Exception):
    """A newer attempt (a higher fence) of this key was seen: the effect did not run."""


class InProgressError(Exception):
    """Another delivery of the key holds a fresh claim and the wait ended first: retryable."""


class InvalidKeyError(Exception):
    """The idempotency key is empty or longer than 512 bytes."""


class NotRecordedError(Exception):
    """The effect ran and succeeded but its result was not recorded (``result``)."""

    def __init__(self, message: str, result: Any):
        super().__init__(message)
        self.result = result


class Failure(Exception):
    """An effect's failure as the worker must read it: ``retryable`` False is
    failed for good, True is try again (after ``retry_after_ms``)."""

    def __init__(self, message: str, retryable: bool, retry_after_ms: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after_ms = retry_after_ms


def terminal(message: str) -> Failure:
    """A failure the worker must not retry."""
    return Failure(message, retryable=False)


def retryable(message: str, retry_after_ms: Optional[int] = None) -> Failure:
    """A failure the worker retries."""
    return Failure(message, retryable=True, retry_after_ms=retry_after_ms)
