"""The one error hierarchy of corpus-lab.

``ConfigError`` means the user's input (config, paths, flags) is wrong: stop before any work.
``ShardError`` means one piece of input cannot be read: quarantine it to ``rejects/`` and go on.
``DiskFullError`` means the run's filesystem is full: stop with a clear message (a rerun resumes).
``RunStateError`` means the run directory is not in a state for this: another run is writing it.
"""

import errno


class LabError(Exception):
    """Base of every error corpus-lab raises on purpose."""


class ConfigError(LabError):
    """Bad configuration or arguments; the message names the key, the value, what is allowed and the fix."""


class RunStateError(LabError):
    """The run directory is not in a state for what was asked (another process is writing it); the
    message names what holds it and what to do."""


class ShardError(LabError):
    """A partition or record that cannot be read; recorded in ``rejects/`` with its location."""


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
