"""The one error hierarchy of corpus-lab.

``ConfigError`` means the user's input (config, paths, flags) is wrong: stop before any work.
``ShardError`` means one piece of input cannot be read: quarantine it to ``rejects/`` and go on.
"""


class LabError(Exception):
    """Base of every error corpus-lab raises on purpose."""


class ConfigError(LabError):
    """Bad configuration or arguments; the message names the key, the value, what is allowed and the fix."""


class ShardError(LabError):
    """A partition or record that cannot be read; recorded in ``rejects/`` with its location."""
