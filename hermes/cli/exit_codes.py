"""Exit statuses of the `hermes` command, so scripts can tell failures apart."""

OK = 0
FAILED = 1  # something broke while running; see the log
USAGE = 2  # bad command line or bad config.yaml
BUSY = 75  # EX_TEMPFAIL: another serve holds this home, or the port is taken
