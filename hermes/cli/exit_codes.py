"""Exit statuses of the `hermes` command, so scripts can tell failures apart."""

from hermes.actors.errors import HermesError, Invalid, NotFound, Unavailable

OK = 0
FAILED = 1  # something broke while running; see the log
USAGE = 2  # bad command line or bad config.yaml
BUSY = 75  # EX_TEMPFAIL: another serve holds this home, or the port is taken


def of_error(exc: HermesError) -> int:
    """An error's exit status, by its family: a wrong request is a usage error, a part
    that is stopped or busy is temporary, anything else (a thing not found) failed."""
    if isinstance(exc, NotFound):
        return FAILED
    if isinstance(exc, Invalid):
        return USAGE
    if isinstance(exc, Unavailable):
        return BUSY
    return FAILED
