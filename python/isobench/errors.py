"""The two kinds of error the command line turns into exit codes.

Everything the user can get wrong (a name, an option value, a path) raises
UsageError and ends as one line on stderr with exit code 2.  A native driver
that cannot even say what it has raises DriverError (exit code 1): the
invocation was right, the machine or the build is not.
"""


class UsageError(Exception):
    """Bad input from the user: exit code 2, one line, no traceback."""


class DriverError(Exception):
    """The native driver could not answer a question we must ask first."""


class StoreError(UsageError):
    """The store file cannot be opened, created or read as an isobench store.

    A subclass of UsageError because it is always about the --db path the user
    gave (or the default one): the fix is on their side.
    """
