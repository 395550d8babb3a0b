"""esjet for Python (asyncio, nats-py): the API client and a receiver that
applies a worker's command exactly once. Speaks wire spec 1.x (spec/)."""

from .client import SPEC_VERSION, Client
from .errors import ConflictError, EsjetError, Failure, InProgressError, InvalidKeyError, NotRecordedError, StaleError, retryable, terminal
from .receiver import Outcome, Receiver, digest_of, encode_key, parse_fence, reply_for

__all__ = [
    "SPEC_VERSION", "Client", "ConflictError", "EsjetError", "Failure", "InProgressError", "InvalidKeyError",
    "NotRecordedError", "StaleError", "retryable", "terminal", "Outcome", "Receiver", "digest_of", "encode_key",
    "parse_fence", "reply_for",
]
