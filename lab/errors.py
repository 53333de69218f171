"""The one error hierarchy of corpus-lab, one class per thing the user does next.

- ``ConfigError``: the user's input is wrong (a config key or value, a flag, a path): fix it. Exits 2.
- ``RunStateError``: the run directory is not in a state for what was asked (another process writes
  it; a batch run asked for other thresholds); ``NotReadyError`` names the step to run first. Exits 3.
- ``IntegrityError``: a file is not what the run or its format says (a tokenizer's sha256, a truncated
  shard, a JSON file that does not parse); the message names the file and the fix. Exits 4.
- ``DiskFullError``: the run's filesystem is full: free space and rerun (it resumes). Exits 5.
- ``StoreUnreachableError``: the object store of the inputs or the run does not answer: check the
  endpoint and the network, then rerun (it resumes). Exits 6.

Programming errors stay ``ValueError``/``TypeError``/``AssertionError``. A partition that fails while it
is read is no error of this kind: the engine quarantines it in ``rejects/`` and goes on.
"""

import errno


class LabError(Exception):
    """Base of every error corpus-lab raises on purpose."""


class ConfigError(LabError):
    """Bad configuration or arguments; the message names the key, the value, what is allowed and the fix."""


class RunStateError(LabError):
    """The run directory is not in a state for what was asked (another process is writing it, or a batch
    run is asked about other thresholds); the message names what holds it and what to do."""


class NotReadyError(RunStateError):
    """A step the request needs has not run on this run (no signals, token counts, shards, fertility
    table, labels); the message names what is missing and the command that makes it."""


class IntegrityError(LabError):
    """A file differs from what the run recorded or what its format allows (a hash, a size, a format
    version, unparseable JSON); the message names the file, expected vs found, and the fix."""


class DiskFullError(LabError):
    """The run's filesystem is full (ENOSPC, or a quota: EDQUOT): stop the run, never quarantine a partition
    for it. Whatever was written atomically stays valid, so a rerun resumes from the completed partitions."""

    @classmethod
    def writing(cls, path: object) -> "DiskFullError":
        err = cls(f"no space left on device writing {path}: free some space or point --output-dir elsewhere; "
                  "a rerun resumes from the completed partitions")
        err.path = str(path)
        return err

    @staticmethod
    def is_disk_full(error: BaseException) -> bool:
        """Whether ``error`` says the disk (or a quota) is full.

        >>> import errno
        >>> DiskFullError.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
        True
        """
        return isinstance(error, DiskFullError) or (
            isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT))


class StoreUnreachableError(LabError):
    """The object store holding the inputs or the run does not answer (connection refused, timed out, no
    route): stop the run, never quarantine a partition for it; a rerun resumes from what was committed."""

    @classmethod
    def wrap(cls, error: BaseException, where: str) -> BaseException:
        """``error`` as this error naming the endpoint, when it is a connection failure; else ``error``."""
        if isinstance(error, cls) or not cls.is_unreachable(error):
            return error
        endpoint = _endpoint(error) or where
        return cls(f"cannot reach the object store at {endpoint} (for {where}): {_root(error)}; check that the "
                   "endpoint is up and reachable from this machine (and AWS_ENDPOINT_URL or the store's own "
                   "settings), then rerun the same command: it resumes from the partitions already committed")

    @staticmethod
    def is_unreachable(error: BaseException) -> bool:
        """Whether ``error`` (or what caused it) is a failure to connect to a server.

        >>> StoreUnreachableError.is_unreachable(OSError("x")), StoreUnreachableError.is_unreachable(
        ...     ConnectionRefusedError(111, "refused"))
        (False, True)
        """
        for e in _chain(error):
            name = type(e).__name__
            if isinstance(e, (ConnectionError, StoreUnreachableError)) or name in (
                    "EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError", "ServerDisconnectedError",
                    "ConnectionClosedError", "ServerTimeoutError"):
                return True
        return False


_CREDENTIALS = ("NoCredentialsError", "PartialCredentialsError", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                "ExpiredToken", "DefaultCredentialsError", "ClientAuthenticationError", "CredentialUnavailableError")


def store_error(error: BaseException, where: str) -> BaseException:
    """A store client's exception as the error a user acts on: a server that does not answer as
    ``StoreUnreachableError``; credentials missing or refused as ``ConfigError`` saying where they are read
    from; anything else as it is.

    >>> class NoCredentialsError(Exception): pass
    >>> type(store_error(NoCredentialsError("Unable to locate credentials"), "s3://b/runs")).__name__
    'ConfigError'
    """
    if StoreUnreachableError.is_unreachable(error):
        return StoreUnreachableError.wrap(error, where)
    if any(type(e).__name__ in _CREDENTIALS or any(c in str(e) for c in _CREDENTIALS) for e in _chain(error)):
        return ConfigError(f"{where}: the object store has no valid credentials from this machine ({_root(error)}); "
                           "set them where the store's library reads them (S3: AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE and ~/.aws/credentials; GCS: "
                           "GOOGLE_APPLICATION_CREDENTIALS; Azure: AZURE_STORAGE_CONNECTION_STRING), never in the config")
    return error


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _endpoint(error: BaseException) -> str | None:
    for e in _chain(error):
        url = getattr(e, "kwargs", {}).get("endpoint_url") if isinstance(getattr(e, "kwargs", None), dict) else None
        if url:
            return str(url).split("?")[0]
    return None


def _root(error: BaseException) -> str:
    last = list(_chain(error))[-1]
    return f"{type(last).__name__}: {last}"
