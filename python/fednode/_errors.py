"""fednode's errors, one class per kind of failure, each carrying the exit status `fednode` gives it
(docs/cli.md, "Exit status"), so that a script can treat both the same way."""


class Error(Exception):
    """Any failure fednode reports; `exit_status` is what the fednode command would exit with."""

    exit_status = 1


class InputError(Error, ValueError):
    """A file, setting, array or key that cannot be used; the message names what and where."""

    exit_status = 1


class UsageError(Error, ValueError):
    """A keyword (an option of the command line) that is unknown, missing or out of range."""

    exit_status = 2


class NetworkError(InputError):
    """An address this machine cannot listen on, or a network that cannot be reached."""

    exit_status = 5


class SecurityError(InputError):
    """Bytes or keys that fail authentication: a forged, tampered or replayed message."""

    exit_status = 1
